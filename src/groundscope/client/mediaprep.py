"""Media made acceptable to the endpoint before a request is built: off the loop, once each.

:func:`prepare_messages` replaces every medium the media settings in force change
(``media.prepare_ref``: a video by its frames, a downscaled image, wav audio) in the
messages of one request; every request goes through it (``ChatClient.complete``), so the
model and every judge step see the same frames. Conversions run in a thread pool, all the
media of a request at once, with the context of the caller (the media roots, the pixel cap
and the settings are context variables). Each is done once per content identity and
settings (``media.prepare_key``): a request that needs a conversion already running waits
for it, and finished ones are kept in a small LRU (:data:`PREPARED`, bounded in bytes), so
the repeats of a sample and its judge calls never decode it again.

The runner calls :func:`prefetch` when a sample is read, so its video is decoded while it
waits for a model slot (100 clips, 200 ms latency: 83% -> 88% of the rate of the same
frames sent as images; ``benchmarks/bench_video_frames.py``).

Threads, not processes: decoding (PyAV) and JPEG encoding (Pillow) release the GIL, a
thread shares the caller's context (media roots, pixel cap) and returns frames without
pickling. Measured (100 clips of 3 s, 8 frames each, 2 workers, the shared 2-core machine):
one thread 7.6 ms per clip, thread pool 6.3 ms, process pool 5.1 ms; the process pool's
gain is smaller than one request's latency, and it would need the roots and settings sent
to each worker and ~100 MB of FFmpeg per process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence

from groundscope import media
from groundscope.types import MediaPart, MediaRef, Message

DEFAULT_LIMIT = 64 * 1024 * 1024  # bytes of prepared media kept (~100 clips of 8 frames)


class PreparedMedia:
    """Finished conversions (an LRU bounded in bytes) and the ones running, by key."""

    def __init__(self, limit: int = DEFAULT_LIMIT, workers: int | None = None) -> None:
        self.limit = limit
        self.workers = workers or min(4, os.cpu_count() or 1)
        self._done: OrderedDict[str, tuple[MediaRef, ...]] = OrderedDict()
        self._running: dict[str, concurrent.futures.Future[tuple[MediaRef, ...]]] = {}
        self._size = 0
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.conversions: Counter[str] = Counter()  # conversions run, by the medium's kind

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.workers, thread_name_prefix="groundscope-media")
        return self._pool

    def future(self, ref: MediaRef) -> concurrent.futures.Future[tuple[MediaRef, ...]]:
        """The conversion of ``ref``: finished, running, or started now."""
        key = media.prepare_key(ref)
        with self._lock:
            done = self._done.get(key)
            if done is not None:
                self._done.move_to_end(key)
                fut: concurrent.futures.Future[tuple[MediaRef, ...]] = concurrent.futures.Future()
                fut.set_result(done)
                return fut
            running = self._running.get(key)
            if running is not None:
                return running
            self.conversions[str(ref.kind)] += 1
            ctx = contextvars.copy_context()
            fut = self._executor().submit(ctx.run, media.prepare_ref, ref)
            self._running[key] = fut
        fut.add_done_callback(lambda f: self._finish(key, f))
        return fut

    def _finish(self, key: str, fut: concurrent.futures.Future[tuple[MediaRef, ...]]) -> None:
        with self._lock:
            self._running.pop(key, None)
            if fut.cancelled() or fut.exception() is not None:
                return  # a failure is not kept: the next request tries again
            refs = fut.result()
            size = media.prepared_size(refs)
            if size > self.limit // 4:
                return
            self._done[key] = refs
            self._size += size
            while self._size > self.limit and self._done:
                _, dropped = self._done.popitem(last=False)
                self._size -= media.prepared_size(dropped)

    def clear(self) -> None:
        """Forget every finished conversion and the counts."""
        with self._lock:
            self._done.clear()
            self._size = 0
            self.conversions.clear()


PREPARED = PreparedMedia()


def prefetch(messages: Sequence[Message]) -> None:
    """Start the conversions ``messages`` will need, without waiting for them: a sample
    waiting for a model slot has its video decoded meanwhile (the runner calls this)."""
    settings = media.media_settings()
    if settings.active:
        for msg in messages:
            for ref in msg.media():
                if media.needs_preparing(ref, settings):
                    PREPARED.future(ref)


def _shared(fut: concurrent.futures.Future[tuple[MediaRef, ...]]) -> asyncio.Future[tuple[MediaRef, ...]]:
    """Await a conversion others may wait for too: a cancelled waiter does not cancel it."""
    return asyncio.shield(asyncio.wrap_future(fut))


async def prepare_messages(messages: Sequence[Message]) -> Sequence[Message]:
    """``messages`` with every medium the settings in force change replaced (see the module
    doc); the same object when none is. A conversion's ``MediaError`` is raised."""
    settings = media.media_settings()
    if not settings.active:
        return messages
    wanted = {id(p): PREPARED.future(p.media) for m in messages if not isinstance(m.content, str)
              for p in m.content if isinstance(p, MediaPart)
              and media.needs_preparing(p.media, settings)}
    if not wanted:
        return messages
    done = dict(zip(wanted, await asyncio.gather(*(_shared(f) for f in wanted.values())),
                    strict=True))
    out: list[Message] = []
    for msg in messages:
        if isinstance(msg.content, str):
            out.append(msg)
            continue
        parts = tuple(q for p in msg.content
                      for q in ([MediaPart(r) for r in done[id(p)]] if id(p) in done else [p]))
        out.append(Message(msg.role, parts, msg.name, msg.tool_call_id, msg.tool_calls))
    return out
