"""A process-wide budget of decoded pixel bytes, shared by every image decode.

An image just under the pixel cap (89.3 Mpx) takes 89-357 MB once decoded, so a handful
decoded at once (the conversion threads, the report's thumbnails) can take gigabytes. A
decode holds its cost (:func:`pixel_bytes`) of :data:`DECODE_BUDGET` while its full-size
pixels exist: it waits while the others' costs and its own would pass the limit, in
arrival order (a large image is not starved by small ones); one image larger than the
whole budget decodes alone.

Pixels freed must also leave the process: glibc keeps a freed block of Pillow's default
16 MiB in the thread's arena (its mmap threshold rises to 32 MiB at most), so each decode
thread kept the largest image it had decoded (six 89.3 Mpx PNGs: 1.2 GB with the budget).
A decode sets Pillow's block size to :data:`PILLOW_BLOCK` (64 MiB, always mmap'ed, given
back on free); an image smaller than that is one block of its own size, as before.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PILLOW_BLOCK = 64 * 1024 * 1024
DEFAULT_LIMIT = 384 * 1024 * 1024  # one 89.3 Mpx RGB(A) image (357 MB), or many photos

# bytes per pixel Pillow stores a mode in ("RGB", "LA", "YCbCr", ... take 4)
_BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2,
                    "BGR;15": 2, "BGR;16": 2, "BGR;24": 3}


def mode_bytes(mode: str) -> int:
    """Bytes per pixel of an image of ``mode`` in Pillow's memory (16-bit grey: 2, twice
    8-bit's; every multi-band, 32-bit int and float mode: 4)."""
    return _BYTES_PER_PIXEL.get(mode, 4)


def pixel_bytes(img: Any, *modes: str) -> int:
    """Bytes of ``img``'s pixels decoded at its (draft) size in its mode, plus one full-size
    copy in each of ``modes`` (a conversion the decode makes)."""
    width, height = img.size
    return width * height * sum(mode_bytes(m) for m in (img.mode, *modes))


def _large_blocks() -> None:
    from PIL import Image  # lazy: only decoding needs Pillow

    if Image.core.get_block_size() < PILLOW_BLOCK:
        Image.core.set_block_size(PILLOW_BLOCK)


class DecodeBudget:
    """Bytes of decoded pixels that may exist at once; see the module doc."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0  # the most held at once (the budget's own accounting)
        self.holds: list[int] = []  # costs granted, most recent last (at most 64 kept)
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()

    @contextmanager
    def hold(self, cost: int) -> Iterator[None]:
        """Hold ``cost`` bytes of the budget for the body (waits for room, in turn)."""
        cost = max(0, cost)
        _large_blocks()
        me = object()
        with self._cond:
            self._waiting.append(me)
            try:
                while self._waiting[0] is not me or (self.used and self.used + cost > self.limit):
                    self._cond.wait()
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()
            self.used += cost
            self.peak = max(self.peak, self.used)
            self.holds = [*self.holds[-63:], cost]
        try:
            yield
        finally:
            with self._cond:
                self.used -= cost
                self._cond.notify_all()


DECODE_BUDGET = DecodeBudget()
