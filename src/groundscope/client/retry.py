"""Retry policy for model requests: exponential backoff with full jitter, Retry-After, budget.

Only :class:`~groundscope.errors.RetryableError` is retried (429, 408, 5xx, timeouts, dropped
connections, malformed bodies). Anything else, including ``ResponseError`` and
``MediaError``, propagates at once. When the budget is spent the last error is re-raised,
with ``error.attempts`` set to the number of attempts made. A 429 (a rate limit: a spent
quota is a ``ResponseError`` and never gets here) is retried past ``max_retries`` for as
long as ``rate_limit_budget`` seconds from the first attempt allow: a gateway that answers
429 with no hint of when is waited out, not given up after a few quick tries.

The sleep function and the random source are injectable so tests are fast and exact::

    >>> policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=10.0, jitter=0.0)
    >>> [policy.delay(n) for n in (1, 2, 3, 4, 5)]
    [1.0, 2.0, 4.0, 8.0, 10.0]
    >>> policy.delay(1, retry_after=3.0)
    3.0
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from groundscope.defaults import DEFAULT_MAX_RETRIES, DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY
from groundscope.errors import ModelError, RetryableError

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[object]]
RandomSource = Callable[[], float]
OnRetry = Callable[[int, RetryableError, float], object]
"""``on_retry(attempt, error, delay)``: called after failed attempt ``attempt`` (1-based),
before sleeping ``delay`` seconds."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failed request is retried.

    ``max_retries`` is the number of retries after the first attempt (so at most
    ``max_retries + 1`` attempts). The backoff before retry ``n`` is
    ``min(max_delay, base_delay * 2 ** (n - 1))``; ``jitter`` in [0, 1] is the share of it
    that is randomised (1.0 = "full jitter": uniform in [0, backoff]; 0.0 = none). A
    server's ``Retry-After`` is a floor under the jittered delay; the result is capped at
    ``max_delay`` so a server asking for an hour cannot stall a run.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    base_delay: float = DEFAULT_RETRY_BASE_DELAY
    max_delay: float = DEFAULT_RETRY_MAX_DELAY
    jitter: float = 1.0
    rate_limit_budget: float = 0.0  # seconds a rate-limited (429) request is retried for

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.base_delay < 0 or self.max_delay < 0 or self.rate_limit_budget < 0:
            raise ValueError("base_delay, max_delay and rate_limit_budget must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be in [0, 1]")

    def delay(
        self,
        attempt: int,
        retry_after: float | None = None,
        rand: RandomSource = random.random,
    ) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next one."""
        exponent = min(max(attempt - 1, 0), 62)  # 2**62 is already far beyond any cap
        backoff = min(self.max_delay, self.base_delay * (2.0**exponent))
        wait = backoff * (1.0 - self.jitter * rand()) if self.jitter else backoff
        if retry_after is not None and retry_after > wait:
            wait = retry_after
        return min(max(wait, 0.0), self.max_delay)


NO_RETRY = RetryPolicy(max_retries=0)


async def call_with_retry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: OnRetry | None = None,
    sleep: Sleep = asyncio.sleep,
    rand: RandomSource = random.random,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, int]:
    """Await ``fn()`` until it succeeds or the budget is spent; return ``(result, attempts)``.

    Only ``RetryableError`` is retried. After ``policy.max_retries`` retries the last error
    is re-raised with its ``attempts`` attribute set, unless it is a 429 and the next try
    would still start within ``policy.rate_limit_budget`` seconds (by ``clock``) of the
    first. Errors of other types propagate immediately (their ``attempts`` is set too when
    they are ``ModelError``s).
    """
    attempt = 1
    started = clock()
    while True:
        try:
            return await fn(), attempt
        except RetryableError as err:
            wait = policy.delay(attempt, err.retry_after, rand)
            if attempt > policy.max_retries and not (
                    err.status == 429 and clock() + wait - started < policy.rate_limit_budget):
                err.attempts = attempt
                raise
            if on_retry is not None:
                on_retry(attempt, err, wait)
            await sleep(wait)
            attempt += 1
        except ModelError as err:
            err.attempts = attempt
            raise
