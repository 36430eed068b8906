"""One endpoint's limits shared by every worker of a Ray run.

:class:`GateKeeper` is the state of one endpoint's gate (the model, or one judge endpoint):
the very :class:`~groundscope.client.gate.RateGate` a local run keeps in its one process
(``rpm`` / ``tpm`` buckets, the adaptive in-flight limit under ``limit``, pauses from
``Retry-After``, ``retry-after-ms`` and ``x-ratelimit-reset-*``; ``client/ratelimit.py``),
plus what only a shared gate needs: leases kept by worker, so a dead worker's leases are
handed back (:meth:`GateKeeper.release_worker`) and its waiting asks end (:class:`WorkerGone`).
The driver runs one per endpoint as a named Ray actor; it is plain asyncio (no Ray import),
so it is tested without Ray too. :class:`RemoteGate` is the worker's side: the
``client/gate.py`` ``Gate`` protocol over such an actor, so ``ChatClient`` (model and judges)
uses it like a local gate; the driver holds one per endpoint too, refreshed from the actor,
for the live view and the summary.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundscope.client.gate import Clock, GateStats, Lease, Outcome, RateGate, Sleep
from groundscope.client.ratelimit import MAX_PAUSE_S, Ticket


def _limit_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The reply headers a gate may act on: Retry-After and the rate-limit families
    (``x-ratelimit-*``, ``anthropic-ratelimit-*``); nothing else crosses to the actor."""
    return {k: v for k, v in headers.items() if k.startswith("retry-after") or "ratelimit" in k}


class WorkerGone(RuntimeError):
    """A lease was asked for by a worker the driver has already declared dead."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One endpoint's gate as a run's config sets it: the summary's name for it (``model``,
    ``judge:<model_id>``), its in-flight limit and its provider limits."""

    name: str
    limit: int
    rpm: int | None = None
    tpm: int | None = None
    max_pause: float = 30.0  # as ScoringContext.gate's: the retry policy's default max_delay


class GateKeeper:
    """One endpoint's :class:`RateGate`, asked by every worker (see the module docstring).
    ``clock``, ``wall`` and ``sleep`` are the gate's, injectable for tests."""

    def __init__(self, limit: int, *, rpm: float | None = None, tpm: float | None = None,
                 max_pause: float = MAX_PAUSE_S, clock: Clock = time.monotonic,
                 wall: Clock = time.time, sleep: Sleep = asyncio.sleep) -> None:
        self.gate = RateGate(limit, rpm=rpm, tpm=tpm, max_pause=max_pause, clock=clock,
                             wall=wall, sleep=sleep)
        self.stats = self.gate.stats
        self.peak = 0
        self._leases: dict[int, tuple[str, Ticket]] = {}  # lease -> (worker, its ticket)
        self._next = 0
        self._dead: set[str] = set()

    async def acquire(self, worker: str, tokens: int = 0) -> int:
        """Wait until the endpoint's limits let one more request estimated at ``tokens``
        go; a lease id held by ``worker``."""
        ticket = await self.gate.admit(tokens, gone=lambda: worker in self._dead)
        if ticket is None:
            raise WorkerGone(worker)
        self._next += 1
        self._leases[self._next] = (worker, ticket)
        self.peak = max(self.peak, self.stats.in_flight)
        return self._next

    async def release(self, lease: int, status: int | None = None,
                      headers: Mapping[str, str] | None = None, tokens: int | None = None,
                      kind: str | None = None, retries: int = 0) -> None:
        """Hand ``lease`` back with how its attempt ended (``Outcome``'s fields): a 429 lowers
        the limit for everyone, a pause holds every worker, ``usage`` corrects the token
        estimate. ``retries``: the worker's retries since its last release (for the summary)."""
        self.stats.retries += max(0, retries)
        held = self._leases.pop(lease, None)
        if held is None:
            return  # already handed back with its dead worker's leases
        await self.gate.release(held[1], Outcome(status, dict(headers or {}), tokens, kind))

    async def release_worker(self, worker: str) -> int:
        """Hand back every lease ``worker`` holds (it died; as requests without a reply);
        its waiting and later acquires fail. Returns how many were released."""
        self._dead.add(worker)
        gone = [lease for lease, (owner, _) in self._leases.items() if owner == worker]
        for lease in gone:
            _, ticket = self._leases.pop(lease)
            await self.gate.release(ticket, Outcome())
        await self.gate.wake()
        return len(gone)

    async def gate_stats(self) -> GateStats:
        """The endpoint's counters across every worker (a copy)."""
        return dataclasses.replace(self.stats)

    async def snapshot(self) -> dict[str, Any]:
        """Counters for the driver and tests: limit, in flight, peak, 429s, seconds paused,
        leases by worker."""
        by_worker: dict[str, int] = {}
        for owner, _ in self._leases.values():
            by_worker[owner] = by_worker.get(owner, 0) + 1
        return {"limit": self.stats.limit, "in_flight": self.stats.in_flight, "peak": self.peak,
                "rate_limited": self.stats.rate_limited, "paused_s": self.stats.paused_s,
                "leases": by_worker}


class RemoteGate:
    """The ``Gate`` of one worker over a :class:`GateKeeper` actor (``actor``: its handle).
    Its ``stats`` count this worker's requests; :meth:`refresh` makes them the endpoint's
    across workers (the driver's view)."""

    def __init__(self, actor: Any, worker: str, limit: int) -> None:
        self.actor = actor
        self.worker = worker
        self.stats = GateStats(limit=limit)
        self._retries_sent = 0

    async def acquire(self, tokens: int) -> Lease:
        lease: int = await self.actor.acquire.remote(self.worker, tokens)
        self.stats.in_flight += 1
        return lease

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        self.stats.in_flight -= 1
        if outcome.status == 429:
            self.stats.rate_limited += 1
        retries, self._retries_sent = self.stats.retries - self._retries_sent, self.stats.retries
        await self.actor.release.remote(lease, outcome.status, _limit_headers(outcome.headers),
                                        outcome.tokens, outcome.kind, retries)

    async def refresh(self) -> None:
        """Take the endpoint's counters from the actor."""
        self.stats = await self.actor.gate_stats.remote()
