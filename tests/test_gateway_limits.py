"""Rate limits through gateways (issue 22, section 1): the client against the simulator in each
gateway style (simulator/gateway.py): LiteLLM's prefixed hints, a limit without a reset,
headers only on 429s (a stale ``remaining: 0``), and 429s with no hint at all.

As in test_rate_limits.py, the gate and the simulator share a fake clock moved by sleeps, so
no test measures wall time.
"""

from __future__ import annotations

import asyncio

import pytest

from groundscope.client.chat import ChatClient
from groundscope.client.gate import RateGate
from groundscope.client.ratelimit import RateHeaders, RateLimiter
from groundscope.client.retry import RetryPolicy
from groundscope.config import load_config
from groundscope.errors import ConfigError, RetryableError
from groundscope.simulator import SimBehaviour, SimulatorServer
from test_rate_limits import NO_WAIT, FakeClock, ask


class TickClock:
    """Monotonic time that moves 0.05 s at every reading (and by sleeps)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.05
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)
        self.now += seconds


def _sim(clock: FakeClock, **behaviour: object) -> SimulatorServer:
    sim = SimulatorServer(behaviour=SimBehaviour(**behaviour))  # type: ignore[arg-type]
    sim.clock = clock
    sim.reset()  # its limits now start at the fake clock
    return sim


async def _run(client: ChatClient, n: int, first: int = 0) -> None:
    async with client:
        replies = await asyncio.gather(*(client.complete(ask(i)) for i in range(first, first + n)))
    assert len(replies) == n


def test_litellm_prefixed_hints_are_read() -> None:
    h = RateHeaders.read({"llm_provider-retry-after-ms": "1500",
                          "llm_provider-x-ratelimit-limit-requests": "60",
                          "llm_provider-x-ratelimit-remaining-requests": "0",
                          "llm_provider-x-ratelimit-reset-requests": "20s"}, 0.0)
    assert (h.retry_after, h.limit_requests, h.remaining_requests, h.reset_requests) == (
        1.5, 60, 0, 20.0)
    assert RateHeaders.read({"llm_provider-retry-after": "7"}, 0.0).retry_after == 7.0


def test_remaining_zero_with_a_limit_and_no_reset_pauses_one_refill() -> None:
    h = RateHeaders.read({"x-ratelimit-limit-requests": "6",
                          "x-ratelimit-remaining-requests": "0"}, 0.0)
    assert h.pause(rate_limited=False) == pytest.approx(10.0)  # 60 s / 6
    assert h.pause(rate_limited=True) == pytest.approx(10.0)


def test_a_remaining_count_expires_at_its_reset_or_after_a_second() -> None:
    lim = RateLimiter(8)
    lim.settle(lim.admit(1, 0.0), 429, RateHeaders(remaining_requests=0), None, 0.0)
    lim.settle(lim.admit(1, 0.0), 200, RateHeaders(), None, 0.0)
    busy = lim.admit(1, 0.0)
    assert lim.wait(1, 0.5) is None  # none left while one is in flight...
    assert lim.wait(1, 1.0) == 0  # ...until the count, with no reset given, is stale
    lim.settle(busy, 200, RateHeaders(remaining_requests=0, reset_requests=5.0), None, 1.0)
    assert lim.wait(1, 5.9) != 0 and lim.allowance == 0  # paused; the count stands
    assert lim.wait(1, 6.0) == 0 and lim.allowance is None  # its reset: forgotten


async def test_litellm_style_hints_pause_the_client() -> None:
    clock = FakeClock()
    sim = _sim(clock, rpm=6, gateway="litellm")
    async with sim:
        client = ChatClient(sim.base_url, "m", retry=NO_WAIT,
                            gate=RateGate(8, clock=clock, sleep=clock.sleep))
        await _run(client, 10)
        seen = [r["status"] for r in sim.requests()]
    refused = seen.count(429)
    assert 1 <= refused <= 2 and seen.count(200) == 10  # paused, no retry storm
    assert client.gate.stats.paused_s >= 10.0 - 1e-6


async def test_limit_without_reset_pauses_before_the_429() -> None:
    clock = FakeClock()
    sim = _sim(clock, rpm=6, gateway="limit_only")
    async with sim:
        client = ChatClient(sim.base_url, "m", retry=NO_WAIT,
                            gate=RateGate(1, clock=clock, sleep=clock.sleep))
        await _run(client, 9)
    assert sim.stats()["by_status"] == {"200": 9}  # never refused: 10 s paused each time
    assert 10.0 in clock.sleeps


async def test_a_stale_remaining_zero_from_a_429_does_not_serialise_the_run() -> None:
    """Headers only on 429s, saying remaining 0: after a 429, requests go one at a time
    only until the count is stale, not to the end of the run."""
    clock = TickClock()
    sim = SimulatorServer(behaviour=SimBehaviour(max_in_flight=4, latency_ms=30,
                                                 gateway="on_429"))
    async with sim:
        client = ChatClient(sim.base_url, "m", retry=NO_WAIT, concurrency=8,
                            gate=RateGate(8, clock=clock, sleep=clock.sleep))
        async with client:
            await asyncio.gather(*(client.complete(ask(i)) for i in range(8)))
            assert sim.stats()["by_status"].get("429", 0) >= 1  # the count was said: 0
            sim.reset()
            await asyncio.gather(*(client.complete(ask(i)) for i in range(8, 40)))
    assert sim.stats()["peak_in_flight"] >= 3  # not one at a time


async def test_hintless_429s_are_retried_within_the_time_budget() -> None:
    behaviour = {"rate_429": 1.0, "max_faults_per_key": 8, "gateway": "hintless"}
    sim = SimulatorServer(behaviour=SimBehaviour(**behaviour))  # type: ignore[arg-type]
    retry = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0, jitter=0.0,
                        rate_limit_budget=60.0)
    async with sim:
        client = ChatClient(sim.base_url, "m", retry=retry)
        async with client:
            assert (await client.complete(ask(0))).text
        assert sim.stats()["by_status"] == {"429": 8, "200": 1}
        assert all("retry-after" not in {k.lower() for k in r["headers"]} for r in sim.requests())
        sim.reset()
        client = ChatClient(sim.base_url, "m", retry=retry)
        now = [0.0]

        def ticking() -> float:  # 10 s pass between two looks: the budget ends at 60 s
            now[0] += 10.0
            return now[0]

        client.clock = ticking
        async with client:
            with pytest.raises(RetryableError) as err:
                await client.complete(ask(1))
    assert err.value.status == 429 and 3 <= err.value.attempts < 8


def test_rate_limit_budget_is_a_bounded_setting() -> None:
    from groundscope.cliargs import build_parser, eval_config

    base = {"model": "m", "api_url": "http://127.0.0.1:9/v1", "datasets": ["general_vqa"]}
    assert load_config(base).rate_limit_budget == 300.0
    assert load_config({**base, "rate_limit_budget": 60}).rate_limit_budget == 60.0
    with pytest.raises(ConfigError, match="rate_limit_budget"):
        load_config({**base, "rate_limit_budget": -1})
    ns = build_parser().parse_args(["eval", "--datasets", "general_vqa", "--model", "m",
                                    "--rate-limit-budget", "90"])
    assert eval_config(ns)["rate_limit_budget"] == 90.0


async def test_a_limit_named_only_on_429s_is_learned_as_the_rate() -> None:
    """Headers only on 429s: the limit a 429 names (``x-ratelimit-limit-requests``) paces
    the client as ``--rpm`` would, so the 429 is not met again on every request."""
    clock = FakeClock()
    sim = _sim(clock, rpm=6, gateway="on_429")
    async with sim:
        client = ChatClient(sim.base_url, "m", retry=NO_WAIT,
                            gate=RateGate(8, clock=clock, sleep=clock.sleep))
        await _run(client, 16)
        seen = [r["status"] for r in sim.requests()]
    assert seen.count(200) == 16 and seen.count(429) <= 2
