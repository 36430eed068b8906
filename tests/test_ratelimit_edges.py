"""The pure rate limiter's bounds and counts at their edges (client/ratelimit.py), driven
by hand-set clocks. Cases found by mutation testing (mutmut): each fails with its mutant
applied (a bound moved by one, a header ignored, a count reset instead of summed)."""

from __future__ import annotations

import email.utils
import math

import pytest

from groundscope.client.ratelimit import (
    MAX_HEADER_CHARS,
    AdaptiveLimit,
    RateHeaders,
    RateLimiter,
    TokenBucket,
    parse_count,
    parse_duration,
    retry_after,
)

NO_HEADERS = RateHeaders()


def test_a_header_value_is_read_up_to_its_length_bound() -> None:
    at_bound = "0" * (MAX_HEADER_CHARS - 2) + "1s"
    assert parse_duration(at_bound) == 1.0
    assert parse_duration("0" + at_bound) is None  # one character over: ignored


def test_a_count_is_read_up_to_its_bound() -> None:
    assert parse_count(str(10**12)) == 10**12
    assert parse_count(str(10**12 + 1)) is None


def test_a_retry_after_date_in_the_past_is_no_wait() -> None:
    wall = 1_700_000_000.0
    assert retry_after({"retry-after": email.utils.formatdate(wall - 30, usegmt=True)},
                       wall) == 0.0


def test_exhausted_tokens_pause_until_a_minutes_share_returns() -> None:
    headers = {"x-ratelimit-limit-tokens": "600", "x-ratelimit-remaining-tokens": "0",
               "x-ratelimit-reset-tokens": "30s"}
    read = RateHeaders.read(headers, 0.0)
    assert (read.limit_tokens, read.remaining_tokens) == (600, 0)
    assert read.pause(rate_limited=False) == pytest.approx(0.1)  # 60 s / 600, not the reset


@pytest.mark.parametrize("per_minute", [0.0, -1.0, math.inf, math.nan])
def test_a_bucket_needs_a_positive_finite_rate(per_minute: float) -> None:
    with pytest.raises(ValueError, match="positive number"):
        TokenBucket(per_minute)


def test_a_bucket_holds_burst_seconds_worth() -> None:
    bucket = TokenBucket(600, burst_s=2.0)  # 10 a second: 20 at once
    for _ in range(20):
        assert bucket.wait(1, 0.0) == 0
        bucket.take(1, 0.0)
    assert bucket.wait(1, 0.0) == pytest.approx(0.1)
    assert (bucket.charge(0.0), bucket.charge(-5.0)) == (0.0, 0.0)


def test_the_in_flight_limit_never_grows_past_its_ceiling() -> None:
    limit = AdaptiveLimit(2)
    limit.rate_limited(limit.epoch)
    assert limit.limit == 1
    for _ in range(50):
        limit.succeeded()
    assert limit.limit == 2


def test_late_429s_of_one_burst_cut_once_per_epoch() -> None:
    limit = AdaptiveLimit(10)
    limit.rate_limited(0)  # 10 -> 7, epoch 1
    limit.rate_limited(0)  # sent before that cut: no second cut
    limit.rate_limited(1)  # 7 -> 4, epoch 2
    limit.rate_limited(1)  # sent before the second cut
    assert (limit.limit, limit.epoch) == (4, 2)


def test_growth_below_a_too_many_mark_is_not_slowed() -> None:
    limit = AdaptiveLimit(10)
    limit.rate_limited(0, in_flight=9)  # 7, and 9 in flight were too many
    for _ in range(7):  # +1 after `limit` successes: 8 is below the mark, no probing pace
        limit.succeeded(in_flight=1)
    assert limit.limit == 8


def test_pauses_add_up_and_max_pause_zero_never_pauses() -> None:
    limiter = RateLimiter(4)
    limiter.pause_for(5.0, 0.0)
    limiter.pause_for(10.0, 0.0)  # extends the first: 5 more seconds
    assert (limiter.paused_until, limiter.paused_s) == (10.0, 10.0)
    off = RateLimiter(4, max_pause=0.0)
    off.pause_for(5.0, 0.0)
    assert off.wait(1, 0.0) == 0


def test_after_a_pause_one_request_goes_first() -> None:
    limiter = RateLimiter(8)
    ticket = limiter.admit(1, 0.0)
    limiter.settle(ticket, 429, RateHeaders(retry_after=1.0), None, 0.0)
    assert limiter.wait(1, 0.5) == pytest.approx(0.5)
    limiter.admit(1, 1.0)
    assert limiter.wait(1, 1.0) is None  # probing: one at a time until one is answered


def test_after_a_hintless_cut_only_an_answer_sent_since_ends_probing() -> None:
    """Answers to requests sent before a hint-less 429 say nothing of the endpoint now: they
    must not send the whole cut limit at once into a request bucket that may be empty."""
    limiter = RateLimiter(8)
    before = [limiter.admit(1, 0.0) for _ in range(8)]
    limiter.settle(before[-1], 429, NO_HEADERS, None, 0.0)  # 8 in flight: the limit is 5
    assert limiter.concurrency.limit == 5
    for ticket in before[:2]:
        limiter.settle(ticket, 200, NO_HEADERS, None, 0.1)
    assert limiter.wait(1, 0.1) is None  # 5 in flight: the cut limit
    limiter.settle(before[2], 200, NO_HEADERS, None, 0.1)
    assert limiter.wait(1, 0.1) == 0  # 4 in flight: the probe goes
    probe = limiter.admit(1, 0.1)
    for ticket in before[3:7]:  # every request sent before the 429 answered
        limiter.settle(ticket, 200, NO_HEADERS, None, 0.2)
        assert limiter.wait(1, 0.2) is None  # still the probe alone
    limiter.settle(probe, 200, NO_HEADERS, None, 0.3)
    assert limiter.concurrency.limit == 6  # 8 answers at 5: grown by one
    for _ in range(6):  # the probe went through: the whole limit
        assert limiter.wait(1, 0.3) == 0
        limiter.admit(1, 0.3)
    assert limiter.wait(1, 0.3) is None


def test_a_429_of_a_request_overlapped_by_a_later_one_is_no_request_rate() -> None:
    """An endpoint may refuse whichever of two overlapping requests it decides first: a
    request that went alone but was overlapped by one sent after it says "two is too many",
    not "a request rate is spent" (no learned-rate measurement, no pause), and the answer
    to the one sent after it, with the other refused meanwhile, does not clear that mark."""
    limiter = RateLimiter(8)
    first = limiter.admit(1, 0.0)  # alone when it went
    second = limiter.admit(1, 0.0)
    limiter.settle(first, 429, NO_HEADERS, None, 0.1)
    assert not limiter.learned.measuring and limiter.paused_s == 0.0
    assert limiter.concurrency.limit == 1 and limiter.concurrency.too_many == 2
    limiter.settle(second, 200, NO_HEADERS, None, 0.1)
    assert limiter.concurrency.too_many == 2  # one of its two was refused: not cleared
    assert limiter.concurrency.limit == 1  # grows back towards two at the probe's pace
    alone = limiter.admit(1, 0.2)  # and truly alone, refused: a request rate
    limiter.settle(alone, 429, NO_HEADERS, None, 0.3)
    assert limiter.learned.measuring


def test_the_remaining_requests_told_are_spent_one_by_one_and_expire_at_their_reset() -> None:
    limiter = RateLimiter(8)
    first, second = limiter.admit(1, 0.0), limiter.admit(1, 0.0)
    told = RateHeaders(remaining_requests=3, reset_requests=3.0)
    limiter.settle(first, 200, told, None, 0.0)  # 3 left less the one sent after it: 2
    limiter.admit(1, 0.0)
    assert limiter.wait(1, 0.0) == 0  # one left
    limiter.admit(1, 0.0)
    assert limiter.wait(1, 0.0) is None  # none left while requests are in flight
    assert limiter.wait(1, 1.5) is None  # believed until its reset (3 s), not 1 s
    assert limiter.wait(1, 3.5) == 0  # the count expired at its reset
    del second


def test_a_retuned_bucket_paces_at_its_new_rate_with_its_new_burst() -> None:
    """``retune`` (a limit a header names, a learned rate) sets rate and burst as the
    constructor does: 120 a minute with a 2 s burst is 4 at once, then one every 0.5 s."""
    from groundscope.client.adaptive import TokenBucket

    bucket = TokenBucket(600, burst_s=2.0)
    bucket.retune(120)
    bucket.level = bucket.capacity  # full at the new burst
    for _ in range(4):
        assert bucket.wait(1, 0.0) == 0
        bucket.take(1, 0.0)
    assert bucket.wait(1, 0.0) == pytest.approx(0.5)
    assert bucket.wait(1, 0.25) == pytest.approx(0.25)
    bucket.retune(0.5)  # below one a minute: one a minute, a burst of one
    assert (bucket.per_minute, bucket.capacity) == (1.0, 1.0)
    bucket.level = 0.0
    assert bucket.wait(1, 0.25) == pytest.approx(60.0)


def test_a_learned_rate_is_the_measured_answer_rate_then_cut_and_grown_exactly() -> None:
    """LearnedRate's arithmetic, step by step on a hand clock (each figure is one the
    README and the rate-limit benchmark rely on)."""
    from groundscope.client.adaptive import LearnedRate

    learned = LearnedRate()
    learned.rate_limited(now=10.0, seq=5, admitted=6)  # the first: a measurement opens
    assert learned.measuring and learned.bucket is None
    learned.succeeded(seq=5)  # sent before it (the refused one too): the burst, not counted
    learned.succeeded(seq=6)  # the first sent since: counted
    learned.succeeded(seq=7)
    learned.rate_limited(now=11.0, seq=8, admitted=9)  # 1 s in: too early to tell
    assert learned.bucket is None
    learned.rate_limited(now=12.0, seq=9, admitted=10)  # exactly MEASURE_S later, 2 answers
    bucket = learned.bucket
    assert bucket is not None and not learned.measuring
    assert bucket.per_minute == pytest.approx(2 / 2.0 * 60 * 0.9)  # 60 a minute, less 10%
    assert bucket.level == 0.0  # the measurement spent what the endpoint had
    learned.rate_limited(now=12.5, seq=9, admitted=11)  # sent before the change: no cut
    assert bucket.per_minute == pytest.approx(54.0)
    learned.rate_limited(now=13.0, seq=10, admitted=11)  # the first sent since, at no more
    assert bucket.per_minute == pytest.approx(54.0)  # than learned: checked before a cut
    assert learned.armed == 13.0 and bucket.level == 1.0  # the next request goes at once
    learned.check_sent(seq=11, now=13.01)
    learned.rate_limited(now=13.02, seq=11, admitted=12)  # the check refused: cut by 10%
    assert bucket.per_minute == pytest.approx(54.0 * 0.9)
    assert learned.checks == [0, 1] and learned.changed_at == 12
    learned.succeeded(seq=12)  # an answer: + GROWTH (a minute's answers: + GROWTH x rate)
    assert bucket.per_minute == pytest.approx(54.0 * 0.9 + 0.1)
