"""One sample's path: request its prediction (or reuse the saved one), then score it.

:func:`evaluate_sample` is the per-sample function of ``eval`` (runner.py), ``score``
(rescore.py) and distributed workers: a client (``None``: score the saved prediction as it
is), the dataset's scorers and a sample in; the prediction and its scores out, as values.
It writes nothing. Through :class:`Hooks` a caller gets each value as soon as it is known
(the prediction before scoring starts) and bounds the two stages (the model request, the
scoring), so slow judging never holds a model slot; :func:`record_score` and
:func:`finish_groups` are the writing side, for the owner of the run directory. Failures
are values: an errored ``Prediction``, a scorer that raises an ``ERROR`` score
(``scoring.score_safely``), secrets redacted from both.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from groundscope import media
from groundscope.errors import MediaError, ModelError
from groundscope.metrics import category_of
from groundscope.resume import scoring_view
from groundscope.rowcodec import prediction_from_json, sample_to_json, score_from_json
from groundscope.scoring import Scorer, score_safely
from groundscope.scoring.groups import GROUP_REQUEST_HASH
from groundscope.store import RunStore
from groundscope.types import Completion, Prediction, PredictionStatus, Sample, Score, ScoreStatus
from groundscope.usage import metering

if TYPE_CHECKING:
    from groundscope.client.retry import OnRetry
    from groundscope.plan import DatasetRun

log = logging.getLogger("groundscope")


class ModelClient(Protocol):
    """Where a sample's answer comes from: ``client.chat.ChatClient`` (asks the model) or
    ``client.answers.AnswersClient`` (reads a given answer). ``sample_hash`` fingerprints
    what would be asked (a resume reuses a saved prediction of the same hash)."""

    model: str

    def sample_hash(self, sample: Sample, repeat: int) -> str: ...

    async def complete_sample(self, sample: Sample, repeat: int, *,
                              on_retry: OnRetry | None = None) -> Completion: ...


@dataclass(frozen=True, slots=True)
class Saved:
    """What the run directory holds for one (sample, repeat): its prediction row (a resume
    reuses it for the same request; ``score`` scores it) and its review rows by scorer."""

    prediction: Mapping[str, Any] | None = None
    reviews: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


NOTHING_SAVED = Saved()


@dataclass(frozen=True, slots=True)
class Predicted:
    """A sample's prediction and where it came from."""

    prediction: Prediction
    new: bool = True  # to be stored: requested now, or reused under a changed reference
    cached: bool = False  # taken from the run directory, not requested
    changed: bool = False  # the saved one was for a changed request or reference


@dataclass(frozen=True, slots=True)
class Scored:
    """One scorer's score of a prediction (``request_hash``), with the metric keys it feeds."""

    score: Score
    keys: tuple[str, ...]
    request_hash: str
    new: bool = True  # scored now (to be stored), not a saved review reused


@dataclass(frozen=True, slots=True)
class Hooks:
    """The caller's side of a sample's path (see the module docstring)."""

    model_slot: AbstractAsyncContextManager[Any] = field(default_factory=nullcontext)
    score_slot: AbstractAsyncContextManager[Any] = field(default_factory=nullcontext)
    on_prediction: Callable[[Predicted], None] = lambda _: None
    on_score: Callable[[Scored], None] = lambda _: None


NO_HOOKS = Hooks()


@dataclass(frozen=True, slots=True)
class SampleResult:
    predicted: Predicted
    scores: tuple[Scored, ...]


async def evaluate_sample(sample: Sample, repeat: int, scorers: Sequence[Scorer], *,
                          client: ModelClient | None, saved: Saved = NOTHING_SAVED,
                          redact: Callable[[str], str] = str, hooks: Hooks = NO_HOOKS) -> SampleResult:
    """Request (or reuse) the ``repeat``-th prediction of ``sample``, then score it."""
    async with hooks.model_slot:
        predicted = await _predict(client, sample, repeat, saved, redact)
    hooks.on_prediction(predicted)
    await asyncio.sleep(0)  # a freed model slot's next request goes out before this is scored
    reuse = saved.reviews if predicted.cached and not predicted.changed else {}
    async with hooks.score_slot:
        scores = []
        for scorer in scorers:
            scored = await _score(scorer, sample, predicted.prediction, reuse.get(scorer.name), redact)
            hooks.on_score(scored)
            scores.append(scored)
    return SampleResult(predicted, tuple(scores))


async def _predict(client: ModelClient | None, sample: Sample, repeat: int, saved: Saved,
                   redact: Callable[[str], str]) -> Predicted:
    row = saved.prediction
    if client is None:  # re-scoring: the evaluated model is never called again
        if row is None:
            raise ValueError(f"{sample.id}: no model to ask and no saved prediction")
        return Predicted(prediction_from_json(row), new=False, cached=True)
    try:
        req_hash = client.sample_hash(sample, repeat)
    except MediaError as exc:
        return Predicted(Prediction(sample.id, "unhashable", PredictionStatus.ERROR, error=str(exc),
                                    error_kind="media", attempts=0, repeat=repeat))
    if row is not None and row["request_hash"] != req_hash \
            and not _hashed_so_earlier(client, sample, repeat, row["request_hash"]):
        log.debug("%s: request changed since the cached run (prompt, media, model or "
                  "generation config); requesting it again", sample.origin)
        return Predicted(await _request(client, sample, req_hash, repeat, redact), changed=True)
    if row is not None and row["status"] == PredictionStatus.OK.value:  # else: errored, ask again
        pred = prediction_from_json(row)
        if scoring_view(row["sample"]) == scoring_view(sample_to_json(sample)):
            return Predicted(pred, new=False, cached=True)
        # Same request, changed reference (answer, choices, metadata): keep the answer, save
        # the record as it is now and score it again; old reviews are not reused.
        log.debug("%s: reference changed since the cached run; re-scoring", sample.origin)
        return Predicted(pred, cached=True, changed=True)
    return Predicted(await _request(client, sample, req_hash, repeat, redact))


def _hashed_so_earlier(client: ModelClient, sample: Sample, repeat: int, saved_hash: Any) -> bool:
    """Whether ``saved_hash`` is this request's hash as groundscope computed it to 2026-12-06,
    when a local medium's content id was its BLAKE2b (now SHA-256, ``media/digest.py``): the
    answers of a run an earlier version saved are reused on resume, not asked again. Only a
    request whose hash changed pays for this (each local medium hashed again, once)."""
    with media.earlier_content_ids():
        try:
            return client.sample_hash(sample, repeat) == saved_hash
        except MediaError:
            return False


async def _request(client: ModelClient, sample: Sample, req_hash: str, repeat: int,
                   redact: Callable[[str], str]) -> Prediction:
    attempts = 1

    def on_retry(attempt: int, error: Exception, delay: float) -> None:
        nonlocal attempts
        attempts = attempt + 1
        log.debug("%s: retry %d in %.2fs after %s", sample.id, attempt, delay, error)

    start = time.perf_counter()
    try:
        completion = await client.complete_sample(sample, repeat, on_retry=on_retry)
    except MediaError as exc:
        return Prediction(sample.id, req_hash, PredictionStatus.ERROR, error=str(exc),
                          error_kind="media", attempts=attempts, repeat=repeat,
                          latency_s=time.perf_counter() - start)
    except ModelError as exc:  # the server's message may quote a key: redacted
        return Prediction(sample.id, req_hash, PredictionStatus.ERROR, error=redact(str(exc)),
                          error_kind=exc.kind, attempts=attempts, repeat=repeat,
                          latency_s=time.perf_counter() - start)
    return Prediction(sample.id, req_hash, PredictionStatus.OK, completion=completion,
                      attempts=attempts, latency_s=time.perf_counter() - start, repeat=repeat)


async def _score(scorer: Scorer, sample: Sample, pred: Prediction, saved: Mapping[str, Any] | None,
                 redact: Callable[[str], str]) -> Scored:
    """The saved review of this very prediction, unless its judges failed (judged again);
    else a new score."""
    if (saved is not None and saved.get("request_hash") == pred.request_hash
            and saved.get("status") != ScoreStatus.JUDGE_FAILED.value):
        return Scored(score_from_json(saved), scorer.keys, pred.request_hash, new=False)
    with metering() as meter:  # the judge calls made to score it, kept with the score
        score = await score_safely(scorer, sample, pred, redact)
    if meter:
        score = replace(score, usage=meter.to_json())
    return Scored(score, scorer.keys, pred.request_hash)


def record_score(store: RunStore, run: DatasetRun, sample: Sample, scored: Scored) -> None:
    """Keep a score of ``sample``: appended to its subset's reviews when new, added to the
    dataset's averages (and its judge calls to the usage: a reused review's as cached) and
    handed to its group stage."""
    if scored.new:
        store.append_score(run.name, sample.subset, scored.score, scored.request_hash)
    run.acc.add(sample.subset, scored.score, scored.keys, category_of(sample.metadata))
    _note_scored(run, sample.subset, scored.score)
    if scored.score.usage:
        run.summary.usage.add_calls(scored.score.usage, reused=not scored.new)
    run.groups.collect(sample.subset, scored.score)


def _note_scored(run: DatasetRun, subset: str, score: Score) -> None:
    if run.scored is not None:  # the report's judge figures count this run's scores only
        run.scored.setdefault(subset, set()).add((score.sample_id, score.repeat))


async def finish_groups(store: RunStore, run: DatasetRun) -> None:
    """Score the groups of group scorers (e.g. consistency) once every member is scored."""
    for subset, score, keys in await run.groups.finish():
        store.append_score(run.name, subset, score, GROUP_REQUEST_HASH)
        run.acc.add(subset, score, keys)
        _note_scored(run, subset, score)
        if score.usage:
            run.summary.usage.add_calls(score.usage)
