"""Append-only JSONL files, the one helper their writers share (the run store's predictions
and reviews, the judge's response caches): a torn last line left by a crash is cut before
the next append, so appended lines start clean."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["repair_tail"]


def repair_tail(path: Path) -> None:
    """Cut a torn last line (no newline) so appended lines start clean."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = path.read_bytes()
        fh.truncate(data.rfind(b"\n") + 1)
