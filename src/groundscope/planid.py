"""A shard's plan identity: what data it ran on, so ``groundscope merge`` joins only shards
of one plan.

Every shard reads the whole plan (``sharding.py``): each loaded record, its own or not, is
recorded as one line of ``plan-records.jsonl`` (``[dataset, subset, line, sample id,
digest]``; the digest covers the saved sample, text and references, and each medium's
identity as the request hash takes it, ``media.fingerprint``: a local file by its size and
content hash, computed once per file version and reused by the request hash, so a medium of
the shard's own records is not read twice). When the stream ends, ``plan.json`` holds the
number of lines, a digest of them all, and each dataset file read with its size. A shard
stopped before reading its whole plan has no ``plan.json`` (the one of an earlier attempt
is removed when a run starts). ``merge`` compares the shards' ``plan.json`` and, when they
differ, reads the two record files side by side (a line at a time) to name the first record
that differs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from groundscope.configfile import read_json_file
from groundscope.errors import ConfigError, RecordError, StoreError
from groundscope.fileio import atomic_write, open_regular, write_error
from groundscope.media import fingerprint
from groundscope.rowcodec import sample_to_json
from groundscope.types import MediaPart, Sample

PLAN_FILE = "plan.json"
RECORDS_FILE = "plan-records.jsonl"
MAX_RECORD_LINE = 64 << 10  # one record's line: names, an id and a digest
# How a local medium's content enters a record's digest (``media/digest.py``); a plan without
# it was recorded by a version to 2026-12-06, which hashed media with BLAKE2b
# (:func:`media_ids`): plans of two schemes never compare equal.
MEDIA_IDS = "sha256"
EARLIER_MEDIA_IDS = "blake2b"


class PlanRecorder:
    """Records a run's record stream (``add`` each loaded item, in order; ``finish`` once the
    stream ended). Writes ``plan-records.jsonl`` a line at a time: memory does not grow."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._partial = run_dir / f".{RECORDS_FILE}.partial"
        self._digest = hashlib.blake2b(digest_size=16)
        self._count = 0
        self._files: dict[str, int] = {}
        self._fh: IO[bytes] | None = None
        try:
            (run_dir / PLAN_FILE).unlink(missing_ok=True)  # an earlier attempt's, maybe stale
            self._partial.unlink(missing_ok=True)  # a killed attempt's; never followed:
            fd = os.open(self._partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            self._fh = os.fdopen(fd, "wb")  # closed by finish / close
        except OSError as exc:
            raise write_error(self._partial, exc) from None

    def add(self, dataset: str, subset: str, loaded: Sample | RecordError) -> None:
        if isinstance(loaded, RecordError):
            path, line, sid, what = loaded.path, loaded.line, None, [str(loaded)]
        else:
            path, line, sid = loaded.origin.path, loaded.origin.line, loaded.id
            what = [sample_to_json(loaded), [fingerprint(p.media) for m in loaded.messages
                                             if not isinstance(m.content, str)
                                             for p in m.content if isinstance(p, MediaPart)]]
        key = str(path)
        if key not in self._files:
            try:
                self._files[key] = os.stat(path).st_size
            except OSError:
                self._files[key] = -1
        digest = hashlib.blake2b(orjson.dumps(what, option=orjson.OPT_SORT_KEYS,
                                              default=str), digest_size=12).hexdigest()
        row = orjson.dumps([dataset, subset, line, sid, digest]) + b"\n"
        self._digest.update(row)
        self._count += 1
        assert self._fh is not None
        try:
            self._fh.write(row)
        except OSError as exc:
            raise write_error(self._partial, exc) from None

    def finish(self) -> None:
        """The stream ended: the records file in place, then ``plan.json``."""
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            fh.close()
            os.replace(self._partial, self.run_dir / RECORDS_FILE)
        except OSError as exc:
            raise write_error(self.run_dir / RECORDS_FILE, exc) from None
        plan = {"records": self._count, "digest": self._digest.hexdigest(), "files": self._files,
                "media_ids": MEDIA_IDS}
        atomic_write(self.run_dir / PLAN_FILE, orjson.dumps(plan, option=orjson.OPT_INDENT_2))

    def close(self) -> None:
        """Drop an unfinished recording (the stream was stopped)."""
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()


def read_plan(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``plan.json`` (checked: a record count, a digest, files with sizes), or None
    when it has none; ``StoreError`` (one line) when it is not one."""
    path = run_dir / PLAN_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = read_json_file(path)
    except ConfigError as exc:
        raise StoreError(str(exc)) from None
    files = data.get("files")
    if not (isinstance(data.get("records"), int) and isinstance(data.get("digest"), str)
            and isinstance(files, dict) and all(isinstance(v, int) for v in files.values())
            and isinstance(data.get("media_ids", EARLIER_MEDIA_IDS), str)):
        raise StoreError(f"{path}: not a groundscope plan (records, digest, files, media_ids)")
    return data


def media_ids(plan: dict[str, Any]) -> str:
    """How media entered the digests of ``plan`` (a :func:`read_plan` result)."""
    return str(plan.get("media_ids", EARLIER_MEDIA_IDS))


def _records(run_dir: Path) -> Iterator[list[Any]]:
    path = run_dir / RECORDS_FILE
    try:
        with open_regular(path) as fh:
            for n, raw in enumerate(iter(lambda: fh.readline(MAX_RECORD_LINE + 1), b""), 1):
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    row = None
                if not (isinstance(row, list) and len(row) == 5):
                    raise StoreError(f"{path}:{n}: not a plan record line")
                yield row
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _name(row: list[Any]) -> str:
    dataset, subset, line, sid, _ = row
    what = f"sample {sid!r}" if sid is not None else "a bad record"
    return f"{dataset}/{subset} line {line} ({what})"


def plan_difference(first: Path, other: Path) -> str:
    """How ``other``'s plan differs from ``first``'s: a dataset file's size, else the first
    record that differs (read a line at a time); empty when the plans are the same."""
    a, b = read_plan(first), read_plan(other)
    if a is None or b is None:
        raise AssertionError("both plans are read before")
    if (a["records"], a["digest"]) == (b["records"], b["digest"]):
        for path in sorted(a["files"].keys() | b["files"].keys()):
            sa, sb = a["files"].get(path), b["files"].get(path)
            if sa != sb:
                return f"dataset file {path} is {_size(sb)} there, {_size(sa)} in {first}"
        return ""
    ra, rb = _records(first), _records(other)
    while True:
        x, y = next(ra, None), next(rb, None)
        if x is None and y is None:
            return "the plan records differ"
        if x is None or y is None:
            extra = x if y is None else y
            where = first if y is None else other
            return f"record {_name(extra)} is only in {where}'s plan"
        if x != y:
            if x[:4] == y[:4]:
                return f"first differing record: {_name(y)}: its text or media differ"
            return f"first differing record: {_name(y)} there, {_name(x)} in {first}"


def _size(size: int | None) -> str:
    return "absent" if size is None else ("unreadable" if size < 0 else f"{size} bytes")
