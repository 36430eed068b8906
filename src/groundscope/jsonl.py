"""Append-only JSONL files: read back (a torn last line skipped), repair, keyed appends.

A line is written and flushed as soon as it is known, so a crash loses at most the line
being written; a torn (unterminated) last line is dropped when the file is read back and cut
before the next append. A :class:`Shard` is one such file with the keys already written to
it; a key written twice marks the file for compaction on close (last line wins).
"""

from __future__ import annotations

import contextlib
import os
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from groundscope.bounds import MAX_RUN_LINE_BYTES
from groundscope.errors import StoreError
from groundscope.fileio import create_fresh, fsync_dir, open_regular, open_regular_fd


def dumps_line(obj: Any) -> bytes:
    """One JSONL line (values orjson cannot encode are written as ``str``)."""
    return orjson.dumps(obj, default=str) + b"\n"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Read a JSONL file written by the store; a torn (unterminated) last line is skipped."""
    for _, row in read_jsonl_numbered(path):
        yield row


def read_jsonl_numbered(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a run directory's JSONL file (untrusted input): only a
    regular file, not through a symlink (``fileio.open_regular``); a line over
    ``MAX_RUN_LINE_BYTES``, bad JSON or not an object is a one-line ``StoreError``
    naming ``file:line``; a torn (unterminated) last line is skipped."""
    with open_regular(path) as fh:
        lineno = 0
        while raw := fh.readline(MAX_RUN_LINE_BYTES + 1):
            lineno += 1
            if len(raw) > MAX_RUN_LINE_BYTES:
                raise StoreError(f"{path}:{lineno}: line over {MAX_RUN_LINE_BYTES} bytes; refused")
            if not raw.endswith(b"\n"):
                return  # torn tail from a crash mid-write
            raw = raw.strip()
            if not raw:
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"{path}:{lineno}: corrupt line: {exc}") from None
            if not isinstance(row, dict):
                raise StoreError(f"{path}:{lineno}: not a JSON object")
            yield lineno, row


def repair_tail(path: Path) -> None:
    """Cut a torn last line (no newline) so appended lines start clean (the file is opened
    as :func:`fileio.open_regular` does: never through a symlink, never a FIFO)."""
    try:
        fd = open_regular_fd(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        end = os.fstat(fd).st_size
        if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
            return
        pos = end
        while pos > 0:  # back to the last newline, a block at a time
            start = max(0, pos - 65536)
            cut = os.pread(fd, pos - start, start).rfind(b"\n")
            if cut >= 0:
                os.ftruncate(fd, start + cut + 1)
                return
            pos = start
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


@dataclass
class Shard:
    """One append-only JSONL file and the keys already written to it.

    Only the keys' hashes are kept, 8 bytes a line: a key written twice (found on close)
    marks the file for compaction; a rare hash collision only costs a needless compaction.
    A failed write (``OSError``, e.g. a full disk) closes the file and propagates: the next
    append (or a resumed run) cuts the torn line it may have left.
    """

    path: Path
    key_fields: tuple[str, ...]
    handle: IO[bytes] | None = None
    keys: array[int] = field(default_factory=lambda: array("q"))

    def append(self, row: Mapping[str, Any], line: bytes | None = None) -> None:
        """Append ``row`` (``line``: its JSONL line when the caller already encoded it)."""
        if self.handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            repair_tail(self.path)
            self.handle = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if self.key_fields:
            self.keys.append(hash(tuple(row[f] for f in self.key_fields)))
        try:
            self.handle.write(line if line is not None else dumps_line(row))
            self.handle.flush()
        except OSError:
            self._drop_handle()
            raise

    def _drop_handle(self) -> None:
        """Close after a failed write: ``close`` tries one more flush and, if that fails
        too, still closes the file (the unwritten rest of the line is dropped)."""
        handle, self.handle = self.handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()

    def discard(self) -> None:
        """Close without flushing what a failed write left, and delete the file."""
        self._drop_handle()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.handle.flush()
                os.fsync(self.handle.fileno())
            finally:
                self._drop_handle()
        if len(set(self.keys)) < len(self.keys):  # a key written again: keep its last line
            self._compact()

    def _compact(self) -> None:
        latest: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in read_jsonl(self.path):
            key = tuple(row[f] for f in self.key_fields)
            latest.pop(key, None)  # keep the order of the last write
            latest[key] = row
        tmp = self.path.with_suffix(".jsonl.tmp")
        try:
            with create_fresh(tmp) as fh:
                for row in latest.values():
                    fh.write(dumps_line(row))
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(self.path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()  # the uncompacted file is intact: later lines still win
            raise
        fsync_dir(self.path.parent)
        self.keys = array("q", sorted(set(self.keys)))
