"""A Ray worker's gate (``LeasedGate``) over an endpoint's ``GateKeeper``, without Ray: leases
come and go in batches, not one actor call per request, and the limit still holds across
workers, a 429 still lowers it for all."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from groundscope.client.gate import Outcome, RateGate
from groundscope.scaleout.gatekeeper import GateKeeper, LeasedGate, RemoteGate


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


async def test_a_gateway_prefixed_retry_after_pauses_every_worker_as_it_pauses_a_local_run() -> None:
    # LiteLLM passes the provider's own headers on with a prefix; behind some providers the
    # only pause hint a 429 carries is the prefixed one (the simulator's gateway modes)
    for headers in ({"llm_provider-retry-after": "2"}, {"llm_provider-retry-after-ms": "2000"},
                    {"llm_provider-x-ratelimit-remaining-requests": "0",
                     "llm_provider-x-ratelimit-reset-requests": "2s"}):
        local = RateGate(10)
        await local.release(await local.acquire(10), Outcome(429, headers))
        keeper = GateKeeper(10)
        actor = Actor(keeper)
        leased, remote = LeasedGate(actor, "w0", 10), RemoteGate(actor, "w1", 10)
        held = [(gate, await gate.acquire(10)) for gate in (leased, remote)]  # before any pause
        for gate, lease in held:  # a worker that leases in batches, and one that does not
            await gate.release(lease, Outcome(429, headers))
        await leased.aclose()
        assert local.stats.paused_s > 1.5, headers  # the local run's pause: the oracle
        # the workers' 429s paused the shared gate as long (the second only extends it)
        assert keeper.stats.paused_s == pytest.approx(local.stats.paused_s, abs=0.5), headers
