"""A Ray worker of a scaled-out run: the model client, the judge panel and the media cache
of one process, running chunks of samples through the one per-sample function
(``pipeline.evaluate_sample``) and streaming back what each yields, as values.

The driver (``driver.py``) makes it a Ray actor; nothing here imports Ray. A worker writes
nothing: no run directory (the driver is its only writer), no judge reply cache on disk (its
judge replies are cached in memory, and a miss asks the run's reply registry, ``registry.py``,
so a judge request another worker asked is not asked again). Its config arrives with keys
as ``$NAME`` references, resolved here from the worker's own environment (``shipping.py``).
Every request to an endpoint passes that endpoint's shared gate (``gatekeeper.RemoteGate``),
so the limits mean what they mean in one process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from groundscope import media
from groundscope.client.apis import wire_api
from groundscope.client.cache import ResponseCache, SharedReplies
from groundscope.client.chat import ChatClient
from groundscope.client.retry import RetryPolicy
from groundscope.config import JudgeModel, TaskConfig, load_config
from groundscope.defaults import DEFAULT_MAX_PIXELS
from groundscope.errors import GroundscopeError
from groundscope.pipeline import Hooks, Saved, evaluate_sample
from groundscope.plan import plan_scoring
from groundscope.redaction import Redactor
from groundscope.scaleout.gatekeeper import GateSpec, LeasedGate
from groundscope.scaleout.handoff import fetch_keys
from groundscope.scaleout.registry import WorkerReplies
from groundscope.scoring import Scorer, ScoringContext
from groundscope.scoring.judge import response_cache
from groundscope.sidework import warm_scorers
from groundscope.types import Completion, Sample

Key = tuple[str, str, str, int]  # (dataset, subset, sample id, repeat)
MODEL_GATE = "model"

# what a chunk yields: (kind, key, value)
PREDICTION = "prediction"  # value: pipeline.Predicted, before scoring
SCORE = "score"  # value: pipeline.Scored
REPLY = "reply"  # value: (purpose, cache key, model, Completion) of a judge reply just received
DONE = "done"  # value: None; the sample's path is over
FATAL = "fatal"  # value: one line; the run cannot go on (e.g. a judge with no simulator)

# A worker sends what its samples yielded at most once per BATCH_S (never holding up the
# work itself), at most BATCH_EVENTS events at a time. One Ray object per event batch costs
# both ends CPU: sent as they came (2.3 batches a sample), bench_ray's 1 worker ran at
# 0.71-0.79x the local rate; batched every 50 ms, at 0.83-0.92x (driver CPU per sample
# 2.8 -> 1.3 ms, the worker's 12.3 -> 10.6 ms). An event waits at most this long.
BATCH_S = 0.05
BATCH_EVENTS = 1024


@dataclass(frozen=True, slots=True)
class Task:
    """One (sample, repeat) for a worker, with what the run directory holds for it."""

    key: Key
    sample: Sample
    saved: Saved
    replies: tuple[tuple[str, str, str, Completion], ...] = ()  # judge replies it already got


Event = tuple[str, Key, Any]
# the sample whose path runs in this task, and where its events go
_CURRENT: ContextVar[tuple[asyncio.Queue[Event], Key] | None] = ContextVar(
    "groundscope_ray_sample", default=None)


class ForwardedCache(ResponseCache):
    """A worker's judge replies of one purpose: kept in memory, and each new one sent to the
    driver with the sample that asked (the driver writes the run's cache file and hands the
    replies back if the sample has to run again elsewhere)."""

    def __init__(self, purpose: str, shared: SharedReplies | None = None) -> None:
        super().__init__(None)
        self.purpose = purpose
        self.shared = shared  # the run's registry: what another worker asked is not asked again

    def put(self, key: str, completion: Completion, *, model: str = "") -> None:
        super().put(key, completion, model=model)
        current = _CURRENT.get()
        if current is not None:
            queue, sample = current
            queue.put_nowait((REPLY, sample, (self.purpose, key, model, completion)))

    def seed(self, key: str, completion: Completion) -> None:
        """Keep a reply received before (not sent to the driver again)."""
        super().put(key, completion)


def judge_gate_key(model: JudgeModel) -> str:
    """The gate of a judge endpoint: one per API, URL and model."""
    return f"judge {model.eval_type} {model.api_url} {model.model_id}"


def gate_limits(cfg: TaskConfig) -> dict[str, GateSpec]:
    """Every endpoint's gate, as a local run makes it (``ScoringContext.gate``): the model's
    (``eval_batch_size`` in flight, ``rpm`` / ``tpm``, pauses up to ``retry_max_delay``) and
    each judge endpoint's (``judge_concurrency``, default ``eval_batch_size``; the first
    entry's ``rpm`` / ``tpm``; pauses up to ``retry_max_delay`` too), named as the summary
    names them."""
    limits = {MODEL_GATE: GateSpec(MODEL_GATE, cfg.eval_batch_size, cfg.rpm, cfg.tpm,
                                   cfg.retry_max_delay)}
    for model in cfg.judge.all_models() if cfg.judge else ():
        limits.setdefault(judge_gate_key(model), GateSpec(
            f"judge:{model.model_id}", cfg.judge_concurrency or cfg.eval_batch_size,
            model.rpm, model.tpm, cfg.retry_max_delay))
    return limits


class SampleWorker:
    """One worker. ``start()`` builds the clients (a config problem: its one line);
    ``run(tasks)`` streams the events of a chunk; ``close()`` closes the clients."""

    def __init__(self, worker: str, config: Mapping[str, Any], api_url: str,
                 roots: list[str], mock_url: str | None,
                 keys: tuple[tuple[str, int], str] | None = None) -> None:
        self.worker = worker
        self._config = dict(config)
        self._api_url = api_url
        self._roots = list(roots)
        self._mock_url = mock_url
        self._gates: dict[str, Any] = {}
        self._replies: WorkerReplies | None = None  # the run's registry (None: kept here)
        self._keys = keys  # (address, token) of the driver's KeyHandoff (a local Ray), or None
        self._specs: dict[str, GateSpec] = {}
        self._made: dict[str, LeasedGate] = {}  # one per endpoint, shared by its clients
        self._client: ChatClient | None = None
        self._scoring: ScoringContext | None = None
        self._scorers: dict[str, list[Scorer]] = {}
        self._redact = str
        self._max_pixels = DEFAULT_MAX_PIXELS
        self._media = media.MediaSettings()

    def _gate(self, key: str, limit: int) -> LeasedGate:
        gate = self._made.get(key)
        if gate is None:
            spec = self._specs.get(key)
            paced = spec is not None and (spec.rpm is not None or spec.tpm is not None)
            gate = self._made[key] = LeasedGate(self._gates[key], self.worker, limit, paced=paced)
        return gate

    async def start(self, gates: Mapping[str, Any], replies: Any = None) -> str | None:
        """Resolve the config here (``$NAME`` from this environment) and build the model
        client and the scorers, over the run's endpoint ``gates`` (``GateKeeper`` actors by
        key) and reply registry; None, or the one line saying why this worker cannot run."""
        self._gates = dict(gates)
        self._replies = WorkerReplies(replies, self.worker) if replies is not None else None
        try:
            if self._keys is not None:  # a local Ray started without the keys: the driver's
                os.environ.update(fetch_keys(*self._keys))
            cfg = load_config(self._config)
        except OSError as exc:
            return f"worker {self.worker}: cannot take the run's keys from the driver: {exc}"
        except GroundscopeError as exc:
            return f"worker {self.worker}: {exc}"
        self._specs = gate_limits(cfg)
        scoring = ScoringContext.from_config(cfg)  # no run_dir: judge replies cached in memory
        scoring.mock_url = self._mock_url
        limit = scoring.judge_concurrency
        scoring.judge_gate = lambda model: self._gate(judge_gate_key(model), limit)
        scoring.reply_cache = self._reply_cache
        self._scorers = {name: plan_scoring(cfg, name, scoring).scorers for name in cfg.datasets}
        warm_scorers(list(self._scorers.values()))  # the tokenizers, while the chunks come
        self._scoring = scoring
        self._redact = Redactor(cfg.secrets()).redact
        api = cfg.simulator.api if cfg.eval_type == "mock" else cfg.eval_type
        self._client = ChatClient(
            self._api_url, cfg.model, api_key=cfg.api_key, generation_config=cfg.generation_config,
            timeout=cfg.timeout, retry=RetryPolicy(max_retries=cfg.max_retries,
                                                   base_delay=cfg.retry_base_delay,
                                                   max_delay=cfg.retry_max_delay,
                                                   rate_limit_budget=cfg.rate_limit_budget),
            concurrency=cfg.eval_batch_size, max_response_bytes=cfg.max_response_bytes,
            wire=wire_api(api), gate=self._gate(MODEL_GATE, cfg.eval_batch_size))
        self._max_pixels = cfg.max_image_pixels
        self._media = cfg.media_settings()
        return None

    def _reply_cache(self, purpose: str) -> ForwardedCache:
        return ForwardedCache(purpose, self._replies.of(purpose) if self._replies is not None else None)

    async def run(self, tasks: list[Task]) -> AsyncIterator[list[Event]]:
        """Evaluate ``tasks`` concurrently; yield their predictions, scores and ends in
        batches: at most one batch each :data:`BATCH_S` (an event waits that long at most,
        the work does not wait) and at most :data:`BATCH_EVENTS` events in one."""
        media.set_media_roots(self._roots)  # this call's context: the driver's roots
        media.set_max_pixels(self._max_pixels)
        media.set_media_settings(self._media)  # frames, image sizes, wav: as the local runner
        queue: asyncio.Queue[Event] = asyncio.Queue()
        running = [asyncio.create_task(self._one(task, queue)) for task in tasks]
        left = len(tasks)
        loop = asyncio.get_running_loop()
        due = 0.0  # when the next batch may go
        try:
            while left:
                batch = [await queue.get()]
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                while not queue.empty() and len(batch) < BATCH_EVENTS:
                    batch.append(queue.get_nowait())
                left -= sum(kind in (DONE, FATAL) for kind, _, _ in batch)
                due = loop.time() + BATCH_S
                yield batch
        finally:
            for t in running:
                t.cancel()

    async def _one(self, task: Task, queue: asyncio.Queue[Event]) -> None:
        key = task.key
        _CURRENT.set((queue, key))  # this task's context only
        for purpose, cache_key, _, completion in task.replies:
            cache = response_cache(self._scoring, purpose) if self._scoring else None
            if isinstance(cache, ForwardedCache):
                cache.seed(cache_key, completion)
        hooks = Hooks(on_prediction=lambda p: queue.put_nowait((PREDICTION, key, p)),
                      on_score=lambda s: queue.put_nowait((SCORE, key, s)))
        try:
            await evaluate_sample(task.sample, key[3], self._scorers[key[0]], client=self._client,
                                  saved=task.saved, redact=self._redact, hooks=hooks)
        except GroundscopeError as exc:  # what ends a local run ends this one, as one line
            queue.put_nowait((FATAL, key, self._redact(str(exc))))
            return
        except Exception as exc:  # a bug: named, not lost in a worker's log
            queue.put_nowait((FATAL, key, self._redact(f"{type(exc).__name__}: {exc}")))
            return
        queue.put_nowait((DONE, key, None))

    async def close(self) -> None:
        for gate in self._made.values():
            await gate.aclose()
        if self._client is not None:
            await self._client.aclose()
        if self._scoring is not None:
            await self._scoring.aclose()
        if self._replies is not None:
            await self._replies.aclose()
