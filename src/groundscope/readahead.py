"""An iterator read ahead in a thread, so that what producing an item costs (reading a
record, checking its media: a file's header parsed by Pillow) is done while the event loop
waits on requests in flight, not serially before them.

:func:`read_ahead` runs the source in one daemon thread with the caller's context (media
roots, pixel cap, settings are context variables), at most ``size`` items ahead; items come
out in order, and an exception of the source is raised where the next item was wanted.
Closing the returned iterator (or dropping it) stops the thread at its next item.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_S = 0.5  # how often a thread blocked on a full queue looks for a stop


def read_ahead(source: Iterator[T], size: int, *, name: str = "groundscope-read-ahead") -> Iterator[T]:
    """The items of ``source``, produced in a thread at most ``size`` ahead (see the module doc)."""
    box: queue.Queue[object] = queue.Queue(maxsize=max(1, size))
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in source:
                if not put((item,)):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=contextvars.copy_context().run, args=(work,), name=name,
                              daemon=True)
    thread.start()
    try:
        while True:
            got = box.get()
            if got is _DONE:
                return
            if isinstance(got, BaseException):
                raise got
            yield got[0]  # type: ignore[index]
    finally:
        stop.set()
