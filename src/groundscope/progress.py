"""Progress of a run: a bar with rate and ETA on a terminal, plain log lines otherwise."""

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

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

