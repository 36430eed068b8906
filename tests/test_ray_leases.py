"""A Ray worker's gate (``LeasedGate``) over an endpoint's ``GateKeeper``, without Ray: leases
come and go in batches, not one actor call per request, and the limit still holds across
workers, a 429 still lowers it for all."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from groundscope.client.gate import Outcome, RateGate
from groundscope.scaleout.gatekeeper import GateKeeper, LeasedGate, RemoteGate
from test_rate_limits import FakeClock


class _Method:
    def __init__(self, actor: Actor, fn: Any) -> None:
        self.actor, self.fn = actor, fn

    async def remote(self, *args: Any) -> Any:
        self.actor.calls += 1
        await asyncio.sleep(0.001)  # a call takes about a millisecond, as on Ray here
        return await self.fn(*args)


class Actor:
    """A GateKeeper called as a Ray actor handle is (``handle.method.remote(...)``); counts
    the calls."""

    def __init__(self, keeper: GateKeeper) -> None:
        self.calls = 0
        for name in ("acquire", "release", "admit_batch", "release_batch", "gate_stats"):
            setattr(self, name, _Method(self, getattr(keeper, name)))


async def _requests(gate: LeasedGate, n: int, held: list[int], peak: list[int],
                    status: int = 200) -> None:
    async def one(i: int) -> None:
        lease = await gate.acquire(10)
        held[0] += 1
        peak[0] = max(peak[0], held[0])
        await asyncio.sleep(random.random() / 500)  # the request
        held[0] -= 1
        await gate.release(lease, Outcome(status if i == 0 else 200, {}))

    await asyncio.gather(*(one(i) for i in range(n)))


async def test_two_workers_keep_one_limit_with_far_fewer_actor_calls_than_requests() -> None:
    random.seed(3)
    keeper = GateKeeper(8)
    actor = Actor(keeper)
    gates = [LeasedGate(actor, w, 8) for w in ("w0", "w1")]
    held, peak = [0], [0]
    await asyncio.gather(*(_requests(g, 300, held, peak) for g in gates))
    for gate in gates:
        await gate.aclose()
    assert peak[0] == 8 and keeper.peak <= 8  # reached, never passed, across both workers
    assert keeper.stats.in_flight == 0 and not keeper._leases  # every lease came back
    assert actor.calls < 600 / 20, actor.calls  # was two per request (acquire, release)


async def test_a_429_in_one_worker_lowers_the_limit_for_the_other() -> None:
    keeper = GateKeeper(10)
    actor = Actor(keeper)
    w0, w1 = LeasedGate(actor, "w0", 10), LeasedGate(actor, "w1", 10)
    held, peak = [0], [0]
    await _requests(w0, 10, held, peak, status=429)
    await w0.aclose()
    assert keeper.stats.rate_limited == 1 and keeper.stats.limit < 10
    cut = keeper.stats.limit
    peak[0] = 0
    # twice the cut limit's requests: AIMD grows the limit back by at most one meanwhile
    # (more requests would let it grow back further, as it should)
    await _requests(w1, 2 * cut, held, peak)
    await w1.aclose()
    assert peak[0] <= cut + 1 < 10  # the cut limit, not w1's own ten


@pytest.mark.parametrize("headers", [
    {"llm_provider-retry-after": "2"},  # LiteLLM passes the provider's retry hints on
    {"llm_provider-retry-after-ms": "2000"},  # only prefixed (the simulator's gateway modes)
    {"llm_provider-x-ratelimit-remaining-requests": "0",  # a control: these always crossed
     "llm_provider-x-ratelimit-reset-requests": "2s"}])
async def test_a_gateway_prefixed_pause_hint_pauses_every_worker_as_it_pauses_a_local_run(
        headers: dict[str, str]) -> None:
    local = RateGate(10)
    await local.release(await local.acquire(10), Outcome(429, headers))
    keeper = GateKeeper(10)
    actor = Actor(keeper)
    leased, remote = LeasedGate(actor, "w0", 10), RemoteGate(actor, "w1", 10)
    held = [(gate, await gate.acquire(10)) for gate in (leased, remote)]  # before any pause
    for gate, lease in held:  # a worker that leases in batches, and one that does not
        await gate.release(lease, Outcome(429, headers))
    await leased.aclose()
    assert local.stats.paused_s > 1.5  # the local run's pause: the oracle
    # the workers' 429s paused the shared gate as long (the second only extends it)
    assert keeper.stats.paused_s == pytest.approx(local.stats.paused_s, abs=0.5)


async def _sent_before_blocked(gate: Any, headers: dict[str, str], n: int = 40) -> int:
    """Requests sent one after another through ``gate``, each answered at once with a 200
    carrying ``headers``, until the gate holds one back (1 s of waiting) or ``n`` went."""
    sent = 0

    async def one_by_one() -> None:
        nonlocal sent
        for _ in range(n):
            lease = await gate.acquire(10)
            sent += 1
            await gate.release(lease, Outcome(200, headers))

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(one_by_one(), timeout=1.0)
    return sent


async def test_a_request_limit_a_reply_names_paces_a_ray_worker_as_it_paces_a_local_run() -> None:
    # every reply names the endpoint's request limit (OpenAI's x-ratelimit-limit-requests:
    # 60 a minute); with the clock stopped no request budget comes back, so a gate lets
    # through the burst the learned limit allows and then holds the next request back. A
    # worker kept reusing its slot for such 200s, never passing the limit on: 40 of 40 went
    # where a local run sends 2 (found by an outside attack, 2026-12-06)
    headers = {"x-ratelimit-limit-requests": "60"}
    stopped = lambda: 1000.0  # noqa: E731  (the clock, stopped)
    local = await _sent_before_blocked(RateGate(10, clock=stopped), headers)
    keeper = GateKeeper(10, clock=stopped)
    worker = LeasedGate(Actor(keeper), "w0", 10)
    leased = await _sent_before_blocked(worker, headers)
    await worker.aclose()
    assert local < 40  # the oracle does hold requests back
    assert leased <= local + 2, (leased, local)  # + the leases a worker may hold ahead of need


async def test_a_worker_reports_every_answer_while_the_shared_gate_learns_a_rate() -> None:
    # a 429 without a hint, its request alone in flight, opens a measurement of the
    # endpoint's rate from the answers that follow (client/adaptive.py, LearnedRate); a
    # worker kept reusing its slots meanwhile, and the answers on them never reached the
    # measurement: it counted 2 where a local run counts 20, and learned a tenth of the
    # rate (found by an outside attack, 2026-12-06)
    async def answer_after_a_lone_429(gate: Any) -> None:
        await gate.release(await gate.acquire(10), Outcome(429, {}))
        for _ in range(20):
            await gate.release(await gate.acquire(10), Outcome(200, {}))

    clock = FakeClock()
    local = RateGate(3, clock=clock, sleep=clock.sleep)
    await answer_after_a_lone_429(local)
    assert local.limiter.learned.answered == 20  # the oracle
    clock = FakeClock()
    keeper = GateKeeper(3, clock=clock, sleep=clock.sleep)
    worker = LeasedGate(Actor(keeper), "w0", 3)  # (a limit of 3: no slot held ahead of need)
    await answer_after_a_lone_429(worker)
    await worker.aclose()  # what it has not handed back yet
    assert keeper.gate.limiter.learned.answered == 20
