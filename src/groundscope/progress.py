"""Progress of a run: a bar with rate and ETA on a terminal, plain log lines otherwise.

It also keeps the process's resident memory flat on long runs (see ``release_free_memory``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger("groundscope")


class Progress:
    """Counts finished samples; ``bar=True`` shows a tqdm bar on stderr."""

    def __init__(self, bar: bool) -> None:
        self.bar = bar
        self.done = 0
        self._bar: Any = None

    def open(self) -> None:
        if self.bar:
            from tqdm import tqdm

            self._bar = tqdm(desc="Evaluating", unit="sample", dynamic_ncols=True,
                             mininterval=0.25, file=sys.stderr)

    def advance(self, errored: int) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
        elif self.done % 500 == 0:
            log.info("%d samples done (%d errored)", self.done, errored)
        if self.done % 1000 == 0:
            release_free_memory()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


_MALLOC_TRIM: Any = None


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc only; elsewhere a no-op).

    Every request allocates and frees a base64 payload of its medium's size; glibc's
    allocator then keeps a growing, fragmented heap (measured: +35 MB over 20,000 samples of
    100 KB images). Trimming every 1,000 samples keeps the resident size flat.
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)
