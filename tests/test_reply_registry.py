"""The judge reply registry of a Ray run (``scaleout/registry.py``) without Ray: claims,
published replies, waiters, a dead claimer's claim passing on, failed requests not kept; and
``CachedChat`` of two "workers" sharing one registry asking each request once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from groundscope.client.cache import CachedChat, ResponseCache
from groundscope.errors import ModelError
from groundscope.scaleout.gatekeeper import WorkerGone
from groundscope.scaleout.registry import RemoteReplies, ReplyRegistry, WorkerReplies
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


class Actor:
    """A ReplyRegistry called as a Ray actor handle is (``handle.method.remote(...)``),
    each call taking ``delay`` seconds (about a millisecond on Ray here); counts the calls
    by method."""

    def __init__(self, reg: ReplyRegistry, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: Counter[str] = Counter()
        for name in ("claim", "claim_batch", "settle"):
            setattr(self, name, SimpleNamespace(remote=self._counted(name, getattr(reg, name))))

    def _counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any) -> Any:
            self.calls[name] += 1
            if self.delay:
                await asyncio.sleep(self.delay)
            return await method(*args)
        return call


def worker_chat(reg: ReplyRegistry | Actor, worker: str, endpoint: Endpoint) -> CachedChat:
    """One worker's judge chat, its cache sharing ``reg`` as a Ray worker's does (the actor's
    methods called in process)."""
    actor = reg if isinstance(reg, Actor) else Actor(reg)
    cache = ResponseCache(None)
    cache.shared = WorkerReplies(actor, worker).of("verify")

    async def connect() -> Any:
        return endpoint

    return CachedChat(cache, model_id="judge", api_url="mock", generation_config={},
                      connect=connect)


async def settled(chat: CachedChat) -> None:
    """Wait for what the worker of ``chat`` is handing back to the registry."""
    shared = chat.cache.shared
    assert isinstance(shared, RemoteReplies)
    await shared.replies.aclose()


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
    await settled(b)  # its reply handed back to the registry (within SETTLE_S)
    assert endpoint.requests == 2 and len(reg) == 1
    assert await a.complete(ASK) == REPLY  # from the registry: no request
    assert endpoint.requests == 2 and (a.hits, a.requests, b.requests) == (1, 1, 1)
    assert a.cache.get(a.key(ASK)) == REPLY



async def test_many_judge_requests_make_few_registry_calls_and_each_is_asked_once() -> None:
    """A worker's claims go in batches and its replies back in batches: not two actor calls
    per judge request (one actor serialised every judge request of a Ray run)."""
    endpoint = Endpoint()
    endpoint.go.set()
    reg = ReplyRegistry()
    actor = Actor(reg, delay=0.001)
    chats = [worker_chat(actor, w, endpoint) for w in ("w0", "w1")]
    asks = [[Message("user", f"Is claim {i} true of the image?")] for i in range(150)]
    # each worker asks 100: 50 of them asked by both (each sent once in the run)
    replies = await asyncio.gather(*(chat.complete(ask) for chat, part in
                                     zip(chats, (asks[:100], asks[50:]), strict=True)
                                     for ask in part))
    for chat in chats:
        await settled(chat)
    assert replies == [REPLY] * 200
    assert endpoint.requests == 150 and len(reg) == 150 and not reg._claims
    # was 2 per request (claim, publish): 400. Now a few batches, and one waiting claim for
    # each request the other worker was asking at that moment
    assert actor.calls["claim_batch"] + actor.calls["settle"] <= 10, actor.calls
    assert actor.calls["claim"] <= 50, actor.calls
    assert sum(chat.requests for chat in chats) == 150 and sum(c.hits for c in chats) == 50


async def test_a_claim_granted_to_a_cancelled_asker_passes_on() -> None:
    """An asker cancelled while its claim was in a batch call: the claim it was granted is
    handed on, so the other worker asks instead of waiting for ever."""
    endpoint = Endpoint()
    reg = ReplyRegistry()
    actor = Actor(reg, delay=0.001)
    w0, w1 = WorkerReplies(actor, "w0"), WorkerReplies(actor, "w1")
    asking = asyncio.ensure_future(w0.claim(("verify", "k")))
    await asyncio.sleep(0)  # its batch call is out
    asking.cancel()
    await asyncio.sleep(0.05)
    assert asking.cancelled()
    assert await asyncio.wait_for(w1.claim(("verify", "k")), 5) is None  # w1 holds it now
    assert reg._claims[("verify", "k")][0] == "w1" and endpoint.requests == 0


async def test_a_claim_handed_on_goes_before_the_same_workers_next_claim() -> None:
    """w0's request failed (its claim handed on) and another of w0's samples asks the same
    request at once: one of them asks, the other waits. When the hand-on waited for the
    next batch of replies, w0 was granted the slot it still held, asked again, and then the
    hand-on let w1 ask too, both at once (seen as a judge request billed twice)."""
    reg = ReplyRegistry()
    actor = Actor(reg, delay=0.001)
    w0, w1 = WorkerReplies(actor, "w0"), WorkerReplies(actor, "w1")
    slot = ("verify", "k")
    assert await w0.claim(slot) is None  # w0 asks
    waiting = await started(w1.claim(slot))
    await asyncio.sleep(0.01)
    w0.abandon(slot)  # its request failed
    assert await w0.claim(slot) is None  # w0's next sample asks again
    await asyncio.sleep(0.1)  # longer than SETTLE_S: nothing else is handed on meanwhile
    assert not waiting.done()  # w1 waits for w0's second request, it does not send its own
    w0.publish(slot, REPLY)
    assert await asyncio.wait_for(waiting, 5) == REPLY
    await w0.aclose()
    assert reg.sent == 2 and len(reg) == 1
