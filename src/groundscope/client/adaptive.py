"""What the client learns of an endpoint's limits, pure (every call takes ``now``): the
token bucket that paces requests and tokens (told ``rpm`` / ``tpm``, a limit a header
names, or a rate learned), the in-flight limit (AIMD) and the request rate learned from
hint-less 429s. The limiter that combines them with the endpoint's headers is
``client/ratelimit.py`` (:class:`~groundscope.client.ratelimit.RateLimiter`)."""

from __future__ import annotations

import math


class TokenBucket:
    """``per_minute`` units a minute, refilled continuously, with a burst of ``burst_s``
    seconds' worth (at least one unit). A cost larger than the burst is let through when
    the bucket is full and leaves it in debt, so nothing waits forever; a cost over the
    whole minute's limit is charged as the limit (:meth:`charge`)."""

    def __init__(self, per_minute: float, burst_s: float = 1.0) -> None:
        if not per_minute > 0 or not math.isfinite(per_minute):
            raise ValueError("a rate limit must be a positive number per minute")
        self.per_minute = per_minute
        self.burst_s = burst_s
        self.rate = per_minute / 60.0
        self.capacity = max(self.rate * burst_s, 1.0)
        self.level = self.capacity
        self._stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is not None and now > self._stamp:
            self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        if self._stamp is None or now > self._stamp:
            self._stamp = now

    def charge(self, cost: float) -> float:
        """What a request estimated at ``cost`` is charged: never more than a minute's limit."""
        return min(max(cost, 0.0), self.per_minute)

    def wait(self, cost: float, now: float) -> float:
        """Seconds until a request of ``cost`` may go (0: now)."""
        self._refill(now)
        need = min(self.charge(cost), self.capacity)
        wait = (need - self.level) / self.rate
        return wait if wait > 1e-6 else 0.0  # float rounding: no microsecond spins

    def take(self, cost: float, now: float) -> None:
        self._refill(now)
        self.level -= self.charge(cost)

    def retune(self, per_minute: float) -> None:
        """A new rate (at least one a minute); the level stays, within the new burst."""
        self.per_minute = max(per_minute, 1.0)
        self.rate = self.per_minute / 60.0
        self.capacity = max(self.rate * self.burst_s, 1.0)
        self.level = min(self.level, self.capacity)

    def adjust(self, delta: float, now: float) -> None:
        """Give back (``delta`` > 0) or charge more (< 0) once the real cost is known."""
        self._refill(now)
        self.level = min(self.capacity, self.level + delta)


class LearnedRate:
    """A request rate learned from hint-less 429s. The first of a request sent alone (an
    in-flight limit cannot be the cause) opens a measurement; a 429 at
    least :data:`MEASURE_S` later sets a request bucket at :data:`MARGIN` of the rate at
    which requests sent since the first were answered (a refusing endpoint answers at its
    limit; answers to requests sent before it are the burst it let through, not counted).
    Each later 429 of a request sent after the last change cuts the rate by
    :data:`DECREASE`; answers grow it by about :data:`GROWTH` a minute, so it probes back
    up slowly.

    Refusals that do not follow the rate are not a rate. A 429 while the rate is under
    the one measured (``learned / MARGIN``: there an endpoint whose limit stands refuses
    nothing) is checked before it cuts: the next request goes at once (a gate wakes the
    requests sleeping on the pace; :meth:`check_sent`), and a spent rate refuses it too
    (its bucket refills one request per ``60 / rate`` seconds; the check goes within
    :data:`CHECK_S`). A refused check cuts the rate; an answered one does not, nor does
    one that fails otherwise (a 500, a timeout: :meth:`unchecked`); once
    :data:`CHECKS` checks and at least a third of them were answered, the pacing is
    dropped (``insensitive``). Without the check, an endpoint refusing one request in ten
    at random, at any rate, was paced down to where its cuts (one per 429) balance its
    growth, about (1 - p) / p requests a minute: 0.3 answers a second where 8 requests
    in flight get 70 (event model, 100 ms replies; 200 samples through the CLI: 165 s,
    then 14 s).

    Dropping the pacing is itself checked: a true limit with random refusals on top also
    answers checks. If, unpaced, more than :data:`RECHECK_SHARE` (and twice the share
    refused while paced) of :data:`RECHECK_N` or more requests are refused, it is paced
    again for the rest of the run (:meth:`_recheck`), and every 429 is checked before it
    cuts (dropped, a 120-a-minute limit with 5% refused at random saw 98% of its requests
    refused).

    A measurement that saw no more answers than 429s measured its own pauses, not the
    endpoint: one whose bucket holds a single request (no burst) answers the first request
    after each pause and refuses the next, so 300 a minute read as ~50. Such a rate grows
    by :data:`START` every :data:`START_EVERY` answers until its first 429 (a slow start,
    as TCP's), then as above: without it, a 300-a-minute endpoint was paced at 69 a minute
    and grown 10% a minute (40 samples: 46 s where 8 s would do).

    >>> learned = LearnedRate()
    >>> learned.rate_limited(now=0.0, seq=0, admitted=1)
    >>> learned.succeeded(seq=0)  # sent before the measurement: not counted
    >>> for seq in range(1, 9):
    ...     learned.succeeded(seq)
    >>> learned.rate_limited(now=4.0, seq=12, admitted=13)
    >>> round(learned.bucket.per_minute)  # 8 answers in 4 s: 120 a minute, less 10%
    108
    """

    MEASURE_S = 2.0
    MEASURE_PAUSE_S = 1.0
    MARGIN = 0.9
    DECREASE = 0.9
    GROWTH = 0.1
    CHECKS = 2
    CHECK_S = 0.05
    RECHECK_N = 20
    RECHECK_SHARE = 0.75
    START = 1.5
    START_EVERY = 5

    def __init__(self) -> None:
        self.bucket: TokenBucket | None = None
        self.since: float | None = None  # when the measurement began
        self.answered = 0  # answers since then, to requests sent since then
        self.first_seq = 0  # the first request sent since then
        self.changed_at = 0  # requests admitted when the rate last changed
        self.learned = 0.0  # the rate learned, a minute
        self.insensitive = False  # refusals came at any rate: nothing is paced or learned
        self.armed: float | None = None  # when a 429 asked for a check (the next request)
        self.check: int | None = None  # the check in flight (its request's seq)
        self.checks: list[int] = [0, 0]  # checks answered, refused
        self.outcomes: list[int] = [0, 0]  # answered, refused: while paced, then once dropped
        self.dropped: tuple[float, float] | None = None  # the rate and refused share then
        self.dropped_at: float | None = None  # when
        self.pauses = 0  # 429s while measuring, after the first
        self.starting = 0  # > 0: slow start, answers since the last step up (+1)

    def rate_limited(self, now: float, seq: int, admitted: int) -> None:
        """A hint-less 429 of the request admitted ``seq``-th, ``admitted`` so far."""
        self.outcomes[1] += 1
        if self.insensitive:
            self._recheck(now, admitted)
            return
        if self.bucket is None:
            if self.since is None:
                self.since, self.answered, self.first_seq, self.pauses = now, 0, admitted, 0
                return
            self.pauses += 1
            if now - self.since >= self.MEASURE_S and self.answered >= 2:
                rate = self.answered / (now - self.since) * 60.0
                self.bucket = TokenBucket(rate * self.MARGIN)
                self.bucket.level = 0.0  # the measurement spent what the endpoint had
                self.changed_at = admitted
                self.learned = self.bucket.per_minute
                self.starting = int(self.answered <= self.pauses)  # paced by its pauses
                self.outcomes = [0, 0]
            return
        if seq == self.check:  # the check was refused too: the rate is spent
            self.check = None
            self.checks[1] += 1
        elif seq < self.changed_at or self.check is not None or self.armed is not None:
            return  # sent before the last change, or a check is on its way: one signal
        elif self.bucket.per_minute < self.learned / self.MARGIN or self.dropped is not None:
            self.armed = now  # check first: the next request goes at once
            self.bucket.level = max(self.bucket.level, 1.0)
            return
        self._cut(admitted)

    def _cut(self, admitted: int) -> None:
        assert self.bucket is not None
        self.bucket.retune(self.bucket.per_minute * self.DECREASE)
        self.changed_at = admitted
        self.starting = 0  # the first cut: the rate is found

    def check_sent(self, seq: int, now: float) -> None:
        """A request admitted ``seq``-th went out while a check was asked for (``armed``):
        it is the check if it went within :data:`CHECK_S`; later, a spent rate may have
        refilled meanwhile, and the 429 cuts the rate unchecked."""
        armed, self.armed = self.armed, None
        if armed is not None and now - armed <= self.CHECK_S:
            self.check = seq
        elif armed is not None and self.bucket is not None:
            self._cut(seq + 1)

    def unchecked(self) -> None:
        """The check ended in neither an answer nor a hint-less 429 (an error, a timeout, a
        429 with a hint): it says nothing, and the 429 it checked neither cuts the rate nor
        counts as a check (the next one is checked again). Cutting there made an endpoint
        that also failed some requests crawl: 10% random 429s, each followed by a 500,
        took 134 s where the 429s alone took 14 s."""
        self.check = None

    def _drop(self, now: float | None) -> None:
        assert self.bucket is not None
        answered, refused = self.outcomes
        self.dropped = (self.bucket.per_minute, refused / max(answered + refused, 1))
        self.dropped_at = now
        self.insensitive, self.bucket, self.since = True, None, None
        self.outcomes = [0, 0]

    def _recheck(self, now: float, admitted: int) -> None:
        """Unpaced, the endpoint refuses many more than it did paced: its pacing mattered
        after all (a true limit under refusals at random). It is paced again for the rest
        of the run, and 429s are still checked before they cut. The pace: :data:`MARGIN` of
        the rate it answered at meanwhile (refusing the rest, it answered at its limit), or
        the rate it had, if higher. Taking back the rate it had, learned low while the
        random refusals were cut for, left a 5-a-second limit with 10% refused at random
        paced at ~45 a minute, growing 10% a minute (200 samples: 260 s, ~40 s ideal)."""
        assert self.dropped is not None
        answered, refused = self.outcomes
        per_minute, share = self.dropped
        if answered + refused >= self.RECHECK_N and refused > max(
                self.RECHECK_SHARE, 2 * share) * (answered + refused):
            if self.dropped_at is not None and now > self.dropped_at:
                per_minute = max(per_minute,
                                 answered / (now - self.dropped_at) * 60.0 * self.MARGIN)
            self.insensitive = False
            self.bucket = TokenBucket(per_minute)
            self.bucket.level = 0.0
            self.since, self.changed_at = now, admitted
            self.starting = 1  # up quickly to the first refused check

    @property
    def measuring(self) -> bool:
        """Between the first hint-less 429 and the rate: each 429 pauses the endpoint for
        :data:`MEASURE_PAUSE_S` meanwhile (a 429 comes at once: without it the waiting
        requests would meet the endpoint back to back). The endpoint refills meanwhile and
        each pause still ends in a 429, so the answers still come at its rate; a pause of
        1 s instead of 0.5 s halves the 429s of the measurement (``bench_rate_limits.py``,
        hint-less, 120 a minute: 9-10 429s in ~190 requests at 0.5 s, 6-7 at 1 s)."""
        return self.since is not None and self.bucket is None

    @property
    def engaged(self) -> bool:
        """Whether it paces, measures, or watches a pacing it dropped (:meth:`_recheck`):
        then every answer counts, each must reach :meth:`succeeded`."""
        return self.bucket is not None or self.since is not None or self.dropped is not None

    def succeeded(self, seq: int, now: float | None = None) -> None:
        """An answer to the request admitted ``seq``-th (at ``now``)."""
        self.outcomes[0] += 1
        if self.bucket is not None:
            if seq == self.check:  # the check was answered: that 429 was not the rate
                self.check = None
                self.checks[0] += 1
                answered, refused = self.checks
                if (answered >= self.CHECKS and 3 * answered >= answered + refused
                        and self.dropped is None):
                    self._drop(now)
                    return
            if self.starting:  # slow start: x START every START_EVERY answers
                self.starting += 1
                if self.starting > self.START_EVERY:
                    self.bucket.retune(self.bucket.per_minute * self.START)
                    self.starting = 1
            else:  # +GROWTH a minute at the rate's own pace
                per_minute = self.bucket.per_minute
                self.bucket.retune(per_minute * (1.0 + self.GROWTH / per_minute))
        elif self.since is not None and seq >= self.first_seq:
            self.answered += 1


class AdaptiveLimit:
    """The in-flight limit (AIMD): times :data:`DECREASE` on a 429 (not below 1), +1 after
    ``limit`` successes, never above ``ceiling``. 429s of requests sent before the last
    decrease do not lower it again (one burst of 429s is one signal).

    A 429 with no hint of when to retry (no ``Retry-After``, no exhausted
    ``x-ratelimit-*``) reads as a concurrency limit: a request refused with ``k`` in flight
    caps the limit at ``k - 1`` and marks ``k`` as too many, and growing back to that mark
    takes :data:`PROBE` times as many successes, so a steady endpoint is probed rarely.
    A success with as many in flight clears the mark.
    """

    PROBE = 16
    DECREASE = 0.7  # as TCP CUBIC's: a gentler cut than halving, for less lost throughput

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError("concurrency must be >= 1")
        self.ceiling = self.limit = self.lowest = ceiling
        self.epoch = 0
        self.too_many: int | None = None
        self._credit = 0.0

    def rate_limited(self, epoch: int, in_flight: int | None = None) -> None:
        """A 429 on a request sent at ``epoch``; ``in_flight``: it went with that many in
        flight and the reply gave no retry hint (a concurrency limit)."""
        limit = self.limit
        if epoch >= self.epoch:
            limit = int(limit * self.DECREASE)
            self.epoch += 1
        if in_flight is not None:
            limit = min(limit, in_flight - 1)
            self.too_many = min(self.too_many or in_flight, in_flight)
        self.limit = max(1, limit)
        self.lowest = min(self.lowest, self.limit)
        self._credit = 0.0

    def succeeded(self, in_flight: int = 0) -> None:
        if self.too_many is not None and in_flight >= self.too_many:
            self.too_many = None
        if self.limit >= self.ceiling:
            return
        probing = self.too_many is not None and self.limit + 1 >= self.too_many
        self._credit += 1.0 / (self.limit * (self.PROBE if probing else 1))
        if self._credit >= 1.0 - 1e-9:  # 7 x (1 / 7) is 0.9999999999999998
            self._credit = 0.0
            self.limit += 1
