"""One endpoint's in-flight limit shared by every worker of a Ray run.

:class:`GateKeeper` is the state of one endpoint's gate (the model, or one judge endpoint):
at most ``limit`` requests in flight across all workers, leases kept by worker (so a dead
worker's leases are handed back: :meth:`GateKeeper.release_worker`) and a 429's
``Retry-After`` pause that holds every worker's next request. The driver runs one per
endpoint as a named Ray actor; it is plain asyncio (no Ray import), so it is tested without
Ray too. :class:`RemoteGate` is the worker's side: the ``client/gate.py`` ``Gate`` protocol
over such an actor, so ``ChatClient`` (model and judges) uses it like a ``LocalGate``.

The logic is deliberately minimal (a counting limit and a pause); a richer local limiter
with the same protocol (``client/ratelimit.py``: adaptive limit, request/token budgets) is
meant to move into this actor as its state, behind the same three calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from groundscope.client.gate import GateStats, Lease, Outcome
from groundscope.client.http_errors import parse_retry_after

MAX_PAUSE_S = 120.0  # a longer Retry-After pauses this long (the OpenAI SDK gives up beyond it)

def _limit_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The reply headers a gate may act on: Retry-After and the rate-limit families
    (``x-ratelimit-*``, ``anthropic-ratelimit-*``); nothing else crosses to the actor."""
    return {k: v for k, v in headers.items() if k.startswith("retry-after") or "ratelimit" in k}


class WorkerGone(RuntimeError):
    """A lease was asked for by a worker the driver has already declared dead."""


def pause_of(headers: Mapping[str, str]) -> float | None:
    """Seconds a reply asks every client to wait: ``retry-after-ms`` / 1000, else
    ``Retry-After`` (seconds or an HTTP date); None when it asks nothing.

    >>> pause_of({"retry-after": "2"}), pause_of({"retry-after-ms": "250"}), pause_of({})
    (2.0, 0.25, None)
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
        except ValueError:
            value = None
        if value is not None and value == value and value > 0:
            return value
    return parse_retry_after(headers.get("retry-after"))


class GateKeeper:
    """At most ``limit`` leases out at once, across workers; a 429 with ``Retry-After``
    pauses every acquire (up to :data:`MAX_PAUSE_S`)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.stats = GateStats(limit=limit)
        self.peak = 0
        self.pauses = 0
        self._free = limit
        self._leases: dict[int, str] = {}  # lease -> worker
        self._next = 0
        self._dead: set[str] = set()
        self._paused_until = 0.0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made inside the actor's running loop
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self, worker: str, tokens: int = 0) -> int:
        """Wait for a free slot and for any pause to end; a lease id held by ``worker``."""
        cond = self._condition()
        loop = asyncio.get_running_loop()
        async with cond:
            while True:
                if worker in self._dead:
                    cond.notify(1)  # a wake-up meant for a slot passes to the next waiter
                    raise WorkerGone(worker)
                pause = self._paused_until - loop.time()
                if pause > 0:
                    with contextlib.suppress(TimeoutError):  # woken early: look again
                        await asyncio.wait_for(cond.wait(), pause)
                    continue
                if self._free > 0:
                    break
                await cond.wait()
            self._free -= 1
            self._next += 1
            self._leases[self._next] = worker
            self.stats.in_flight += 1
            self.peak = max(self.peak, self.stats.in_flight)
            return self._next

    async def release(self, lease: int, status: int | None = None,
                      headers: Mapping[str, str] | None = None, tokens: int | None = None) -> None:
        """Hand ``lease`` back; a 429's ``Retry-After`` pauses the endpoint for everyone.
        (``tokens``, the reply's usage, and the rate-limit headers arrive for a richer
        limiter's sake; this one acts on the status and the pause only.)"""
        cond = self._condition()
        async with cond:
            if status == 429:
                self.stats.rate_limited += 1
                pause = pause_of(headers or {})
                if pause is not None:
                    until = asyncio.get_running_loop().time() + min(pause, MAX_PAUSE_S)
                    if until > self._paused_until:
                        self._paused_until = until
                        self.pauses += 1
            if self._leases.pop(lease, None) is None:
                return  # already handed back with its dead worker's leases
            self._free += 1
            self.stats.in_flight -= 1
            cond.notify(1)

    async def release_worker(self, worker: str) -> int:
        """Hand back every lease ``worker`` holds (it died); its later acquires fail.
        Returns how many were released."""
        cond = self._condition()
        async with cond:
            self._dead.add(worker)
            gone = [lease for lease, owner in self._leases.items() if owner == worker]
            for lease in gone:
                del self._leases[lease]
            self._free += len(gone)
            self.stats.in_flight -= len(gone)
            cond.notify(len(gone))
            return len(gone)

    async def snapshot(self) -> dict[str, Any]:
        """Counters for the driver and tests: limit, in flight, peak, 429s, pauses, leases by worker."""
        by_worker: dict[str, int] = {}
        for owner in self._leases.values():
            by_worker[owner] = by_worker.get(owner, 0) + 1
        return {"limit": self.stats.limit, "in_flight": self.stats.in_flight, "peak": self.peak,
                "rate_limited": self.stats.rate_limited, "pauses": self.pauses,
                "leases": by_worker}


class RemoteGate:
    """The ``Gate`` of one worker over a :class:`GateKeeper` actor (``actor``: its handle)."""

    def __init__(self, actor: Any, worker: str, limit: int) -> None:
        self.actor = actor
        self.worker = worker
        self.stats = GateStats(limit=limit)

    async def acquire(self, tokens: int) -> Lease:
        lease: int = await self.actor.acquire.remote(self.worker, tokens)
        self.stats.in_flight += 1
        return lease

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        self.stats.in_flight -= 1
        if outcome.status == 429:
            self.stats.rate_limited += 1
        await self.actor.release.remote(lease, outcome.status, _limit_headers(outcome.headers),
                                        outcome.tokens)
