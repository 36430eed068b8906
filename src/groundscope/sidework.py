"""One-off work a run does beside its requests, in background threads while it waits on the
model, so that little of it stalls the event loop or delays the first wave:

* the scorers' set-up (the English tokenizer: nltk's import and the build), once the first
  wave is out; except where the run's thread is the process's only one, which sets them up
  itself before its first request (:meth:`SideWork.before_requests`);
* jieba's dictionary (~0.7 s of CPU), as soon as a loaded reference holds Chinese;
* the thumbnails of the end-of-run page, from the local images of the first samples
  (Pillow decodes without holding the interpreter lock).

Each is also done where it is needed if it has not been yet (a scorer builds its tokenizer,
the page makes a missing thumbnail), so this only moves work, never changes a result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from groundscope.types import Modality, Sample

log = logging.getLogger("groundscope")


class SideWork:
    """The background work of one run over datasets whose scorers are ``scorer_lists``."""

    def __init__(self, scorer_lists: Sequence[Sequence[Any]]) -> None:
        from groundscope.report.embed import ThumbnailPrefetch

        self._warms: list[Callable[[], None]] | None = _warms_of(scorer_lists) or None
        self._chinese_pending = bool(self._warms)  # only text metrics tokenize Chinese
        self._thumbs = ThumbnailPrefetch()

    def loaded(self, sample: Sample) -> None:
        """A sample was read (before its request is sent)."""
        if self._chinese_pending:
            self._chinese(sample)
        if self._thumbs.wanted:
            self._offer_thumbnails(sample)

    def before_requests(self) -> None:
        """On the run's own thread, before its first record is read. Where it is the
        process's only thread (``groundscope eval``, a script's ``run_task``), the scorers
        are set up now instead: the English tokenizer's build then imports three of nltk's
        modules rather than nltk whole (``scoring/nltkload.py``: 48 against 140 ms of CPU,
        and 20 MB less peak RSS at concurrency 128, N=2,000), which is safe only while no
        other thread can import. The build holds the interpreter lock wherever it runs, so
        here it delays the first wave by what it delayed the second in the background."""
        from groundscope.scoring.nltkload import only_thread

        if self._warms and only_thread():
            warms, self._warms = self._warms, None
            for fn in warms:
                _quietly(fn)

    def first_wave_out(self) -> None:
        """Every model slot is busy (or nothing is left to send): set the scorers up now.
        Idempotent."""
        warms, self._warms = self._warms, None
        if warms:
            _warm(warms)

    def close(self) -> None:
        """Wait for the thumbnails (the page is written next)."""
        self._thumbs.close()

    def _chinese(self, sample: Sample) -> None:
        from groundscope.scoring.tokenize import contains_chinese, warm_chinese

        if any(contains_chinese(t) for t in sample.target):
            self._chinese_pending = False
            _thread("groundscope-jieba", lambda: _quietly(warm_chinese))

    def _offer_thumbnails(self, sample: Sample) -> None:
        for ref in sample.media():
            if ref.kind is Modality.IMAGE:
                self._thumbs.offer(ref)  # a local file inside the media roots, else ignored


def warm_scorers(scorer_lists: Sequence[Sequence[Any]]) -> None:
    """The scorers' one-off set-up (each once), in a background thread: what a Ray worker
    does as it starts, the runner once its first wave is out."""
    warms = _warms_of(scorer_lists)
    if warms:
        _warm(warms)


def _warms_of(scorer_lists: Sequence[Sequence[Any]]) -> list[Callable[[], None]]:
    """The scorers' set-up functions, each once."""
    warms = {id(w): w for scorers in scorer_lists for s in scorers
             if (w := getattr(s, "warm", None)) is not None}
    return list(warms.values())


def _warm(warms: list[Callable[[], None]]) -> None:
    _thread("groundscope-warm-up", lambda: [_quietly(fn) for fn in warms])


def _thread(name: str, target: Callable[[], object]) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _quietly(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception as exc:  # where the work is needed, the same failure is reported
        log.debug("background set-up failed: %s", exc)
