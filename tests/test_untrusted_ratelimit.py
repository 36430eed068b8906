"""Hostile rate-limit headers (tests/untrusted/ratelimit/headers.json): every value is
parsed within bounds, never raises, and never pauses an endpoint longer than MAX_PAUSE_S."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from api_support import Scripted
from groundscope.client.chat import ChatClient
from groundscope.client.gate import Outcome, RateGate
from groundscope.client.http_errors import http_error, parse_retry_after
from groundscope.client.ratelimit import MAX_PAUSE_S, RateHeaders, parse_count, parse_duration
from groundscope.client.retry import RetryPolicy
from groundscope.types import Message
from test_rate_limits import CHAT_OK, RATE_429, FakeClock

CASES = json.loads((Path(__file__).parent / "untrusted" / "ratelimit" / "headers.json")
                   .read_text(encoding="utf-8"))


@pytest.mark.parametrize("value", CASES["values"])
def test_hostile_values_parse_to_bounded_numbers_or_nothing(value: str) -> None:
    for seconds in (parse_duration(value), parse_retry_after(value, now=0.0)):
        assert seconds is None or (math.isfinite(seconds) and seconds >= 0)
    count = parse_count(value)
    assert count is None or 0 <= count <= 10**12
    for name in CASES["names"]:
        for limited in (True, False):
            pause = RateHeaders.read({name: value, "x-ratelimit-remaining-requests": "0",
                                      "x-ratelimit-remaining-tokens": "0"}, 0.0).pause(limited)
            assert 0.0 <= pause <= MAX_PAUSE_S


@pytest.mark.parametrize("value", ["nan", "1e999", "-5", "9" * 400])
def test_retry_after_of_a_429_is_finite_and_not_negative(value: str) -> None:
    err = http_error(429, b"{}", value)
    assert err.retry_after is None  # type: ignore[attr-defined]


async def test_a_gate_fed_every_hostile_header_keeps_working() -> None:
    clock = FakeClock()
    gate = RateGate(4, clock=clock, sleep=clock.sleep)
    for value in CASES["values"]:
        lease = await gate.acquire(10)
        await gate.release(lease, Outcome(429, {n: value for n in CASES["names"]}))
    assert gate.stats.paused_s <= len(CASES["values"]) * MAX_PAUSE_S
    assert all(0 <= s <= MAX_PAUSE_S for s in clock.sleeps)
    assert gate.stats.limit >= 1


async def test_a_huge_retry_after_from_a_server_is_capped() -> None:
    clock = FakeClock()
    with Scripted([(429, RATE_429, {"retry-after": "99999999", "retry-after-ms": "-1"}),
                   (200, CHAT_OK, {})]) as url:
        gate = RateGate(4, clock=clock, sleep=clock.sleep)
        client = ChatClient(url, "m", gate=gate,
                            retry=RetryPolicy(max_retries=2, base_delay=0, max_delay=0))
        async with client:
            await asyncio.wait_for(client.complete([Message("user", "hi")]), 30)
    assert clock.now - 1000.0 == MAX_PAUSE_S


@pytest.mark.parametrize("content", [
    b"not json", b"[1, 2]", b'{"model": {"rate_limited": -1}}', b'{"model": {"paused_s": 1e999}}',
    b'{"model": {"retries": "many"}}', b" " * (2 << 20),
    b"{" + b",".join(b'"e%d": {}' % i for i in range(100)) + b"}",  # over 64 endpoints
])
def test_a_hostile_rate_limits_file_is_ignored(tmp_path: Path, content: bytes,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from groundscope.summary import RATE_LIMITS_FILE, read_rate_limits

    (tmp_path / RATE_LIMITS_FILE).write_bytes(content)
    with caplog.at_level("WARNING", logger="groundscope"):
        assert read_rate_limits(tmp_path) == {}
    assert "rate_limits.json: ignored" in caplog.text


def test_a_symlinked_rate_limits_file_is_not_followed(tmp_path: Path) -> None:
    from groundscope.summary import RATE_LIMITS_FILE, read_rate_limits

    target = tmp_path / "elsewhere.json"
    target.write_text('{"model": {"rate_limited": 3}}')
    (tmp_path / RATE_LIMITS_FILE).symlink_to(target)
    assert read_rate_limits(tmp_path) == {}
