"""Provider rate limits, pure: header parsing, token buckets, adaptive concurrency.

Nothing here does I/O or reads a clock: every call takes ``now`` (monotonic seconds) and,
for HTTP dates, ``wall`` (epoch seconds), so tests drive time by hand. The async gate over
it is ``client/gate.py`` (:class:`~groundscope.client.gate.RateGate`).

Rate-limit headers are hostile input: every value is read within :data:`MAX_HEADER_CHARS`,
must be finite and non-negative, and every pause they ask for is capped at
:data:`MAX_PAUSE_S`. A value that fails any check is ignored, as if absent::

    >>> parse_duration("6m0s"), parse_duration("1.5s"), parse_duration("644ms")
    (360.0, 1.5, 0.644)
    >>> parse_duration("-1s"), parse_duration("1e999"), parse_duration("soon")
    (None, None, None)
    >>> retry_after({"retry-after-ms": "250", "retry-after": "9"}, wall=0.0)
    0.25

A limiter keeps, per endpoint, a request bucket (``rpm``), a token bucket (``tpm``; a
request is charged its estimate before sending, corrected from ``usage`` after), an
in-flight limit cut by 0.7 on a 429 that grows back by one per ``limit`` successes
(AIMD), no more requests than the last ``x-ratelimit-remaining-requests`` allows (a count
that expires at its reset, or after :data:`ALLOWANCE_TTL_S` without one, so a stale 0 from
a 429 cannot serialise a run whose other replies carry no headers), and a pause every
request waits out (``Retry-After``, ``retry-after-ms``, ``x-ratelimit-reset-*``; a
``x-ratelimit-remaining-*`` of 0 pauses before the 429 comes, for its reset or, without
one, for ``60 / x-ratelimit-limit-requests`` seconds).

A client not told ``rpm`` takes the ``x-ratelimit-limit-requests`` a reply names as its
request rate (a gateway may name it only on its 429s). Gateways pass a provider's headers
on under a prefix: LiteLLM's ``llm_provider-`` names
(``llm_provider-retry-after``, ``llm_provider-x-ratelimit-reset-requests``, ...) are read
where the plain name is absent (:data:`GATEWAY_PREFIXES`).

A 429 with no hint at all, from an endpoint that names no limit and was told no ``rpm``,
may be a request rate no in-flight limit can keep under (one request at a time at 200 ms
is 300 a minute): :class:`LearnedRate` measures the rate the endpoint answers at while it
refuses, then paces requests just under it.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from groundscope.client.adaptive import AdaptiveLimit, LearnedRate, TokenBucket

MAX_HEADER_CHARS = 64
MAX_PAUSE_S = 120.0  # the OpenAI SDK's own bound on a Retry-After it honours
ALLOWANCE_TTL_S = 1.0  # how long a remaining count without a reset is believed
GATEWAY_PREFIXES = ("llm_provider-",)  # LiteLLM's prefix for the provider's own headers
_MAX_COUNT = 10**12
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


# ---------------------------------------------------------------- headers


def _short(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value if 0 < len(value) <= MAX_HEADER_CHARS else None


def parse_seconds(value: object) -> float | None:
    """A finite, non-negative number of seconds from a short string, else None."""
    text = _short(value)
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_duration(value: object) -> float | None:
    """A Go-style duration (``6m0s``, ``1.5s``, ``644ms``, ``1h2m``) or plain seconds."""
    plain = parse_seconds(value)
    if plain is not None:
        return plain
    text = _short(value)
    if text is None or not _DURATION.fullmatch(text):
        return None
    total = sum(float(n) * _UNIT[unit] for n, unit in _PART.findall(text))
    return total if math.isfinite(total) else None


def parse_count(value: object) -> int | None:
    """A non-negative integer (a limit, a remaining count), else None."""
    text = _short(value)
    if text is None or not text.isascii() or not text.isdigit():
        return None
    count = int(text)
    return count if count <= _MAX_COUNT else None


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The header ``name`` (lower case), else a gateway's prefixed copy of it.

    >>> header({"llm_provider-retry-after": "2"}, "retry-after")
    '2'
    """
    value = headers.get(name)
    if value is None:
        value = next((v for p in GATEWAY_PREFIXES if (v := headers.get(p + name)) is not None),
                     None)
    return value


def rate_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of a reply (lower-cased names) that :func:`retry_after` and
    :meth:`RateHeaders.read` may read: ``retry-after``, ``retry-after-ms`` and the rate-limit
    families, plain or behind a gateway's prefix (:func:`header`). What a Ray worker passes
    on to its endpoint's shared gate (``scaleout/gatekeeper.py``), so that the gate reads
    the same hints as a local run's.

    >>> rate_headers({"content-type": "application/json", "llm_provider-retry-after": "2",
    ...               "x-ratelimit-remaining-requests": "0"})
    {'llm_provider-retry-after': '2', 'x-ratelimit-remaining-requests': '0'}
    """
    return {k: v for k, v in headers.items() if "retry-after" in k or "ratelimit" in k}


def retry_after(headers: Mapping[str, str], wall: float) -> float | None:
    """Seconds a reply asks to wait: ``retry-after-ms``, else ``retry-after`` as seconds or
    as an HTTP date (the OpenAI and Anthropic SDKs' order), each plain or gateway-prefixed;
    None if absent or invalid."""
    ms = parse_seconds(header(headers, "retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    raw = header(headers, "retry-after")
    seconds = parse_seconds(raw)
    if seconds is not None or _short(raw) is None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(str(raw).strip())
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    try:
        delta = when.timestamp() - wall
    except (OverflowError, ValueError, OSError):
        return None
    return max(0.0, delta) if math.isfinite(delta) else None


@dataclass(frozen=True, slots=True)
class RateHeaders:
    """What a reply says of the endpoint's limits (each None when absent or invalid)."""

    retry_after: float | None = None
    limit_requests: int | None = None
    limit_tokens: int | None = None
    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests: float | None = None
    reset_tokens: float | None = None

    @classmethod
    def read(cls, headers: Mapping[str, str], wall: float) -> RateHeaders:
        """The headers of one reply (lower-cased names), each parsed within bounds."""
        def x(name: str) -> str | None:
            return header(headers, "x-ratelimit-" + name)

        return cls(
            retry_after=retry_after(headers, wall),
            limit_requests=parse_count(x("limit-requests")),
            limit_tokens=parse_count(x("limit-tokens")),
            remaining_requests=parse_count(x("remaining-requests")),
            remaining_tokens=parse_count(x("remaining-tokens")),
            reset_requests=parse_duration(x("reset-requests")),
            reset_tokens=parse_duration(x("reset-tokens")),
        )

    def _unit_wait(self, kind: str) -> float | None:
        """Until one more request / a minute's share of tokens returns when ``kind`` is
        exhausted (remaining 0): the reset, or less when the limit tells the refill rate;
        without a reset, a request limit's refill of one (60 / limit seconds)."""
        remaining = getattr(self, f"remaining_{kind}")
        reset = getattr(self, f"reset_{kind}")
        limit = getattr(self, f"limit_{kind}")
        if remaining != 0:
            return None
        if reset is None:
            return 60.0 / limit if limit and kind == "requests" else None
        return min(reset, 60.0 / limit) if limit else reset

    def pause(self, rate_limited: bool) -> float:
        """Seconds the whole endpoint should wait (0: none), capped at MAX_PAUSE_S.

        After a 429: ``Retry-After`` if given, else the reset of what ran out, else the
        shorter reset given. After any other reply: only what ran out (remaining 0).
        """
        waits = [w for w in (self._unit_wait("requests"), self._unit_wait("tokens"))
                 if w is not None]
        if rate_limited and self.retry_after is not None:
            wait = self.retry_after
        elif waits:
            wait = max(waits)
        elif rate_limited:
            resets = [r for r in (self.reset_requests, self.reset_tokens) if r is not None]
            wait = min(resets, default=0.0)
        else:
            wait = 0.0
        return min(wait, MAX_PAUSE_S)


# ---------------------------------------------------------------- the limiter


NO_HINT = RateHeaders()


@dataclass(frozen=True, slots=True)
class Ticket:
    """One admitted request: the AIMD epoch it went out in, the tokens charged, and how
    many requests were in flight with it (itself included)."""

    epoch: int
    tokens: float
    in_flight: int = 1
    seq: int = 0  # requests admitted before it
    refused: int = 0  # 429s settled before it went


class RateLimiter:
    """One endpoint's limits: ``rpm`` / ``tpm`` buckets (None: unlimited), the adaptive
    in-flight limit under ``concurrency``, and the pause the endpoint asked for (at most
    ``max_pause``: the retry policy's ``max_delay``, so one setting caps both). When a
    pause ends, one request goes first (``probing``) and the rest follow once one is
    answered without a new pause, so the waiters do not meet the endpoint all at once.
    After a 429 that cuts the in-flight limit without a pause, the probe goes once fewer
    than the cut limit are in flight, and only an answer to a request sent since the 429
    ends probing: answers to earlier ones say nothing of the endpoint now (against a spent
    request rate they let the whole cut limit out at once, into 429s)."""

    def __init__(self, concurrency: int, *, rpm: float | None = None,
                 tpm: float | None = None, max_pause: float = MAX_PAUSE_S) -> None:
        self.concurrency = AdaptiveLimit(concurrency)
        self.max_pause = min(max(max_pause, 0.0), MAX_PAUSE_S)
        self.requests = TokenBucket(rpm) if rpm else None
        self.learned = LearnedRate()  # paces only while nothing told a request rate
        self.tokens = TokenBucket(tpm) if tpm else None
        self.in_flight = 0
        self.paused_until = 0.0
        self.paused_s = 0.0
        self.rate_limited = 0
        self.probing = False  # after a pause or a cut: one request at a time until one goes through
        self.probe_from = 0  # the first request whose answer may end probing
        self.probes = 0  # requests in flight admitted since ``probe_from``
        self.allowance: int | None = None  # requests the endpoint said are left, less those sent
        self.allowance_until = 0.0  # when that count expires (its reset, or ALLOWANCE_TTL_S)
        self.admitted = 0

    @property
    def paces(self) -> bool:
        """Whether requests are paced, or a pace is being learned: a request or token rate
        told or named by a reply, or one learned from 429s (measured, paced, or dropped and
        watched: ``LearnedRate.engaged``). Each request must then be admitted here and each
        answer settled here; none may go on another's admission (a Ray worker's reused slot,
        ``scaleout/gatekeeper.py``)."""
        return self.requests is not None or self.tokens is not None or self.learned.engaged

    def wait(self, tokens: float, now: float) -> float | None:
        """Seconds until a request estimated at ``tokens`` may go: 0 now, None when it must
        wait for a request in flight to finish (the in-flight limit is reached)."""
        if now < self.paused_until:
            return self.paused_until - now
        if self.in_flight >= self.concurrency.limit or (self.probing and self.probes):
            return None
        if self.allowance is not None and now >= self.allowance_until:
            self.allowance = None  # stale: no reply has told a newer count
        if self.allowance is not None and self.allowance <= 0 and self.in_flight:
            return None  # none left: wait for a reply to say how many are now
        waits = [b.wait(cost, now) for b, cost in ((self._request_bucket(), 1.0),
                                                    (self.tokens, tokens)) if b is not None]
        return max(waits, default=0.0)

    def _request_bucket(self) -> TokenBucket | None:
        return self.requests if self.requests is not None else self.learned.bucket

    def admit(self, tokens: float, now: float) -> Ticket:
        charged = 0.0
        if (requests := self._request_bucket()) is not None:
            requests.take(1.0, now)
        if self.tokens is not None:
            charged = self.tokens.charge(tokens)
            self.tokens.take(tokens, now)
        self.in_flight += 1
        self.probes += 1
        self.admitted += 1
        if self.allowance is not None:
            self.allowance -= 1
        if self.learned.armed is not None:
            self.learned.check_sent(self.admitted - 1, now)
        return Ticket(self.concurrency.epoch, charged, self.in_flight, self.admitted - 1,
                      self.rate_limited)

    def settle(self, ticket: Ticket, status: int | None, headers: RateHeaders,
               used: int | None, now: float, *, rate_limit: bool = True) -> None:
        """A request ended: ``status`` (None: no reply), its rate headers, the tokens its
        ``usage`` reports. ``rate_limit=False`` for a 429 that is not one (a quota)."""
        self.in_flight = max(0, self.in_flight - 1)
        newer = ticket.seq >= self.probe_from
        if newer:
            self.probes = max(0, self.probes - 1)
        if self.requests is None and headers.limit_requests:  # learned: as if told --rpm
            self.requests = TokenBucket(headers.limit_requests)
        if headers.remaining_requests is not None:  # less those sent after this one
            self.allowance = headers.remaining_requests - (self.admitted - ticket.seq - 1)
            reset = headers.reset_requests
            self.allowance_until = now + (ALLOWANCE_TTL_S if reset is None
                                          else min(reset, self.max_pause))
        limited = status == 429 and rate_limit
        pause = headers.pause(limited)
        if limited:
            self.rate_limited += 1
            # how many were in flight with it: as many as when it went, and at least two if
            # one went after it (an endpoint may refuse whichever of two overlapping it
            # decides first: that is no request rate, and one in flight is not too many)
            overlap = ticket.in_flight
            if overlap <= 1 and self.admitted > ticket.seq + 1:
                overlap = 2
            # refusals at any rate (``LearnedRate.insensitive``) came alone too: no in-flight
            # count is too many, though each 429 still cuts the limit
            self.concurrency.rate_limited(
                ticket.epoch, None if pause or self.learned.insensitive else overlap)
            # not a word on the limit, and refused though it was alone its whole life (or a
            # rate is being learned): a request rate, which no in-flight limit keeps under
            alone = overlap <= 1 or self.learned.since is not None or self.learned.insensitive
            if self.requests is None and headers == NO_HINT and alone:
                self.learned.rate_limited(now, ticket.seq, self.admitted)
                if self.learned.measuring:
                    pause = LearnedRate.MEASURE_PAUSE_S
        elif status == 200:
            # answered with that many in flight, unless one of them was refused meanwhile
            # (the endpoint did not take them all at once)
            together = ticket.in_flight if ticket.refused == self.rate_limited else 1
            self.concurrency.succeeded(together)
            self.learned.succeeded(ticket.seq, now)
        if ticket.seq == self.learned.check:  # neither answered nor refused without a hint
            self.learned.unchecked()
        if self.tokens is not None and used is not None and status == 200:
            self.tokens.adjust(ticket.tokens - self.tokens.charge(used), now)
        self.pause_for(pause, now)
        if pause:  # every request in flight came before the pause: any answer ends probing
            self.probing, self.probe_from, self.probes = True, 0, self.in_flight
        elif limited and (newer or not self.probing):  # a cut, no pause (a 429 sent before
            # the probe is of the burst already counted): only a request sent since ends it
            self.probing, self.probe_from, self.probes = True, self.admitted, 0
        elif status == 200 and newer:
            self.probing = False

    def forget_in_flight(self) -> None:
        """Requests in flight will never be settled (their event loop is gone)."""
        self.in_flight = self.probes = 0

    def pause_for(self, seconds: float, now: float) -> None:
        """Every request waits until ``now + seconds``, at most ``max_pause`` (a longer pause
        already set stands)."""
        until = now + min(max(seconds, 0.0), self.max_pause)
        if until > self.paused_until:
            self.paused_s += until - max(now, self.paused_until)
            self.paused_until = until
