"""Grade answers you already have, from Python: the seed's ``MultiModalEvaluator``.

A thin façade over the run's own path. Each answer becomes a ``Sample`` (the question and the
images) and a saved ``Prediction`` (the answer), and goes through
``pipeline.evaluate_sample`` with no model client, as ``groundscope score`` re-scores a saved
answer: the same scorer objects (``scoring.build_scorers``: ``grounding``, ``completeness``,
``consistency``), the same ``JudgePanel``, prompts (texts quoted), bounds, reply caches,
redaction and usage metering as ``groundscope eval`` with ``metric_list: [grounding,
completeness, consistency]``. The figures are therefore those of a run on the same answers
with the same judge block (a test compares them with the CLI's on the grounding demo).

>>> from groundscope import MultiModalEvaluator
>>> ev = MultiModalEvaluator(judge={"models": {"model_id": "j", "api_url": "http://127.0.0.1:1/v1"}})
>>> sorted(ev.scorers)
['completeness', 'consistency', 'grounding']

Where the seed's sketch is wrong on purpose:

- an answer with no checkable claim (an empty answer, a refusal) is ``status="no_answer"``
  with ``grounding_score`` / ``hallucination_rate`` None: it is excluded from averages, not
  scored 0 (the sketch's ``else 0.0`` reads "I don't know" as fully ungrounded);
- a claim is verified into ``supported`` / ``contradicted`` / ``not_determinable`` (not a
  substring test for "YES"), each grounding model's majority of ``votes``; the answer-level
  ``hallucinated`` flag means a *contradicted* claim;
- :meth:`MultiModalEvaluator.evaluate_consistency` compares answers by meaning (normalised
  forms, then the judge's ``equivalence`` step for free-form pairs) and returns the share of
  agreeing answer pairs, not ``1 - (distinct - 1) / n`` over punctuation-stripped strings
  (which counts "2" and "two wheels" as disagreeing);
- ``consistency_score`` of one answer is None (it needs several), not 0.0.

Images may be a path (read only inside the media roots: the working directory and
``media_roots``, as in a run), bytes, a Pillow image, an http(s) URL, or a list of these.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from groundscope.config import JudgeConfig, JudgeModel, format_validation_error
from groundscope.defaults import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from groundscope.errors import ConfigError, GroundscopeError
from groundscope.media import check, media_from_value, media_roots_in_force
from groundscope.pipeline import Saved, evaluate_sample
from groundscope.redaction import Redactor
from groundscope.rowcodec import prediction_to_json, score_to_json
from groundscope.scoring import GROUNDING_METRICS, ScoringContext, build_scorers
from groundscope.scoring.groups import GroupStage
from groundscope.scoring.judge import mock_judged
from groundscope.types import (
    Completion,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Prediction,
    PredictionStatus,
    Sample,
    Score,
    ScoreStatus,
    TextPart,
)
from groundscope.usage import UsageSummary

if TYPE_CHECKING:
    from groundscope.client.chat import ChatClient

__all__ = ["ClaimVerdict", "MultiModalEvaluator", "MultiModalMetrics", "VQAItem"]

_ORIGIN = Origin(Path("<python>"), 0)
_DATASET, _SUBSET = "general_vqa", "python"
MAX_IMAGES = 64  # images of one answer (TaskConfig.max_media_per_record's default)
MAX_QUERIES = 64  # paraphrases of one consistency check (a group's first 16 are scored)


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """One claim of an answer: its text, the verdict (``supported`` / ``contradicted`` /
    ``not_determinable``; None when no judge voted), the reason and each vote."""

    text: str
    verdict: str | None
    reason: str
    votes: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class MultiModalMetrics:
    """The seed's four figures of one answer, plus what they rest on.

    ``grounding_score`` = counted supported claims / counted claims, ``hallucination_rate``
    = 1 - that (under ``judge.grounding.not_determinable``); ``completeness_score`` = the
    share of ``elements`` the answer mentions (None without elements); ``consistency_score``
    is None here (see ``evaluate_consistency``). ``status`` is the grounding step's
    (``ok``, ``no_answer``: no checkable claim, ``judge_failed``, ``error``) and ``reason``
    says why it is not ``ok``. ``details`` holds each scorer's saved review row (as in a
    run's reviews), ``usage`` the judge calls made for this answer by step and model.
    """

    grounding_score: float | None
    consistency_score: float | None
    completeness_score: float | None
    hallucination_rate: float | None
    hallucinated: bool | None = None
    claims: tuple[ClaimVerdict, ...] = ()
    status: str = ScoreStatus.OK.value
    reason: str | None = None
    details: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VQAItem:
    """One answer to grade in :meth:`MultiModalEvaluator.evaluate_many`."""

    image: Any
    question: str
    answer: str
    elements: Sequence[str] | None = None
    references: Sequence[str] | None = None


class MultiModalEvaluator:
    """Grades existing answers about images with the run's grounding scorers.

    ``judge`` is the ``--judge`` block (a dict or a ``JudgeConfig``); its grounding models
    are ``judge.grounding.models`` else ``judge.models``. ``model`` (optional) is the
    endpoint ``evaluate_consistency`` asks each paraphrase when no answers are given: a
    dict of ``model_id`` (or ``model``, as the task config names it), ``api_url``,
    ``api_key``, ``eval_type``, ``generation_config``, as one judge model entry.
    ``cache_dir``: the judge replies are cached in ``<cache_dir>/cache/<step>.jsonl`` as in
    a run directory (None: in memory, for this evaluator's life). ``media_roots``: folders
    local images may be read from besides the working directory. ``concurrency`` bounds
    the requests in flight per judge model and the answers :meth:`evaluate_many` grades at
    once.

    Use it as ``async with MultiModalEvaluator(...) as ev:`` (or ``await ev.aclose()``).
    """

    def __init__(self, judge: JudgeConfig | Mapping[str, Any], *,
                 model: JudgeModel | Mapping[str, Any] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None,
                 media_roots: Iterable[str | os.PathLike[str]] = (), concurrency: int = 8,
                 timeout: float = DEFAULT_TIMEOUT, max_retries: int = DEFAULT_MAX_RETRIES,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        if not 1 <= concurrency <= 1024:
            raise ConfigError(f"concurrency: expected 1..1024, got {concurrency}")
        self.judge = _validated(JudgeConfig, judge, "judge")
        if mock_judged(self.judge):
            raise ConfigError("judge: api_url 'mock' names a run's own simulator; start one "
                              "(groundscope simulate ...) and give its URL instead")
        if isinstance(model, Mapping) and "model" in model and "model_id" not in model:
            model = {("model_id" if k == "model" else k): v for k, v in model.items()}
        self.model = None if model is None else _validated(JudgeModel, model, "model")
        roots = [os.getcwd(), *media_roots]
        for root in roots:
            if not os.path.isdir(root):
                raise ConfigError(f"media_roots: not a directory: {root}")
        self.media_roots = tuple(roots)
        self.concurrency = concurrency
        self.usage = UsageSummary()  # every judge (and model) call of this evaluator
        self._ctx = ScoringContext(run_dir=Path(cache_dir) if cache_dir is not None else None,
                                   judge=self.judge, judge_concurrency=concurrency,
                                   timeout=timeout, max_retries=max_retries,
                                   max_response_bytes=max_response_bytes)
        self.scorers = {s.name: s for s in build_scorers(GROUNDING_METRICS, self._ctx)}
        secrets = [s for m in self.judge.all_models() for s in m.secrets()]
        self._redactor = Redactor([*secrets, *(self.model.secrets() if self.model else ())])
        self._client: ChatClient | None = None
        self._count = 0

    async def __aenter__(self) -> MultiModalEvaluator:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the judge and model clients and the reply caches."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        await self._ctx.aclose()

    async def evaluate_vqa_response(self, image_path: Any, question: str, answer: str, *,
                                    elements: Sequence[str] | None = None,
                                    references: Sequence[str] | None = None
                                    ) -> MultiModalMetrics:
        """Grounding (claims verified against the image) and, with ``elements``, completeness
        of one ``answer`` to ``question``. A bad image is a ``MediaError`` (one line)."""
        with self._roots():
            sample = self._sample(self._next_id(), image_path, question, elements, references)
            return await self._grade(sample, self._saved(sample, answer))

    async def evaluate_many(self, items: Iterable[VQAItem | Mapping[str, Any]], *,
                            concurrency: int | None = None) -> list[MultiModalMetrics]:
        """:meth:`evaluate_vqa_response` of every item (a :class:`VQAItem` or a mapping of
        its fields), at most ``concurrency`` (default: the evaluator's) at once, in input
        order. An item whose image is unusable gives ``status="error"`` and its reason; the
        others are graded."""
        n = self.concurrency if concurrency is None else concurrency
        if not 1 <= n <= 1024:
            raise ConfigError(f"concurrency: expected 1..1024, got {n}")
        limit = asyncio.Semaphore(n)

        async def one(raw: VQAItem | Mapping[str, Any]) -> MultiModalMetrics:
            async with limit:
                try:
                    item = raw if isinstance(raw, VQAItem) else VQAItem(**raw)
                    sample = self._sample(self._next_id(), item.image, item.question,
                                          item.elements, item.references)
                    saved = self._saved(sample, item.answer)
                except (GroundscopeError, TypeError, ValueError) as exc:
                    return _failed(self._redactor.redact(f"{type(exc).__name__}: {exc}"))
                return await self._grade(sample, saved)

        with self._roots():
            return list(await asyncio.gather(*(one(i) for i in items)))

    async def evaluate_consistency(self, image_path: Any, queries: Sequence[str], *,
                                   answers: Sequence[str] | None = None,
                                   references: Sequence[str] | None = None) -> float:
        """Agreement of the answers to paraphrased ``queries`` about one image: the share of
        answer pairs that mean the same (see the module docstring), as a run's
        ``consistency``. The answers are ``answers`` (one per query) or, without them, asked
        of ``model``. A group that cannot be scored (fewer than two answers, a failed
        request or equivalence check) raises ``GroundscopeError`` saying why."""
        if not 2 <= len(queries) <= MAX_QUERIES:
            raise ValueError(f"queries: expected 2..{MAX_QUERIES} paraphrases, got {len(queries)}")
        if answers is not None and len(answers) != len(queries):
            raise ValueError(f"answers: {len(answers)} answers for {len(queries)} queries")
        if answers is None and self.model is None:
            raise ConfigError("evaluate_consistency without answers needs model=... (an endpoint)")
        scorer = self.scorers["consistency"]
        stage = GroupStage([scorer])
        group = f"g{self._next_id()}"
        with self._roots():
            client = None if answers is not None else await self._model_client()
            samples = [self._sample(f"{group}#p{k}", image_path, query, None, references,
                                    group=group) for k, query in enumerate(queries)]
            results = await asyncio.gather(*(
                evaluate_sample(s, 0, [scorer], client=client,
                                saved=Saved() if answers is None else self._saved(s, answers[k]),
                                redact=self._redactor.redact) for k, s in enumerate(samples)))
            errors = [r.predicted.prediction.error for r in results if r.predicted.prediction.error]
            for result in results:
                self._count_model(result.predicted.prediction, asked=client is not None)
                for scored in result.scores:
                    stage.collect(_SUBSET, scored.score)
            ((_, score, _),) = await stage.finish()
        self.usage.add_calls(score.usage)
        value = score.values.get("consistency")
        if score.status is not ScoreStatus.OK or value is None:
            why = score.detail.get("judge_failed") or score.detail.get("reason") or score.status
            failed = f" ({len(errors)} model requests failed: {errors[0]})" if errors else ""
            raise GroundscopeError(f"consistency not scored: {why}{failed}")
        return float(value)

    # -- the one path -------------------------------------------------------------------

    async def _grade(self, sample: Sample, saved: Saved) -> MultiModalMetrics:
        scorers = [self.scorers["grounding"]]
        if sample.metadata.get("elements"):
            scorers.append(self.scorers["completeness"])
        result = await evaluate_sample(sample, 0, scorers, client=None, saved=saved,
                                       redact=self._redactor.redact)
        scores = {s.score.scorer: s.score for s in result.scores}
        for s in scores.values():
            self.usage.add_calls(s.usage)
        return _metrics(scores)

    def _sample(self, sid: str, images: Any, question: str, elements: Sequence[str] | None,
                references: Sequence[str] | None, **meta: Any) -> Sample:
        _check_text("question", question, self._ctx.max_response_bytes)
        refs = _images(images)
        for ref in refs:  # unreadable, outside the roots, not an image: an error now
            check(ref, decode=False)
        for name, texts in (("elements", elements), ("references", references)):
            if isinstance(texts, str | bytes):
                raise TypeError(f"{name}: expected a list of strings, got one string")
        metadata: dict[str, Any] = dict(meta)
        if elements:
            metadata["elements"] = [str(e) for e in elements]
        message = Message("user", (TextPart(question), *(MediaPart(r) for r in refs)))
        return Sample(sid, _DATASET, _SUBSET, (message,), _ORIGIN,
                      target=tuple(str(r) for r in references or ()), question=question,
                      metadata=metadata)

    def _saved(self, sample: Sample, answer: Any) -> Saved:
        _check_text("answer", answer, self._ctx.max_response_bytes)
        return _saved_answer(sample, answer)

    def _roots(self) -> AbstractContextManager[tuple[str, ...]]:
        return media_roots_in_force(self.media_roots)

    def _next_id(self) -> str:
        self._count += 1
        return str(self._count)

    def _count_model(self, prediction: Prediction, *, asked: bool) -> None:
        if asked and self.model is not None and prediction.completion is not None:
            self.usage.add("model", self.model.model_id, prediction.completion.usage, billed=True)

    async def _model_client(self) -> ChatClient:
        """The endpoint of ``model``, built as the runner builds the evaluated model's."""
        if self._client is None:
            from groundscope.client.apis import wire_api
            from groundscope.client.chat import ChatClient
            from groundscope.client.retry import RetryPolicy

            m, ctx = self.model, self._ctx
            assert m is not None
            gate = ctx.gate("model", m.api_url, m.model_id, self.concurrency, rpm=m.rpm, tpm=m.tpm,
                            max_pause=ctx.retry_max_delay)
            self._client = ChatClient(m.api_url, m.model_id, api_key=m.api_key, gate=gate,
                                      generation_config=m.generation_config, timeout=ctx.timeout,
                                      retry=RetryPolicy(max_retries=ctx.max_retries,
                                                        base_delay=ctx.retry_base_delay,
                                                        max_delay=ctx.retry_max_delay,
                                                        rate_limit_budget=ctx.rate_limit_budget),
                                      concurrency=self.concurrency,
                                      max_response_bytes=ctx.max_response_bytes,
                                      wire=wire_api(m.eval_type))
        return self._client


def _validated(model: Any, value: Any, name: str) -> Any:
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {format_validation_error(exc)}") from None


def _images(value: Any) -> list[MediaRef]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items:
        raise ConfigError("image: no image given")
    if len(items) > MAX_IMAGES:
        raise ConfigError(f"image: {len(items)} images, over the limit of {MAX_IMAGES}")
    return [media_from_value(v, Modality.IMAGE) for v in items]


def _check_text(name: str, text: Any, cap: int) -> None:
    """A text the caller gives: a string no longer than a model reply may be in a run."""
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected a string, got {type(text).__name__}")
    if len(text) > cap:
        raise ValueError(f"{name}: {len(text):,} characters, over the limit of {cap:,} "
                         "(max_response_bytes, the cap on a model's reply in a run)")


def _saved_answer(sample: Sample, answer: str) -> Saved:
    """The answer as a saved prediction (what ``groundscope score`` scores)."""
    digest = hashlib.blake2b(answer.encode(), digest_size=8).hexdigest()
    pred = Prediction(sample.id, f"answer:{digest}", PredictionStatus.OK, Completion(answer))
    return Saved(prediction={**prediction_to_json(pred), "sample_id": sample.id, "repeat": 0})


def _failed(reason: str) -> MultiModalMetrics:
    return MultiModalMetrics(None, None, None, None, status=ScoreStatus.ERROR.value, reason=reason)


def _metrics(scores: Mapping[str, Score]) -> MultiModalMetrics:
    g = scores["grounding"]
    c = scores.get("completeness")
    claims = tuple(ClaimVerdict(str(x["claim"]), x.get("verdict"),
                                str(x.get("reason") or x.get("error") or ""),
                                tuple(x.get("votes") or ())) for x in g.detail.get("claims", ()))
    ok = g.status is ScoreStatus.OK
    reason = None if ok else str(g.detail.get("judge_failed") or g.detail.get("reason")
                                 or g.detail.get("error") or g.status.value)
    usage: dict[str, Any] = {}
    for s in scores.values():
        for step, models in s.usage.items():
            usage.setdefault(step, {}).update(models)
    return MultiModalMetrics(
        grounding_score=g.values["grounding"] if ok else None,
        consistency_score=None,
        completeness_score=(c.values["completeness"]
                            if c is not None and c.status is ScoreStatus.OK else None),
        hallucination_rate=g.values["hallucination"] if ok else None,
        hallucinated=bool(g.values["hallucinated_answers"]) if ok else None,
        claims=claims, status=g.status.value, reason=reason,
        details={name: score_to_json(s) for name, s in scores.items()}, usage=usage)
