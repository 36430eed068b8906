"""The judge reply registry of a Ray run (``scaleout/registry.py``) without Ray: claims,
published replies, waiters, a dead claimer's claim passing on, failed requests not kept; and
``CachedChat`` of two "workers" sharing one registry asking each request once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from groundscope.client.cache import CachedChat, ResponseCache
from groundscope.errors import ModelError
from groundscope.scaleout.gatekeeper import WorkerGone
from groundscope.scaleout.registry import RemoteReplies, ReplyRegistry
from groundscope.types import Completion, Message, Usage

REPLY = Completion(text="yes", model="judge", finish_reason="stop", usage=Usage(3, 1, 4))
ASK = [Message("user", "Is the claim 'Two wheels are visible.' true of the image?")]


async def started(coro: Any) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    for _ in range(5):
        await asyncio.sleep(0)
    return task


async def test_a_claim_then_a_published_reply_reaches_its_waiters_and_later_askers() -> None:
    reg = ReplyRegistry()
    assert await reg.claim("w0", "verify", "k") is None  # nobody has it: w0 asks
    waiter = await started(reg.claim("w1", "verify", "k"))
    assert not waiter.done()  # w0 is asking: w1 waits for its reply
    await reg.publish("w0", "verify", "k", REPLY)
    assert await asyncio.wait_for(waiter, 5) == REPLY
    assert await reg.claim("w2", "verify", "k") == REPLY
    assert await reg.claim("w2", "claims", "k") is None  # another purpose, another slot
    assert await reg.snapshot() == {"replies": 1, "claims": 1, "sent": 2}


async def test_a_dead_claimers_claim_passes_to_one_waiter() -> None:
    reg = ReplyRegistry()
    assert await reg.claim("w0", "verify", "k") is None
    waiters = [await started(reg.claim(w, "verify", "k")) for w in ("w1", "w2")]
    assert await reg.release_worker("w0") == 1
    await started(asyncio.sleep(0))
    done = [t for t in waiters if t.done()]
    assert [t.result() for t in done] == [None]  # one waiter holds the claim now
    other = next(t for t in waiters if not t.done())
    await reg.publish("w1" if done[0] is waiters[0] else "w2", "verify", "k", REPLY)
    assert await asyncio.wait_for(other, 5) == REPLY
    with pytest.raises(WorkerGone):
        await reg.claim("w0", "verify", "other")


async def test_a_failed_request_is_not_kept_and_its_claim_passes_on() -> None:
    reg = ReplyRegistry()
    assert await reg.claim("w0", "verify", "k") is None
    waiter = await started(reg.claim("w1", "verify", "k"))
    await reg.abandon("w1", "verify", "k")  # not w1's claim: changes nothing
    assert not waiter.done()
    await reg.abandon("w0", "verify", "k")
    assert await asyncio.wait_for(waiter, 5) is None  # w1 asks now
    assert len(reg) == 0


async def test_seeded_replies_are_answered_without_a_claim() -> None:
    reg = ReplyRegistry()
    assert await reg.seed("verify", [("k", REPLY), ("k", REPLY)]) == 1
    assert await reg.claim("w0", "verify", "k") == REPLY
    assert (await reg.snapshot())["sent"] == 0


class Endpoint:
    """A judge endpoint stub: counts requests, answers when ``go`` is set, fails ``fail`` times."""

    def __init__(self, fail: int = 0) -> None:
        self.requests = 0
        self.fail = fail
        self.go = asyncio.Event()

    async def complete(self, messages: Sequence[Message], generation_config: Any = None
                       ) -> Completion:
        self.requests += 1
        await self.go.wait()
        if self.fail:
            self.fail -= 1
            raise ModelError("the endpoint timed out", "timeout")
        return REPLY

    async def aclose(self) -> None:
        return None


def worker_chat(reg: ReplyRegistry, worker: str, endpoint: Endpoint) -> CachedChat:
    """One worker's judge chat, its cache sharing ``reg`` as a Ray worker's does (the actor's
    methods called in process)."""
    actor = SimpleNamespace(**{name: SimpleNamespace(remote=getattr(reg, name))
                               for name in ("claim", "publish", "abandon")})
    cache = ResponseCache(None)
    cache.shared = RemoteReplies(actor, worker, "verify")

    async def connect() -> Any:
        return endpoint

    return CachedChat(cache, model_id="judge", api_url="mock", generation_config={},
                      connect=connect)


async def test_two_workers_ask_one_request_once_and_a_failure_is_asked_again() -> None:
    endpoint = Endpoint(fail=1)
    reg = ReplyRegistry()
    a, b = worker_chat(reg, "w0", endpoint), worker_chat(reg, "w1", endpoint)
    first = await started(a.complete(ASK))
    second = await started(b.complete(ASK))
    assert endpoint.requests == 1  # w1 waits for w0's request
    endpoint.go.set()
    with pytest.raises(ModelError):
        await first  # w0's request failed: not kept, w1 takes the claim and asks
    assert await asyncio.wait_for(second, 5) == REPLY
    assert endpoint.requests == 2 and len(reg) == 1
    assert await a.complete(ASK) == REPLY  # from the registry: no request
    assert endpoint.requests == 2 and (a.hits, a.requests, b.requests) == (1, 1, 1)
    assert a.cache.get(a.key(ASK)) == REPLY

