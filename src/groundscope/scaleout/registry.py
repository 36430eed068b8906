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
:class:`WorkerReplies` is a worker's side of that actor, with no call per request: the claims
made meanwhile go in one call (:meth:`ReplyRegistry.claim_batch`), published replies and
abandoned claims in one background call (:meth:`ReplyRegistry.settle`); only a claim another
worker holds waits on a call of its own. :class:`RemoteReplies` is its ``client/cache.py``
``SharedReplies`` of one purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from groundscope.scaleout.gatekeeper import WorkerGone
from groundscope.types import Completion

Slot = tuple[str, str]  # (purpose, cache key)
Claimed = Completion | bool  # a slot's claim: its reply, True (the claim is yours), False (wait)

log = logging.getLogger("groundscope")
# A worker hands back its replies at most once per SETTLE_S (one call for all, where there
# was one per judge request): a worker waiting for one of them waits that much longer,
# nothing else does. An abandoned claim goes at once, and before any later claim of the
# same worker (else that worker could be granted the slot it still held and send the
# request again while the waiter it was handed to sends it too).
SETTLE_S = 0.05


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

    async def claim_batch(self, worker: str, slots: list[Slot],
                          abandoned: list[Slot] | None = None) -> list[Claimed]:
        """:meth:`claim` of many slots, none waiting: for each, its reply, True when
        ``worker`` now holds its claim, or False when another worker holds it (then
        :meth:`claim` waits for that worker's reply). ``abandoned``: claims ``worker``
        hands on first (its failed requests, :meth:`abandon`)."""
        for slot in abandoned or ():
            self._end(slot, worker)
        if worker in self._dead:
            raise WorkerGone(worker)
        out: list[Claimed] = []
        for slot in slots:
            reply = self._replies.get(slot)
            if reply is None and slot not in self._claims:
                self._claims[slot] = (worker, asyncio.Event())
                self.sent += 1
            out.append(reply if reply is not None else self._claims[slot][0] == worker)
        return out

    async def settle(self, worker: str, published: list[tuple[str, str, Completion]],
                     abandoned: list[Slot]) -> None:
        """:meth:`publish` and :meth:`abandon` of many slots."""
        for purpose, key, completion in published:
            await self.publish(worker, purpose, key, completion)
        for slot in abandoned:
            self._end(slot, worker)

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


class WorkerReplies:
    """One worker's side of a :class:`ReplyRegistry` actor, for every purpose (see the module
    docstring). Claims made while a claim call is out go in the next one; replies and
    abandoned claims go back by one background task, one call for all that came meanwhile
    (an abandoned claim at once, or in the next claim call). ``calls`` counts the actor
    calls (one by one, they were 2 per judge request)."""

    def __init__(self, actor: Any, worker: str) -> None:
        self.actor = actor
        self.worker = worker
        self.calls = 0
        self._claims: list[tuple[Slot, asyncio.Future[Claimed]]] = []
        self._published: list[tuple[str, str, Completion]] = []
        self._abandoned: list[Slot] = []
        self._claiming: asyncio.Task[None] | None = None
        self._settling: asyncio.Task[None] | None = None
        self._urgent: asyncio.Event | None = None  # set: an abandoned claim waits to go

    def of(self, purpose: str) -> RemoteReplies:
        return RemoteReplies(self, purpose)

    async def claim(self, slot: Slot) -> Completion | None:
        """The reply, waiting while another worker asks for it; None: this worker now holds
        the claim (it publishes the reply or abandons the claim)."""
        got: asyncio.Future[Claimed] = asyncio.get_running_loop().create_future()
        self._claims.append((slot, got))
        if self._claiming is None or self._claiming.done():
            self._claiming = asyncio.create_task(self._claim_loop())
        try:
            claimed = await got
        except asyncio.CancelledError:  # a claim granted before or after is handed on
            if got.done() and not got.cancelled() and got.exception() is None \
                    and got.result() is True:
                self.abandon(slot)
            raise
        if claimed is True:
            return None
        if claimed is not False:
            return claimed
        self.calls += 1  # another worker is asking: wait for its reply (or its claim)
        try:
            reply: Completion | None = await self.actor.claim.remote(self.worker, *slot)
        except asyncio.CancelledError:  # the claim may be ours: hand it on
            self.abandon(slot)
            raise
        return reply

    def publish(self, slot: Slot, completion: Completion) -> None:
        self._published.append((*slot, completion))
        self._settle()

    def abandon(self, slot: Slot) -> None:
        self._abandoned.append(slot)
        self._settle()
        self._wake().set()

    def _wake(self) -> asyncio.Event:
        if self._urgent is None:
            self._urgent = asyncio.Event()
        return self._urgent

    async def _claim_loop(self) -> None:
        while self._claims:
            batch, self._claims = self._claims, []
            abandoned, self._abandoned = self._abandoned, []  # handed on before these
            self.calls += 1
            try:
                claimed = await self.actor.claim_batch.remote(
                    self.worker, [slot for slot, _ in batch], abandoned)
            except Exception as exc:  # the worker is gone for the registry, or the registry
                for _, got in batch:
                    if not got.done():
                        got.set_exception(exc)
                continue
            for (slot, got), one in zip(batch, claimed, strict=True):
                if not got.done():
                    got.set_result(one)
                elif one is True:  # its asker was cancelled: the claim passes on
                    self.abandon(slot)

    def _settle(self) -> None:
        if self._settling is None or self._settling.done():
            self._settling = asyncio.create_task(self._settle_loop())

    async def _settle_loop(self) -> None:
        urgent = self._wake()
        while self._published or self._abandoned:
            if not self._abandoned:  # replies only: what comes meanwhile goes in one call
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(urgent.wait(), SETTLE_S)
            urgent.clear()
            published, self._published = self._published, []
            abandoned, self._abandoned = self._abandoned, []
            self.calls += 1
            try:
                await self.actor.settle.remote(self.worker, published, abandoned)
            except Exception as exc:  # the registry is gone: the run is ending
                log.debug("worker %s: judge replies not shared (%s)", self.worker, exc)
                return

    async def aclose(self) -> None:
        """Wait for the replies and abandoned claims being handed back."""
        if self._settling is not None:
            await asyncio.gather(self._settling, return_exceptions=True)


class RemoteReplies:
    """One worker's ``SharedReplies`` of one purpose: its :class:`WorkerReplies`."""

    def __init__(self, replies: WorkerReplies, purpose: str) -> None:
        self.replies = replies
        self.purpose = purpose

    async def claim(self, key: str) -> Completion | None:
        return await self.replies.claim((self.purpose, key))

    async def publish(self, key: str, completion: Completion) -> None:
        self.replies.publish((self.purpose, key), completion)

    async def abandon(self, key: str) -> None:
        self.replies.abandon((self.purpose, key))
