"""The scorer protocol and the tiny adapters over the pure matchers.

A scorer turns one ``(Sample, Prediction)`` into one ``Score``. It never invents a number
for something it could not judge: an errored prediction gives ``ScoreStatus.ERROR``, a
sample without a reference gives ``ScoreStatus.NO_ANSWER``; both are excluded from the
averages and counted in the report.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from groundscope.client.gate import Gate, RateGate
from groundscope.defaults import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RATE_LIMIT_BUDGET,
    DEFAULT_RETRY_BASE_DELAY,
    DEFAULT_RETRY_MAX_DELAY,
    DEFAULT_TIMEOUT,
)
from groundscope.errors import GroundscopeError
from groundscope.types import Prediction, PredictionStatus, Sample, Score, ScoreStatus

if TYPE_CHECKING:
    from groundscope.client.cache import ResponseCache
    from groundscope.client.chat import ChatClient
    from groundscope.client.gate import Gate
    from groundscope.config import JudgeConfig, JudgeModel, TaskConfig

T = TypeVar("T")
log = logging.getLogger("groundscope")

class TooLongToScore(ValueError):
    """A pure matcher's inputs would cost more than its documented bound (the message names
    it); the scorer records a failed score (``ScoreStatus.ERROR``), never a value."""


BLEU_KEYS = tuple(f"bleu-{n}" for n in range(1, 5))
ROUGE_KEYS = tuple(f"rouge-{v}-{s}" for v in ("1", "2", "l") for s in ("r", "p", "f"))


@dataclass
class ScoringContext:
    """What scorers may need beyond a sample and its prediction, shared by one run.

    ``run_dir`` is where scorers keep their caches (e.g. judge replies); ``judge`` is the
    run's judge config; ``mock_url`` is the URL of the offline simulator that serves
    ``api_url: "mock"`` judges, handed over by whoever started it (the runner in
    ``eval_type=mock``, ``groundscope score``); ``timeout``, ``max_retries`` and the retry
    delays (``retry_base_delay``, ``retry_max_delay``) and ``rate_limit_budget`` (how long a
    429 is retried past the count) apply to each judge request (transport retries), as to
    the model's; ``max_response_bytes`` caps each judge reply's size;
    ``judge_gate`` gives a judge endpoint's client its admission gate (default: its own);
    ``reply_cache`` makes a purpose's reply cache (default: a file in ``run_dir``).
    Resources a scorer opens (HTTP clients, cache files) are registered with
    ``on_close`` and released by ``aclose()`` at the end of the run; objects several scorers
    share (the judge panel, a response cache) are made once by ``shared(key, factory)``.
    ``gates`` holds the admission gate of every endpoint the run talks to, by the name the
    summary shows (``model``, ``judge:<model_id>``): :meth:`gate` makes one per endpoint
    and model, so two panels asking one judge model share its rate limits.
    """

    run_dir: Path | None = None
    judge: JudgeConfig | None = None
    judge_concurrency: int = 8
    seed: int = 42
    mock_url: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY
    rate_limit_budget: float = DEFAULT_RATE_LIMIT_BUDGET
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    judge_clients: list[ChatClient] = field(default_factory=list)  # connected: the live view
    # the admission gate of a judge endpoint's client; None: the run's own (gate())
    # (a Ray worker plugs in gates shared by every worker: scaleout/worker.py)
    judge_gate: Callable[[JudgeModel], Gate] | None = None
    # makes the judge reply cache of a purpose; None: <run_dir>/cache/<purpose>.jsonl
    reply_cache: Callable[[str], ResponseCache] | None = None
    gates: dict[str, Gate] = field(default_factory=dict)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _shared: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: TaskConfig, run_dir: Path | None = None) -> ScoringContext:
        """The context of a run of ``cfg``: the one place ``eval``, ``score`` and ``report``
        make it (judges get ``judge_concurrency`` requests at once, else ``eval_batch_size``)."""
        return cls(run_dir=run_dir, judge=cfg.judge, seed=cfg.seed,
                   judge_concurrency=cfg.judge_concurrency or cfg.eval_batch_size,
                   timeout=cfg.timeout, max_retries=cfg.max_retries,
                   retry_base_delay=cfg.retry_base_delay, retry_max_delay=cfg.retry_max_delay,
                   rate_limit_budget=cfg.rate_limit_budget,
                   max_response_bytes=cfg.max_response_bytes)

    def on_close(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(fn)

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """The run-wide object under ``key``, made by ``factory()`` on first request."""
        if key not in self._shared:
            self._shared[key] = factory()
        return self._shared[key]  # type: ignore[no-any-return]

    def gate(self, name: str, api_url: str, model: str, concurrency: int, *,
             rpm: int | None = None, tpm: int | None = None, max_pause: float = 30.0) -> Gate:
        """The gate of ``model`` at ``api_url`` (made on first request, shown as ``name``);
        ``max_pause`` caps one pause, as the retry policy's ``max_delay`` caps one wait."""
        made: Gate = self.shared(f"gate:{api_url}\x1f{model}", lambda: RateGate(
            concurrency, rpm=rpm, tpm=tpm, max_pause=max_pause))
        self.gates.setdefault(name, made)
        return made

    async def aclose(self) -> None:
        closers, self._closers = self._closers, []
        for fn in reversed(closers):
            await fn()


class Scorer(Protocol):
    """Scores one prediction. ``keys`` are the metric keys its OK scores carry."""

    name: str
    keys: tuple[str, ...]

    async def score(self, sample: Sample, prediction: Prediction) -> Score: ...


async def score_safely(scorer: Scorer, sample: Sample, prediction: Prediction,
                       redact: Callable[[str], str] = str) -> Score:
    """``scorer.score(...)``, with a scorer that crashes (a bug, a reply no contract
    foresaw) recorded as an ``ERROR`` score naming the exception, never a traceback that
    ends the run. ``GroundscopeError`` (bad config, a run directory that cannot be written)
    still ends it. ``redact`` removes secrets from the saved error text. Called on the one
    sample path (``pipeline.py``) of ``eval`` and ``groundscope score`` alike."""
    try:
        return await scorer.score(sample, prediction)
    except GroundscopeError:
        raise
    except Exception as exc:
        error = redact(f"{type(exc).__name__}: {exc}")
        log.error("%s: scorer %s failed: %s", sample.origin, scorer.name, error)
        return Score(sample.id, scorer.name, ScoreStatus.ERROR, detail={"error": error},
                     repeat=prediction.repeat)


def unusable(sample: Sample, prediction: Prediction, scorer: str) -> Score | None:
    """The non-OK score for an errored prediction, or None when it can be scored."""
    if prediction.status is not PredictionStatus.OK or prediction.completion is None:
        return Score(sample.id, scorer, ScoreStatus.ERROR,
                     detail={"error": prediction.error or "no completion"},
                     repeat=prediction.repeat)
    return None


@dataclass(frozen=True, slots=True)
class ReferenceScorer:
    """Adapts a pure ``fn(prediction, reference) -> {key: value}`` matcher.

    With several references the best value per key is kept (max over references).
    """

    name: str
    keys: tuple[str, ...]
    fn: Callable[[str, str], Mapping[str, float]]
    warm: Callable[[], None] | None = None  # one-off set-up a runner may do ahead of time

    def score_text(self, sample: Sample, prediction: Prediction) -> Score:
        bad = unusable(sample, prediction, self.name)
        if bad is not None:
            return bad
        refs = [r for r in sample.target if r.strip()]
        if not refs:
            return Score(sample.id, self.name, ScoreStatus.NO_ANSWER,
                         detail={"reason": "the record has no reference answer"},
                         repeat=prediction.repeat)
        text = prediction.text
        best: dict[str, float] = {}
        try:
            for ref in refs:
                for key, value in self.fn(text, ref).items():
                    if value > best.get(key, -1.0):
                        best[key] = value
        except TooLongToScore as exc:
            return Score(sample.id, self.name, ScoreStatus.ERROR, detail={"error": str(exc)},
                         repeat=prediction.repeat)
        return Score(sample.id, self.name, ScoreStatus.OK, values=best, repeat=prediction.repeat)

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        return self.score_text(sample, prediction)


@dataclass(frozen=True, slots=True)
class ChoiceScorer:
    """Multiple-choice accuracy: the extracted letter equals the reference letter."""

    name: str = "accuracy"
    keys: tuple[str, ...] = ("accuracy",)

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        from groundscope.scoring.choice import extract_choice

        bad = unusable(sample, prediction, self.name)
        if bad is not None:
            return bad
        if not sample.target:
            return Score(sample.id, self.name, ScoreStatus.NO_ANSWER,
                         detail={"reason": "the record has no answer letter"},
                         repeat=prediction.repeat)
        text = prediction.text
        letter = extract_choice(text, sample.choices)
        value = 1.0 if letter is not None and letter == sample.target[0] else 0.0
        return Score(sample.id, self.name, ScoreStatus.OK, values={"accuracy": value},
                     extracted=letter, repeat=prediction.repeat)


def exact_match(prediction: str, reference: str) -> dict[str, float]:
    """1.0 when the stripped prediction equals the stripped reference, else 0.0.

    >>> exact_match(" Dog ", "Dog")
    {'exact_match': 1.0}
    """
    return {"exact_match": 1.0 if prediction.strip() == reference.strip() else 0.0}
