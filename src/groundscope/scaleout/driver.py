"""The driver of a Ray run: the runner's plan, dispatched to worker actors in chunks.

The runner plans and reads exactly as for a local run (records read, checked, skipped and
counted once, duplicate ids, resume: ``runner.Runner._items`` / ``_saved``); this module
sends each ``(sample, repeat)`` (a ``Sample`` with ``MediaRef`` s, never media bytes) to a
:class:`~groundscope.scaleout.worker.SampleWorker` actor and hands what streams back to the
runner's :class:`Sink`, the only writer of the run directory.

Delivery is at-least-once, writing exactly-once: a sample's prediction and each of its
scores are handed to the sink the first time they arrive; later copies are dropped. A
worker that dies (``RayActorError``) has its leases on every endpoint gate handed back and
its unfinished samples sent to another worker with what already arrived (its prediction,
its scores) as their saved state, so only requests that were in flight are sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from groundscope.config import TaskConfig
from groundscope.errors import GroundscopeError
from groundscope.pipeline import Predicted, Saved, Scored
from groundscope.plan import Item
from groundscope.rowcodec import prediction_to_json, sample_to_json, score_to_json
from groundscope.scaleout.gatekeeper import GateKeeper, RemoteGate
from groundscope.scaleout.handoff import KeyHandoff, key_values
from groundscope.scaleout.registry import ReplyRegistry
from groundscope.scaleout.session import NAMESPACE, start_session
from groundscope.scaleout.shipping import shipped_config
from groundscope.scaleout.worker import (
    DONE,
    FATAL,
    PREDICTION,
    REPLY,
    SCORE,
    Key,
    SampleWorker,
    Task,
    gate_limits,
)
from groundscope.scoring import ScoringContext
from groundscope.scoring.judge import response_cache
from groundscope.types import Completion

log = logging.getLogger("groundscope")

CHUNKS_PER_WORKER = 2  # one running, one queued: a worker never waits for the driver
MAX_CHUNK = 256
DEFAULT_MAX_WORKERS = 64
WATCH_S = 1.0  # how often the driver reads the gates' counters for the live view
SEED_BATCH = 5000  # cached replies per call when seeding the registry on resume


class Sink(Protocol):
    """The runner's side: what it stores and counts, and whether it stopped the run."""

    stop_reason: str | None

    def on_prediction(self, item: Item, predicted: Predicted) -> None: ...
    def on_score(self, item: Item, scored: Scored) -> None: ...
    def on_done(self, item: Item) -> None: ...


@dataclass
class _Entry:
    """A dispatched (sample, repeat) until its path is over, and what arrived of it."""

    item: Item
    saved: Saved
    predicted: Predicted | None = None
    scores: dict[str, Scored] = field(default_factory=dict)
    replies: list[tuple[str, str, str, Completion]] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return (self.item.run.name, self.item.subset, self.item.sample.id, self.item.repeat)

    def task(self) -> Task:
        """The work for a worker: what the run directory holds, updated with what arrived."""
        row, reviews = self.saved.prediction, dict(self.saved.reviews)
        sample = self.item.sample
        if self.predicted is not None:
            pred = self.predicted.prediction
            row = {"sample_id": sample.id, "repeat": pred.repeat, **prediction_to_json(pred),
                   "sample": sample_to_json(sample)}
        for name, scored in self.scores.items():
            reviews[name] = {"sample_id": sample.id, "repeat": scored.score.repeat,
                             "request_hash": scored.request_hash, **score_to_json(scored.score)}
        return Task(self.key, sample, Saved(row, reviews), tuple(self.replies))


class RayDriver:
    """Runs a planned evaluation on Ray (see the module docstring)."""

    def __init__(self, cfg: TaskConfig, sink: Sink, scoring: ScoringContext, *, api_url: str,
                 mock_url: str | None, roots: list[str]) -> None:
        self.cfg = cfg
        self.sink = sink
        self.scoring = scoring  # the run's: its reply caches are the run directory's files
        self._config = shipped_config(cfg)  # keys as $NAME: checked before Ray starts
        self._api_url = api_url
        self._mock_url = mock_url
        self._roots = roots
        self._token = uuid.uuid4().hex[:12]
        self._gates: dict[str, Any] = {}
        self._views: list[RemoteGate] = []
        self._registry: Any = None  # the run's judge replies (registry.ReplyRegistry)
        self._workers: dict[str, Any] = {}
        self._load: dict[str, int] = {}
        self._pending: dict[Key, _Entry] = {}
        self._backlog: deque[_Entry] = deque()
        self._exhausted = False
        self._peeked: Item | None = None  # the first item of the next chunk, read ahead
        self.requeued = 0

    def actor_name(self, what: str) -> str:
        return f"groundscope-{self._token}-{what}"

    async def run(self, items: Iterator[Item], saved_of: Callable[[Item], Saved]) -> None:
        keys = key_values(self.cfg)
        session = start_session(self.cfg.ray_address, self.cfg.work_dir, hide=keys)
        watch: asyncio.Task[None] | None = None
        try:
            await self._start_actors(KeyHandoff(keys) if session.local else None)
            watch = asyncio.create_task(self._watch())
            await self._dispatch(items, saved_of)
        finally:
            if watch is not None:
                watch.cancel()
            await self._refresh_views()  # the endpoints' figures over the whole run
            await self._stop_actors()
            session.stop()

    # ------------------------------------------------------------------ actors

    async def _start_actors(self, handoff: KeyHandoff | None) -> None:
        """The gates, the reply registry and the workers; with ``handoff`` (a local Ray
        started without the keys in its environment) the workers take the keys from it."""
        import ray

        n = self.cfg.workers or min(DEFAULT_MAX_WORKERS,
                                    max(1, int(ray.cluster_resources().get("CPU", 1))))
        live = self.cfg.eval_batch_size + (self.cfg.judge_concurrency or self.cfg.eval_batch_size)
        self._chunk = max(1, min(MAX_CHUNK, math.ceil(live / n)))
        cpus = float(ray.cluster_resources().get("CPU", n))
        keys = (await handoff.open(), handoff.token) if handoff is not None else None
        # the workers first: they take the worker processes Ray has started ahead, so their
        # imports (~0.3 s) overlap the start of the gates' processes (0.85 -> 0.66 s before
        # the first chunk, bench_ray, 1 worker)
        actor = ray.remote(SampleWorker)
        for i in range(n):
            wid = f"w{i}"
            self._workers[wid] = actor.options(
                name=self.actor_name(f"worker-{i}"), namespace=NAMESPACE,
                num_cpus=min(1.0, cpus / n), max_restarts=0).remote(
                wid, self._config, self._api_url, self._roots, self._mock_url, keys)
            self._load[wid] = 0
        keeper = ray.remote(GateKeeper)
        for i, (key, spec) in enumerate(gate_limits(self.cfg).items()):
            self._gates[key] = keeper.options(
                name=self.actor_name(f"gate-{i}"), namespace=NAMESPACE, num_cpus=0,
                max_concurrency=max(1000, 4 * live), **self._here()).remote(
                spec.limit, rpm=spec.rpm, tpm=spec.tpm, max_pause=spec.max_pause)
            # the driver's view of the endpoint (live view, summary.rate_limits)
            view = RemoteGate(self._gates[key], "driver", spec.limit)
            self.scoring.gates.setdefault(spec.name, view)
            self._views.append(view)
        run_dir = self.scoring.run_dir
        seeds = sorted((run_dir / "cache").glob("*.jsonl")) if run_dir is not None else []
        if n > 1 or seeds:  # one worker's own cache is the run's (nothing to share)
            await self._start_registry(max(1000, 4 * live), seeds)
        from ray.exceptions import RayActorError

        try:
            started = await asyncio.gather(*(w.start.remote(self._gates, self._registry)
                                             for w in self._workers.values()),
                                           return_exceptions=True)
        finally:
            if handoff is not None:
                await handoff.close()
        for wid, result in zip(list(self._workers), started, strict=True):
            if isinstance(result, RayActorError):  # it died starting: the others do its part
                await self._worker_died(wid)
            elif isinstance(result, BaseException):
                raise result
            elif result:
                raise GroundscopeError(result)
        if not self._workers:
            raise GroundscopeError("every Ray worker died as it started; nothing was sent "
                                   "(the workers' logs are in Ray's session directory)")
        alive = len(self._workers)
        log.info("Ray: %d worker%s, chunks of %d samples", alive, "" if alive == 1 else "s",
                 self._chunk)

    @staticmethod
    def _here() -> dict[str, Any]:
        """Placement on the driver's node: the run's shared state (gates, reply registry)
        lives and dies with the driver, so losing any other node loses none of it."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = ray.get_runtime_context().get_node_id()
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

    async def _refresh_views(self) -> None:
        from ray.exceptions import RayError

        for view in self._views:
            with contextlib.suppress(RayError):
                await view.refresh()

    async def _watch(self) -> None:
        """The gates' counters, refreshed for the live view every WATCH_S seconds."""
        while True:
            await asyncio.sleep(WATCH_S)
            await self._refresh_views()
    async def _start_registry(self, concurrency: int, seeds: list[Path]) -> None:
        """The run's judge reply registry, seeded with the run's cache files ``seeds`` (a
        resumed run asks no judge request its cache holds, as a local one)."""
        import ray

        self._registry = ray.remote(ReplyRegistry).options(
            name=self.actor_name("replies"), namespace=NAMESPACE, num_cpus=0,
            max_concurrency=concurrency, **self._here()).remote()
        for path in seeds:
            rows = response_cache(self.scoring, path.stem).items()
            for start in range(0, len(rows), SEED_BATCH):
                await self._registry.seed.remote(path.stem, rows[start:start + SEED_BATCH])

    async def _stop_actors(self) -> None:
        import ray
        from ray.exceptions import RayError

        for handle in self._workers.values():
            with contextlib.suppress(RayError):
                await handle.close.remote()
        registry = [self._registry] if self._registry is not None else []
        for handle in [*self._workers.values(), *self._gates.values(), *registry]:
            ray.kill(handle, no_restart=True)

    async def _worker_died(self, wid: str) -> None:
        """Forget a dead worker; hand its leases back on every gate and its judge claims back
        to the registry (once)."""
        from ray.exceptions import RayError

        if self._workers.pop(wid, None) is None:
            return
        log.warning("Ray worker %s died; its unfinished samples go to the other workers", wid)
        registry = [self._registry] if self._registry is not None else []
        for actor in [*self._gates.values(), *registry]:  # its leases, its judge claims
            with contextlib.suppress(RayError):
                await actor.release_worker.remote(wid)

    # ------------------------------------------------------------------ dispatch

    def _next_chunk(self, items: Iterator[Item], saved_of: Callable[[Item], Saved]) -> list[_Entry]:
        """The next samples for a worker: about ``_chunk`` of them, and every sample of the
        last record taken (its paraphrases and repeats), so identical judge requests of one
        record (a claim of paraphrased answers about one image) meet in one worker's cache."""
        chunk: list[_Entry] = []
        while self._backlog and len(chunk) < self._chunk:
            chunk.append(self._backlog.popleft())
        while not self._exhausted and not self.sink.stop_reason:
            item = self._peeked or next(items, None)
            self._peeked = None
            if item is None:
                self._exhausted = True
                break
            if len(chunk) >= self._chunk and not _same_record(chunk[-1].item, item):
                self._peeked = item  # the next record starts the next chunk
                break
            entry = _Entry(item, saved_of(item))
            self._pending[entry.key] = entry
            chunk.append(entry)
        return chunk

    async def _dispatch(self, items: Iterator[Item], saved_of: Callable[[Item], Saved]) -> None:
        streams: set[asyncio.Task[None]] = set()
        try:
            await self._loop(items, saved_of, streams)
        finally:
            for task in streams:
                task.cancel()

    async def _loop(self, items: Iterator[Item], saved_of: Callable[[Item], Saved],
                    streams: set[asyncio.Task[None]]) -> None:
        while True:
            for wid in sorted(self._workers, key=self._load.__getitem__):
                while not self.sink.stop_reason and self._load[wid] < CHUNKS_PER_WORKER:
                    chunk = self._next_chunk(items, saved_of)
                    if not chunk:
                        break
                    self._load[wid] += 1
                    streams.add(asyncio.create_task(self._stream(wid, chunk)))
            if not streams:
                if (self._backlog or self._peeked is not None) and not self.sink.stop_reason:
                    raise GroundscopeError(
                        f"every Ray worker died; {len(self._pending)} samples unfinished. Finished "
                        "work is kept; resume with --use-cache RUN_DIR")
                return
            done, _ = await asyncio.wait(streams, return_when=asyncio.FIRST_COMPLETED)
            streams -= done
            for task in done:
                task.result()  # a fatal event ends the run, as it would a local one

    async def _stream(self, wid: str, chunk: list[_Entry]) -> None:
        from ray.exceptions import RayActorError

        handle = self._workers.get(wid)
        try:
            if handle is not None:
                async for ref in handle.run.remote([e.task() for e in chunk]):
                    for kind, key, value in await ref:
                        self._event(kind, key, value)
                return
        except RayActorError:
            await self._worker_died(wid)
        finally:
            self._load[wid] -= 1
        lost = [e for e in chunk if e.key in self._pending]  # sent to the workers left
        self.requeued += len(lost)
        self._backlog.extend(lost)

    def _event(self, kind: str, key: Key, value: Any) -> None:
        entry = self._pending.get(key)
        if entry is None:
            return  # a late copy of a finished sample's event
        if kind == PREDICTION and entry.predicted is None:
            entry.predicted = value
            self.sink.on_prediction(entry.item, value)
        elif kind == SCORE and value.score.scorer not in entry.scores:
            entry.scores[value.score.scorer] = value
            self.sink.on_score(entry.item, value)
        elif kind == REPLY:  # a judge reply: into the run's cache file, and kept for a re-run
            entry.replies.append(value)
            purpose, cache_key, model, completion = value
            cache = response_cache(self.scoring, purpose)
            if cache.get(cache_key) is None:
                cache.put(cache_key, completion, model=model)
        elif kind == DONE:
            del self._pending[key]
            self.sink.on_done(entry.item)
        elif kind == FATAL:
            raise GroundscopeError(value)


def _same_record(a: Item, b: Item) -> bool:
    """Whether two items come from one dataset record (its paraphrases, its repeats)."""
    return (a.run.name, a.subset, a.sample.origin) == (b.run.name, b.subset, b.sample.origin)
