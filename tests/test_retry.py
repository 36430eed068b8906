"""RetryPolicy backoff and call_with_retry, with an injected sleep and random source."""

from __future__ import annotations

import pytest

from groundscope.client.retry import NO_RETRY, RetryPolicy, call_with_retry
from groundscope.errors import MediaError, ModelError, ResponseError, RetryableError


class Recorder:
    """A fake ``asyncio.sleep`` that records the requested delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def failing(errors: list[Exception], result: str = "ok"):
    """An async callable raising ``errors`` in turn, then returning ``result``."""
    calls = {"n": 0}

    async def fn() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return result

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


def test_delay_doubles_without_jitter_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=9, base_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_full_jitter_spans_zero_to_backoff() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=100.0, jitter=1.0)
    assert policy.delay(3, rand=lambda: 0.0) == 4.0
    assert policy.delay(3, rand=lambda: 0.75) == pytest.approx(1.0)
    assert policy.delay(3, rand=lambda: 0.999999) == pytest.approx(0.0, abs=1e-4)


def test_partial_jitter_keeps_a_floor() -> None:
    policy = RetryPolicy(base_delay=2.0, max_delay=100.0, jitter=0.5)
    assert policy.delay(1, rand=lambda: 0.999999) == pytest.approx(1.0, abs=1e-4)


def test_retry_after_is_a_floor_and_the_cap_still_applies() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=5.0, jitter=1.0)
    assert policy.delay(1, retry_after=2.0, rand=lambda: 0.5) == 2.0
    assert policy.delay(1, retry_after=0.0, rand=lambda: 0.0) == pytest.approx(0.1)
    assert policy.delay(1, retry_after=3600.0) == 5.0


def test_huge_attempt_numbers_do_not_overflow() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=7.0, jitter=0.0)
    assert policy.delay(10_000) == 7.0


@pytest.mark.parametrize(
    "kwargs", [{"max_retries": -1}, {"jitter": 1.5}, {"jitter": -0.1}, {"base_delay": -1.0},
               {"max_delay": -1.0}, {"rate_limit_budget": -1.0}]  # each bound alone (mutmut)
)
def test_policy_rejects_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


async def test_retries_until_success_and_counts_attempts() -> None:
    sleep = Recorder()
    seen: list[tuple[int, str, float]] = []
    fn = failing(
        [RetryableError("busy", kind="http_429", retry_after=2.0), RetryableError("boom", kind="http_500")]
    )
    policy = RetryPolicy(max_retries=3, base_delay=0.25, max_delay=10.0, jitter=1.0)
    result, attempts = await call_with_retry(
        fn,
        policy,
        on_retry=lambda a, e, d: seen.append((a, e.kind, d)),
        sleep=sleep,
        rand=lambda: 0.5,
    )
    assert (result, attempts) == ("ok", 3)
    assert sleep.delays == [2.0, 0.25]  # Retry-After floor, then 0.5 * 0.5 jittered
    assert seen == [(1, "http_429", 2.0), (2, "http_500", 0.25)]


async def test_budget_exhausted_reraises_the_last_error() -> None:
    sleep = Recorder()
    errors = [RetryableError(f"fail {i}", kind="timeout") for i in range(5)]
    last = errors[2]
    fn = failing(errors)
    with pytest.raises(RetryableError) as info:
        await call_with_retry(fn, RetryPolicy(max_retries=2, base_delay=0.0), sleep=sleep)
    assert info.value is last
    assert info.value.attempts == 3
    assert fn.calls["n"] == 3  # type: ignore[attr-defined]
    assert len(sleep.delays) == 2


@pytest.mark.parametrize("error", [ResponseError("bad", kind="http_400"), MediaError("gone")])
async def test_non_retryable_errors_propagate_at_once(error: Exception) -> None:
    sleep = Recorder()
    fn = failing([error])
    with pytest.raises(type(error)):
        await call_with_retry(fn, RetryPolicy(max_retries=5), sleep=sleep)
    assert fn.calls["n"] == 1  # type: ignore[attr-defined]
    assert sleep.delays == []
    if isinstance(error, ModelError):
        assert error.attempts == 1


async def test_error_after_retries_reports_total_attempts() -> None:
    fn = failing([RetryableError("a"), ResponseError("context", kind="context_length")])
    with pytest.raises(ResponseError) as info:
        await call_with_retry(fn, RetryPolicy(max_retries=5), sleep=Recorder())
    assert info.value.attempts == 2


async def test_unexpected_exceptions_are_not_retried() -> None:
    fn = failing([ValueError("bug")])
    with pytest.raises(ValueError):
        await call_with_retry(fn, RetryPolicy(max_retries=5), sleep=Recorder())
    assert fn.calls["n"] == 1  # type: ignore[attr-defined]


async def test_no_retry_policy_makes_one_attempt() -> None:
    fn = failing([RetryableError("x")])
    with pytest.raises(RetryableError) as info:
        await call_with_retry(fn, NO_RETRY, sleep=Recorder())
    assert info.value.attempts == 1
    result, attempts = await call_with_retry(failing([]), NO_RETRY, sleep=Recorder())
    assert (result, attempts) == ("ok", 1)
