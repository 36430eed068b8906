"""Admission to one endpoint: the seam between the client's policy and who keeps the limits.

Every attempt of a request passes a :class:`Gate`: ``acquire`` waits for a slot (and, in a
rate-limiting gate, for request and token budget and for any pause the endpoint asked for);
``release`` returns the slot and reports what happened (:class:`Outcome`: the HTTP status,
the reply's headers, the tokens it used, the error kind), so a gate can lower its limit
after a 429, pause the endpoint for a ``Retry-After`` and correct its token estimate from
``usage``.

:class:`RateGate` is the in-process gate every client gets by default (one per client, one
event loop at a time): ``rpm`` / ``tpm`` buckets, an adaptive in-flight limit and pauses,
kept by ``client/ratelimit.py``'s pure :class:`~groundscope.client.ratelimit.RateLimiter`.
:class:`LocalGate` is a plain semaphore. A distributed executor plugs in a gate whose state
lives elsewhere, behind the same two calls: a Ray run's ``scaleout/gatekeeper.py`` keeps one
:class:`RateGate` per endpoint in an actor every worker asks, so the limits are one logic.
:class:`GateStats` is what a gate shows of itself (progress display, summary).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from groundscope.client.ratelimit import MAX_PAUSE_S, RateHeaders, RateLimiter, Ticket

log = logging.getLogger(__name__)

QUOTA_KINDS = frozenset({"insufficient_quota", "spend_limit"})
"""Error kinds of a 429 that is a spent quota, not a rate: no pause, no lower limit."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, as a gate needs to know it.

    ``status`` is the HTTP status (``None``: no reply, e.g. a timeout or a dropped
    connection); ``headers`` the reply's headers (lower-cased names; empty without a reply);
    ``tokens`` the total tokens the reply's ``usage`` reports, when it does; ``kind`` the
    error kind of a failed reply (e.g. ``insufficient_quota``: a 429 that is no rate limit).
    """

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tokens: int | None = None
    kind: str | None = None


@dataclass(slots=True)
class GateStats:
    """A gate's live counters: requests in flight, the current in-flight limit, how many
    attempts were answered 429 (rate limited) so far, retries (counted by the client), the
    lowest in-flight limit reached and the seconds the whole endpoint was paused."""

    limit: int
    in_flight: int = 0
    rate_limited: int = 0
    retries: int = 0
    lowest_limit: int | None = None
    paused_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The run summary's figures of one endpoint (``summary.rate_limits``)."""
        return {"rate_limited": self.rate_limited, "retries": self.retries,
                "lowest_limit": self.lowest_limit if self.lowest_limit is not None else self.limit,
                "paused_s": round(self.paused_s, 3)}


class Lease(Protocol):
    """What ``acquire`` hands out and ``release`` takes back (opaque to the client)."""


class Gate(Protocol):
    """Admission to one endpoint, shared by every request to it."""

    stats: GateStats

    async def acquire(self, tokens: int) -> Lease:
        """Wait until one more request estimated at ``tokens`` tokens may be sent."""
        ...

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        """Give the slot back and report how the attempt ended."""
        ...


class _Slot:
    __slots__ = ()


_SLOT = _Slot()


class LocalGate:
    """At most ``concurrency`` requests in flight, in this process.

    The semaphore is made inside the running loop (and again if the loop changes), as the
    client's session is.
    """

    def __init__(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self.stats = GateStats(limit=concurrency)
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:
            self._slots, self._loop = asyncio.Semaphore(self.concurrency), loop
            self.stats.in_flight = 0
        return self._slots

    async def acquire(self, tokens: int) -> Lease:
        await self._semaphore().acquire()
        self.stats.in_flight += 1
        return _SLOT

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        if outcome.status == 429:
            self.stats.rate_limited += 1
        self.stats.in_flight -= 1
        self._semaphore().release()


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]


class RateGate:
    """The endpoint's limits in this process: at most the adaptive in-flight limit (up to
    ``concurrency``), ``rpm`` requests and ``tpm`` tokens a minute, and no request while
    the endpoint is paused (at most ``max_pause`` seconds at a time). ``clock``
    (monotonic), ``wall`` (epoch, for HTTP dates) and ``sleep`` are injectable for tests.

    A waiter that needs a request in flight to finish waits on a condition that every
    release notifies; one that needs time sleeps as long as the limiter says, then looks
    again (a pause set meanwhile keeps it waiting, so a pause holds every waiter). A release
    after which the limiter wants a request at once (a learned rate's check of a 429,
    ``client/adaptive.py``) wakes the sleepers too: a check must go before the pace would
    send it.
    """

    def __init__(self, concurrency: int, *, rpm: float | None = None, tpm: float | None = None,
                 max_pause: float = MAX_PAUSE_S, clock: Clock = time.monotonic,
                 wall: Clock = time.time, sleep: Sleep = asyncio.sleep) -> None:
        self.limiter = RateLimiter(concurrency, rpm=rpm, tpm=tpm, max_pause=max_pause)
        self.stats = GateStats(limit=concurrency, lowest_limit=concurrency)
        self._clock, self._wall, self._sleep = clock, wall, sleep
        self._changed: asyncio.Condition | None = None
        self._alarm: asyncio.Event | None = None  # set: the sleepers look again now
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warned = False

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._alarm, self._loop = asyncio.Condition(), None, loop
            self.limiter.forget_in_flight()
        return self._changed

    async def acquire(self, tokens: int) -> Lease:
        ticket = await self.admit(tokens)
        assert ticket is not None
        return ticket

    async def admit(self, tokens: int, gone: Callable[[], bool] | None = None) -> Ticket | None:
        """Wait until a request estimated at ``tokens`` may go and admit it; None (nothing
        admitted) once ``gone()`` turns true while waiting: the asker is no more (a dead
        Ray worker, ``scaleout/gatekeeper.py``, whose gate is this one shared by all)."""
        changed = self._condition()
        bucket = self.limiter.tokens
        if bucket is not None and tokens > bucket.per_minute and not self._warned:
            self._warned = True
            log.warning("a request is estimated at %d tokens, over the tpm limit of %g: it is "
                        "counted as %g (the endpoint may refuse it as too large)",
                        tokens, bucket.per_minute, bucket.per_minute)
        while True:
            if gone is not None and gone():
                return None
            wait = self.limiter.wait(tokens, self._clock())
            if wait == 0:
                break
            if wait is None:
                async with changed:
                    await changed.wait()
            else:
                await self._nap(wait)
        ticket = self.limiter.admit(tokens, self._clock())
        self._show()
        return ticket

    def try_admit(self, tokens: int) -> Ticket | None:
        """Admit a request estimated at ``tokens`` if the limits let it go now, else None
        (never waits: a Ray gate's batch of leases, ``scaleout/gatekeeper.py``)."""
        if self.limiter.wait(tokens, self._clock()) != 0:
            return None
        ticket = self.limiter.admit(tokens, self._clock())
        self._show()
        return ticket

    def credit(self, successes: int) -> None:
        """``successes`` replies of requests sent on a slot a Ray worker kept (reused, not
        released): the adaptive limit grows as if each had been released."""
        for _ in range(max(0, successes)):
            self.limiter.concurrency.succeeded(self.limiter.in_flight)
        self._show()

    async def release(self, lease: Lease, outcome: Outcome) -> None:
        assert isinstance(lease, Ticket)
        headers = RateHeaders.read(outcome.headers, self._wall())
        self.limiter.settle(lease, outcome.status, headers, outcome.tokens, self._clock(),
                            rate_limit=outcome.kind not in QUOTA_KINDS)
        self._show()
        if self.limiter.learned.armed is not None and self._alarm is not None:
            self._alarm.set()  # a check is wanted: the sleepers look again
            self._alarm = None
        await self.wake()

    async def _nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or until a release sets the alarm."""
        if self._alarm is None:
            self._alarm = asyncio.Event()
        ringing = asyncio.ensure_future(self._alarm.wait())
        sleeping = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait((ringing, sleeping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            ringing.cancel()
            sleeping.cancel()

    async def wake(self) -> None:
        """Every waiter looks again (a release does this; so does a dead worker's end)."""
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def _show(self) -> None:
        s, lim = self.stats, self.limiter
        s.in_flight, s.limit = lim.in_flight, lim.concurrency.limit
        s.lowest_limit, s.rate_limited = lim.concurrency.lowest, lim.rate_limited
        s.paused_s = lim.paused_s
