"""Progress of a run: a bar with rate and ETA on a terminal, plain log lines otherwise.

Next to the count, the caller's ``status()`` text (the runner's live view: the running
primary score, requests in flight against the endpoint's limit, retries and 429s so far,
tokens and cost so far) is shown as the bar's postfix, or at the end of each plain line.
It is asked for at most every ``POSTFIX_EVERY_S`` seconds on a terminal, and once per plain
line (every ``PLAIN_EVERY`` samples, or when ``PLAIN_INTERVAL_S`` seconds passed since the
last line),
so a fast run pays nothing per sample for it.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("groundscope")

POSTFIX_EVERY_S = 0.5
PLAIN_EVERY = 500  # samples between plain lines ...
PLAIN_INTERVAL_S = 30.0  # ... or seconds, whichever comes first


def _duration(seconds: float) -> str:
    """``42s``, ``12m05s``, ``3h07m``.

    >>> _duration(42.4), _duration(725), _duration(11220)
    ('42s', '12m05s', '3h07m')
    """
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Counts finished samples; ``bar=True`` shows a tqdm bar on stderr.

    ``total`` (when known) gives the bar and the lines a ``done/total`` and an ETA;
    ``status`` returns the live view's text; ``clock`` is for tests.
    """

    def __init__(self, bar: bool, status: Callable[[], str] | None = None, *,
                 total: int | None = None, every: int | None = None,
                 interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bar = bar
        self.done = 0
        self.total = total
        self._status = status
        self._every = max(1, PLAIN_EVERY if every is None else every)
        self._interval = PLAIN_INTERVAL_S if interval_s is None else interval_s
        self._clock = clock
        self._start = self._last = clock()
        self._bar: Any = None

    def open(self) -> None:
        self._start = self._last = self._clock()
        if self.bar:
            from tqdm import tqdm

            self._bar = tqdm(desc="Evaluating", unit="sample", dynamic_ncols=True, total=self.total,
                             mininterval=0.25, file=sys.stderr)

    def advance(self, errored: int) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
            if self._status is not None:
                now = self._clock()
                if now - self._last >= POSTFIX_EVERY_S:
                    self._last = now
                    self._bar.set_postfix_str(self._status(), refresh=False)
            return
        if self.done % self._every == 0:
            self._line(errored, self._clock())
            return
        now = self._clock()
        if now - self._last >= self._interval:
            self._line(errored, now)

    def _line(self, errored: int, now: float) -> None:
        """One plain line: done (of total), errored, elapsed, rate, ETA, the live view."""
        self._last = now
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        done = f"{self.done}/{self.total}" if self.total else str(self.done)
        text = f"{done} samples done ({errored} errored), {_duration(elapsed)}, {rate:.3g}/s"
        if self.total and self.done < self.total and rate > 0:
            text += f", ETA {_duration((self.total - self.done) / rate)}"
        if self._status is not None:
            text += f" | {self._status()}"
        log.info("%s", text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
