"""The judge replies of a Ray run, shared by every worker, so the run asks each distinct
judge request once, as a local run does (``client/cache.py``: ``CachedChat``).

:class:`ReplyRegistry` holds, by purpose and cache key, the replies received so far and
the claims of requests being asked. A worker's cache miss asks it: the reply if someone
has it; else, when another worker is asking, it waits for that reply; else it gets the
claim, asks the endpoint and publishes the reply (every waiter gets it). A failed request
is not kept (as in a local run): its claim is abandoned and passes to a waiter, which asks
again; so do the claims of a worker that died (:meth:`ReplyRegistry.release_worker`, called
by the driver). The driver runs one as a named Ray actor, seeded on resume with the run's
cache files; it is plain asyncio (no Ray import), tested without Ray. It holds what the
run's cache files hold (``Completion`` values: text and counts, no media).
:class:`RemoteReplies` is a worker's side: the ``client/cache.py`` ``SharedReplies`` of one
purpose over that actor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from groundscope.scaleout.gatekeeper import WorkerGone
from groundscope.types import Completion

Slot = tuple[str, str]  # (purpose, cache key)


class ReplyRegistry:
    """Replies by (purpose, key) and who is asking for the ones not received yet."""

    def __init__(self) -> None:
        self._replies: dict[Slot, Completion] = {}
        self._claims: dict[Slot, tuple[str, asyncio.Event]] = {}  # slot -> (worker, ended)
        self._dead: set[str] = set()
        self.sent = 0  # claims handed out: requests sent by the workers

    def __len__(self) -> int:
        return len(self._replies)

    async def seed(self, purpose: str, rows: Iterable[tuple[str, Completion]]) -> int:
        """Keep replies the run already has (its cache file on resume); how many."""
        before = len(self._replies)
        for key, completion in rows:
            self._replies.setdefault((purpose, key), completion)
        return len(self._replies) - before

    async def claim(self, worker: str, purpose: str, key: str) -> Completion | None:
        """The reply, waiting while another worker asks for it; None: ``worker`` now holds
        the claim (it publishes the reply or abandons the claim)."""
        slot = (purpose, key)
        while True:
            if worker in self._dead:
                raise WorkerGone(worker)
            reply = self._replies.get(slot)
            if reply is not None:
                return reply
            held = self._claims.get(slot)
            if held is None:
                self._claims[slot] = (worker, asyncio.Event())
                self.sent += 1
                return None
            await held[1].wait()  # published, abandoned or its worker died: look again

    async def publish(self, worker: str, purpose: str, key: str, completion: Completion) -> None:
        """Keep a reply; whoever waits for it gets it."""
        slot = (purpose, key)
        self._replies.setdefault(slot, completion)
        self._end(slot, None)

    async def abandon(self, worker: str, purpose: str, key: str) -> None:
        """``worker``'s request failed: its claim passes to a waiter (nothing is kept)."""
        self._end((purpose, key), worker)

    async def release_worker(self, worker: str) -> int:
        """``worker`` died: its claims pass to waiters, its later claims fail; how many."""
        self._dead.add(worker)
        mine = [slot for slot, (owner, _) in self._claims.items() if owner == worker]
        for slot in mine:
            self._end(slot, worker)
        return len(mine)

    def _end(self, slot: Slot, owner: str | None) -> None:
        held = self._claims.get(slot)
        if held is not None and (owner is None or held[0] == owner):
            del self._claims[slot]
            held[1].set()

    async def snapshot(self) -> dict[str, Any]:
        """Counters for the driver and tests: replies kept, claims out, requests sent."""
        return {"replies": len(self._replies), "claims": len(self._claims), "sent": self.sent}


class RemoteReplies:
    """One worker's ``SharedReplies`` of one purpose over a :class:`ReplyRegistry` actor."""

    def __init__(self, actor: Any, worker: str, purpose: str) -> None:
        self.actor = actor
        self.worker = worker
        self.purpose = purpose

    async def claim(self, key: str) -> Completion | None:
        ref = self.actor.claim.remote(self.worker, self.purpose, key)
        try:
            reply: Completion | None = await ref
        except asyncio.CancelledError:  # the claim may be ours: hand it on (best effort)
            self.actor.abandon.remote(self.worker, self.purpose, key)
            raise
        return reply

    async def publish(self, key: str, completion: Completion) -> None:
        await self.actor.publish.remote(self.worker, self.purpose, key, completion)

    async def abandon(self, key: str) -> None:
        await self.actor.abandon.remote(self.worker, self.purpose, key)
