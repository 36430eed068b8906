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
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundscope.client.gate import Clock, GateStats, Lease, Outcome, RateGate, Sleep
from groundscope.client.ratelimit import MAX_PAUSE_S, RateHeaders, Ticket, rate_headers

Ended = tuple[int, int | None, dict[str, str], int | None, str | None]
"""A lease handed back: (lease, status, limit headers, tokens used, error kind); status
None and no headers for a lease that was never used (it expired in a worker's pool)."""
LEASE_S = 0.05  # a lease's term: then it goes back, so a pause or a cut limit reaches every worker
HEADROOM = 2  # leases a worker keeps ahead of need (at most a quarter of the limit)


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
    max_pause: float = 30.0  # the run's retry_max_delay (gate_limits), as a local run's gates


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

    async def admit_batch(self, worker: str, want: int, tokens: int = 0) -> tuple[list[int], bool]:
        """Leases for up to ``want`` requests of ``worker`` estimated at ``tokens`` each:
        waits for the first as :meth:`acquire`, then takes as many more as the limits let
        go now (a worker's batch: one call for many requests); and whether the endpoint's
        requests are paced now (``RateLimiter.paces``: then a lease serves one request)."""
        leases = [await self.acquire(worker, tokens)]
        while len(leases) < want:
            ticket = self.gate.try_admit(tokens)
            if ticket is None:
                break
            self._next += 1
            self._leases[self._next] = (worker, ticket)
            leases.append(self._next)
        self.peak = max(self.peak, self.stats.in_flight)
        return leases, self.gate.limiter.paces

    async def release_batch(self, ended: list[Ended], retries: int = 0,
                            successes: int = 0) -> None:
        """Hand back many leases at once, each with how its attempt ended (:meth:`release`);
        ``successes``: replies of requests a worker sent on leases it kept meanwhile."""
        self.stats.retries += max(0, retries)
        self.gate.credit(successes)
        for lease, status, headers, tokens, kind in ended:
            await self.release(lease, status, headers, tokens, kind)

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
        await self.actor.release.remote(lease, outcome.status, rate_headers(outcome.headers),
                                        outcome.tokens, outcome.kind, retries)

    async def refresh(self) -> None:
        """Take the endpoint's counters from the actor."""
        self.stats = await self.actor.gate_stats.remote()


class LeasedGate:
    """The ``Gate`` of one worker over a :class:`GateKeeper` actor, without a round trip per
    request: leases come in batches (:meth:`GateKeeper.admit_batch`: as many as the worker's
    requests are waiting for, plus up to :data:`HEADROOM` ahead of need) and go back in
    batches with their outcomes (:meth:`GateKeeper.release_batch`), each by one background
    task that sends what accumulated while its previous call was out. Every lease is one
    request admitted by the actor's limiter, so the limits stay the endpoint's across
    workers; a lease unused for :data:`LEASE_S` is handed back, so a pause or a lower limit
    set after it was taken holds this worker within that time too. A 429 goes back at once."""

    def __init__(self, actor: Any, worker: str, limit: int, *, paced: bool = False) -> None:
        self.actor = actor
        self.worker = worker
        self.stats = GateStats(limit=limit)
        # none ahead of need under rpm / tpm (told, or learned by the actor from a reply or
        # from 429s: each batch of leases says): a lease is charged when taken
        self._paced = paced
        self._headroom = 0 if paced else min(HEADROOM, limit // 4)
        self._terms: dict[int, float] = {}  # lease in use -> when it expires
        self._used: set[int] = set()  # leases kept and used before (only those expire here)
        self._successes = 0  # replies on kept leases not reported yet
        self._pool: deque[tuple[int, float]] = deque()  # (lease, when it expires)
        self._ended: list[Ended] = []
        self._waiting = 0
        self._tokens = 0  # the last request's estimate: the next batch's
        self._retries_sent = 0
        self._changed: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refill: asyncio.Task[None] | None = None
        self._flush: asyncio.Task[None] | None = None
        self.calls = 0  # actor calls made (admit and release batches)

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._loop = asyncio.Condition(), loop
            self._pool.clear()
            self._refill = self._flush = None
        return self._changed

    async def acquire(self, tokens: int) -> Lease:
        changed = self._condition()
        self._tokens = tokens
        self._waiting += 1
        try:
            while (lease := self._take()) is None:
                self._kick()
                async with changed:
                    await changed.wait()
        finally:
            self._waiting -= 1
        self.stats.in_flight += 1
        self._kick()  # refilled ahead of need
        return lease

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        assert isinstance(lease, int)
        self.stats.in_flight -= 1
        if outcome.status == 429:
            self.stats.rate_limited += 1
        expires = self._terms.pop(lease, 0.0)
        if self._reusable(outcome) and expires > time.monotonic():
            self._successes += 1  # the slot stays here for the next request
            self._pool.appendleft((lease, expires))
            changed = self._condition()
            async with changed:
                changed.notify()
            return
        self._used.discard(lease)
        ended = (lease, outcome.status, rate_headers(outcome.headers), outcome.tokens,
                 outcome.kind)
        if outcome.status != 429:
            self._ended.append(ended)
            self._send()
            return
        # a 429 goes at once, on its own call, with the slots kept here (none reused after)
        self._terms = dict.fromkeys(self._terms, 0.0)
        pooled, self._pool = self._pool, deque()
        self.calls += 1
        await self.actor.release_batch.remote(
            [ended, *((kept, None, {}, None, None) for kept, _ in pooled)])

    def _reusable(self, outcome: Outcome) -> bool:
        """Whether a slot may serve another request without going back: a 200 that asks for
        no pause, leaves plenty of requests and names no request limit (the shared limiter
        learns a pace from one, as a local run's does), on an endpoint whose requests are
        not paced (where a lease is one request's budget)."""
        if self._paced or outcome.status != 200:
            return False
        headers = rate_headers(outcome.headers)
        if not headers:
            return True
        said = RateHeaders.read(headers, time.time())
        left = said.remaining_requests
        return (said.pause(False) == 0 and said.limit_requests is None
                and (left is None or left > 4 * self.stats.limit))

    def _take(self) -> int | None:
        now = time.monotonic()
        while self._pool:
            lease, expires = self._pool.popleft()
            if expires > now or lease not in self._used:  # a fresh grant is always used
                self._terms[lease] = expires
                self._used.add(lease)
                return lease
            self._used.discard(lease)
            self._ended.append((lease, None, {}, None, None))  # expired: back unused
        if self._ended:
            self._send()
        return None

    def _kick(self) -> None:
        idle = self._refill is None or self._refill.done()
        if idle and self._waiting + self._headroom > len(self._pool):
            self._refill = asyncio.create_task(self._refill_loop())

    async def _refill_loop(self) -> None:
        changed = self._condition()
        while (want := self._waiting + self._headroom - len(self._pool)) > 0:
            self.calls += 1
            leases, paced = await self.actor.admit_batch.remote(self.worker, want, self._tokens)
            if paced and not self._paced:  # the shared limiter paces from now on
                self._paced, self._headroom = True, 0
            expires = time.monotonic() + LEASE_S
            self._pool.extend((lease, expires) for lease in leases)
            async with changed:
                changed.notify_all()
            asyncio.get_running_loop().call_later(LEASE_S, self._expire)

    def _expire(self, every: bool = False) -> None:
        now = float("inf") if every else time.monotonic()
        keep = [(lease, t) for lease, t in self._pool if t > now]
        for lease, t in self._pool:
            if t <= now:
                self._used.discard(lease)
                self._ended.append((lease, None, {}, None, None))
        self._pool = deque(keep)
        if self._ended:
            self._send()

    def _send(self) -> None:
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while self._ended:
            ended, self._ended = self._ended, []
            retries, self._retries_sent = (self.stats.retries - self._retries_sent,
                                           self.stats.retries)
            successes, self._successes = self._successes, 0
            self.calls += 1
            await self.actor.release_batch.remote(ended, retries, successes)

    async def aclose(self) -> None:
        """Hand back what is pooled and wait for what is being sent."""
        self._pool, pooled = deque(), self._pool
        self._ended.extend((lease, None, {}, None, None) for lease, _ in pooled)
        for task in (self._refill,):
            if task is not None:
                task.cancel()
        if self._ended:
            self._send()
        if self._flush is not None:
            await asyncio.gather(self._flush, return_exceptions=True)
