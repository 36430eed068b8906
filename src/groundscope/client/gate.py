"""Admission to one endpoint: the seam between the client's policy and who keeps the limits.

Every attempt of a request passes a :class:`Gate`: ``acquire`` waits for a slot (and, in a
rate-limiting gate, for request and token budget and for any pause the endpoint asked for);
``release`` returns the slot and reports what happened (:class:`Outcome`: the HTTP status,
the reply's headers, the tokens it used), so a gate can lower its limit after a 429, pause
the endpoint for a ``Retry-After`` and correct its token estimate from ``usage``.

:class:`LocalGate` is the in-process gate (one per client, one event loop at a time). A
distributed executor plugs in a gate whose state lives elsewhere, behind the same two calls.
:class:`GateStats` is what a gate shows of itself (progress display, summary).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, as a gate needs to know it.

    ``status`` is the HTTP status (``None``: no reply, e.g. a timeout or a dropped
    connection); ``headers`` the reply's headers (lower-cased names; empty without a reply);
    ``tokens`` the total tokens the reply's ``usage`` reports, when it does.
    """

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tokens: int | None = None


@dataclass(slots=True)
class GateStats:
    """A gate's live counters: requests in flight, the current in-flight limit, and how
    many attempts were answered 429 (rate limited) so far."""

    limit: int
    in_flight: int = 0
    rate_limited: int = 0


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
