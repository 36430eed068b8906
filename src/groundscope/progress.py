"""Progress of a run: a bar with rate and ETA on a terminal, plain log lines otherwise.

Next to the count, the caller's ``status()`` text (the runner's live view: the running
primary score, requests in flight against the endpoint's limit, retries and 429s so far,
tokens and cost so far) is shown as the bar's postfix, or at the end of each plain line.
It is asked for at most every ``POSTFIX_EVERY_S`` seconds on a terminal, and once per plain
line (every ``PLAIN_EVERY`` samples, or when ``PLAIN_INTERVAL_S`` seconds passed since the
last line),
so a fast run pays nothing per sample for it. A last plain line is written at the end.
The bar's postfix starts with the errored count (redrawn at once when it grows); at
``NARROW_COLUMNS`` or fewer the bar comes last, after done/total, share, ETA and the
postfix, so a narrow terminal cuts the bar rather than the figures. Log lines pass through
``tqdm.write`` (``logs.ConsoleHandler``): each on its own line, the bar redrawn below.

The total (``Expected``) is known before the first record is read: the runner counts each
subset's records without parsing them (``plan.planned_records``: parquet's footer, JSONL's
lines, TSV / CSV rows from the bytes), ``limit`` applied, times ``repeats``; it is corrected
as the records are read and exact when the stream ends, so done == total at the end of a
finished run (a resumed run's reused samples count as done).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("groundscope")

POSTFIX_EVERY_S = 0.5
NARROW_COLUMNS = 120  # at most this wide, the figures come first and the bar last
# figures first: done/total, share, ETA, then the postfix (errored first), the bar if room is left
NARROW_FORMAT = "{desc} {n_fmt}/{total_fmt} {percentage:3.0f}% ETA {remaining}{postfix} |{bar}|"
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


def _stderr_columns() -> int:
    """The width of the terminal the bar is drawn on (stderr's; else $COLUMNS or 80)."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):  # not a terminal, or no file descriptor
        return shutil.get_terminal_size().columns


class Expected:
    """The total of a run's samples, told before its records are read and corrected as
    they are: ``records`` (the planned records, limit applied) x ``repeats``. A bad record
    or a dropped sample lowers it by ``repeats``; a record that gives several samples
    (paraphrases) raises it, and the records not read yet are expected to give as many on
    average. It never falls below the samples already handed out, and :meth:`finish` (the
    stream ended) makes it exact. ``records=None``: no total until then.

    >>> e = Expected(4, repeats=2)
    >>> e.sample(new_record=True); e.bad(); e.total  # 1 kept, 1 bad, 2 records to come
    6
    >>> e.sample(new_record=True); e.sample(new_record=False); e.total  # 1.5 samples a record
    10
    >>> e.finish(); e.total
    6
    """

    def __init__(self, records: int | None, repeats: int = 1) -> None:
        self.records = records
        self.repeats = repeats
        self.read = 0  # records read (bad ones too)
        self.bad_records = 0
        self.samples = 0  # samples kept
        self.extra = 0  # samples beyond their record's first
        self.done = False

    def bad(self) -> None:
        self.read += 1
        self.bad_records += 1

    def sample(self, *, new_record: bool, kept: bool = True) -> None:
        """A sample was read: the first of its record or another (a paraphrase); ``kept``
        False: dropped (a duplicate id)."""
        if new_record:
            self.read += 1
        else:
            self.extra += 1
        self.samples += kept

    def finish(self) -> None:
        self.done = True

    @property
    def total(self) -> int | None:
        if self.done:
            return self.samples * self.repeats
        if self.records is None:
            return None
        left = max(0, self.records - self.read)
        good = self.read - self.bad_records
        per_record = 1.0 + self.extra / good if good else 1.0
        return (self.samples + round(left * per_record)) * self.repeats


class Progress:
    """Counts finished samples; ``bar=True`` shows a tqdm bar on stderr.

    ``total`` (when known; or ``expected``, a total corrected as the run reads its records)
    gives the bar and the lines a ``done/total`` and an ETA; ``status`` returns the live
    view's text; ``clock`` is for tests. ``close`` writes a last plain line.
    """

    def __init__(self, bar: bool, status: Callable[[], str] | None = None, *,
                 total: int | None = None, every: int | None = None,
                 interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 columns: int | None = None) -> None:
        self.bar = bar
        self.columns = columns  # the terminal's width (None: asked when the bar opens)
        self.done = 0
        self.expected = Expected(total)
        self._errored = 0
        self._shown = 0  # done at the last plain line
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

            columns = self.columns or _stderr_columns()
            narrow = {"bar_format": NARROW_FORMAT} if columns <= NARROW_COLUMNS else {}
            self._bar = tqdm(desc="Evaluating", unit="sample", total=self.total, mininterval=0.25,
                             file=sys.stderr, **({"ncols": self.columns} if self.columns else
                                                 {"dynamic_ncols": True}), **narrow)
            self._bar.set_postfix_str("errored 0", refresh=False)

    @property
    def total(self) -> int | None:
        return self.expected.total

    def advance(self, errored: int) -> None:
        self.done += 1
        changed, self._errored = errored != self._errored, errored
        if self._bar is not None:
            self._bar.total = self.total
            now = self._clock()
            if changed or now - self._last >= POSTFIX_EVERY_S:  # a new failure: shown at once
                self._last = now
                status = f" | {self._status()}" if self._status is not None else ""
                self._bar.set_postfix_str(f"errored {errored}{status}", refresh=False)
            self._bar.update(1)
            return
        if self.done % self._every == 0:
            self._line(errored, self._clock())
            return
        now = self._clock()
        if now - self._last >= self._interval:
            self._line(errored, now)

    def _line(self, errored: int, now: float) -> None:
        """One plain line: done (of total), errored, elapsed, rate, ETA, the live view."""
        self._last, self._shown, total = now, self.done, self.total
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        done = f"{self.done}/{total}" if total else str(self.done)
        text = f"{done} samples done ({errored} errored), {_duration(elapsed)}, {rate:.3g}/s"
        if total and self.done < total and rate > 0:
            text += f", ETA {_duration((total - self.done) / rate)}"
        if self._status is not None:
            text += f" | {self._status()}"
        log.info("%s", text)

    def close(self) -> None:
        """The bar's end, or a last plain line when samples finished since the last one."""
        if self._bar is not None:
            self._bar.total = self.total
            status = f" | {self._status()}" if self._status is not None else ""
            self._bar.set_postfix_str(f"errored {self._errored}{status}", refresh=False)
            self._bar.close()  # (the last frame: the figures at the end, not 0.5 s before)
            self._bar = None
        elif not self.bar and self.done > self._shown:
            self._line(self._errored, self._clock())
