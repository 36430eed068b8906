"""A provider's rate limits, as the simulator keeps them (``SimBehaviour.rpm`` / ``tpm`` /
``max_in_flight``).

Requests and tokens are token buckets holding a minute's limit, refilled continuously and
full at start, as OpenAI describes its limits. A request is admitted when a request and
its prompt tokens plus the output it reserves (``max_tokens`` / ``max_completion_tokens``)
are left; it is charged one request and its prompt tokens, then its completion tokens when
answered (what its ``usage`` reports). Over a limit, or with ``max_in_flight`` requests in
flight, it is answered 429 ``rate_limit_exceeded`` (``type`` ``requests`` / ``tokens``;
``in_flight`` for the concurrency limit, with no retry hint, as a gateway does). Every reply
of a limited endpoint carries OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,
tokens}`` headers (resets as Go durations, ``1.5s``, ``6m0s``); a 429 for requests or
tokens adds ``retry-after`` (whole seconds, rounded up) and ``retry-after-ms``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's headers write it.

    >>> go_duration(0.644), go_duration(1.5), go_duration(360.0)
    ('644ms', '1.5s', '6m0s')
    """
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60.0)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def reserved(chat: dict[str, Any]) -> int:
    """The output tokens a chat body reserves (``max_completion_tokens`` / ``max_tokens``)."""
    value = chat.get("max_completion_tokens") or chat.get("max_tokens") or 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _Bucket:
    def __init__(self, per_minute: int, now: float) -> None:
        self.limit = per_minute
        self.rate = per_minute / 60.0
        self.level = float(per_minute)
        self.stamp = now

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.limit, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, need: float) -> float:
        return max(0.0, (need - self.level) / self.rate)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 429: what ran out, the message, the headers (retry hints included)."""

    kind: str
    message: str
    headers: dict[str, str]


class ProviderLimits:
    """The limits of one simulated endpoint; times are monotonic seconds given by the caller."""

    def __init__(self, rpm: int | None, tpm: int | None, max_in_flight: int | None,
                 now: float) -> None:
        self.requests = _Bucket(rpm, now) if rpm else None
        self.tokens = _Bucket(tpm, now) if tpm else None
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.peak = 0
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, behaviour: Any, now: float) -> ProviderLimits:
        """The limits a ``SimBehaviour`` names (``rpm``, ``tpm``, ``max_in_flight``)."""
        return cls(behaviour.rpm, behaviour.tpm, behaviour.max_in_flight, now)

    def enter(self, prompt: int, reserve: int, now: float) -> Refusal | None:
        """Admit a request of ``prompt`` tokens reserving ``reserve`` more, or refuse it."""
        with self._lock:
            refusal = self._check(prompt + reserve, now)
            if refusal is not None:
                self.refused[refusal.kind] += 1
                return refusal
            if self.requests is not None:
                self.requests.level -= 1
            if self.tokens is not None:
                self.tokens.level -= prompt
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return None

    def _check(self, need: int, now: float) -> Refusal | None:
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.refill(now)
        if self.max_in_flight is not None and self.in_flight >= self.max_in_flight:
            return Refusal("in_flight", f"Too many concurrent requests (limit "
                           f"{self.max_in_flight}, simulated). Please retry later.",
                           self._headers())
        for kind, bucket, cost in (("requests", self.requests, 1), ("tokens", self.tokens, need)):
            if bucket is None or bucket.level >= cost:
                continue
            if cost > bucket.limit:
                return Refusal(kind, f"Request too large for {kind} per min: Limit "
                               f"{bucket.limit}, Requested {cost} (simulated).", self._headers())
            wait = bucket.wait(cost)
            hints = {"retry-after": str(max(1, math.ceil(wait))),
                     "retry-after-ms": str(max(1, math.ceil(wait * 1000)))}
            used = bucket.limit - max(0, math.floor(bucket.level))
            return Refusal(kind, f"Rate limit reached for {kind} per min: Limit {bucket.limit}, "
                           f"Used {used}, Requested {cost}. Please try again in "
                           f"{go_duration(wait)} (simulated).", {**self._headers(), **hints})
        return None

    def leave(self, completion: int) -> None:
        """A request admitted by :meth:`enter` ended, answered with ``completion`` tokens."""
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)
            if self.tokens is not None:
                self.tokens.level -= completion

    def headers(self, now: float) -> dict[str, str]:
        """The ``x-ratelimit-*`` headers of a reply now."""
        with self._lock:
            for bucket in (self.requests, self.tokens):
                if bucket is not None:
                    bucket.refill(now)
            return self._headers()

    def _headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for kind, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            out[f"x-ratelimit-limit-{kind}"] = str(bucket.limit)
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(bucket.level)))
            out[f"x-ratelimit-reset-{kind}"] = go_duration(bucket.wait(bucket.limit))
        return out

    def stats(self) -> dict[str, Any]:
        """For ``/_sim/stats``: 429s by what ran out, and the peak of requests in flight."""
        with self._lock:
            return {"rate_limited": dict(self.refused), "peak_in_flight": self.peak}
