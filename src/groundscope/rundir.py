"""What a directory is to groundscope, decided before anything is written to it.

A *run directory* holds a ``config.json`` written by groundscope: a JSON object carrying
``"format": "groundscope-run"`` (written since schema 1 runs got the marker) or, for runs
written before the marker, the shape of one (an integer ``schema_version`` and the task
config's ``model``, ``datasets``, ``dataset_args`` and ``work_dir`` keys). A *work
directory* holds run directories (``<work_dir>/<YYYYMMDD_HHMMSS>[_N]``). A directory is
*empty* when it holds nothing, or only what a run that failed before writing its config
leaves (the lock file, ``logs/``). Anything else is *foreign*: groundscope refuses to write
into it (``--use-cache``, ``--no-timestamp``) and to read it as a run (``score``,
``report``), with a one-line error.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from groundscope.configfile import read_json_file
from groundscope.errors import StoreError
from groundscope.fileio import read_regular
from groundscope.runlock import LOCK_FILE

RUN_MARKER = "groundscope-run"  # config.json's "format"
MERGING_FILE = ".merge-unfinished"  # a merged run being written: removed once merge.json is
CONFIG_FILE = "config.json"
_LEGACY_KEYS = frozenset({"model", "datasets", "dataset_args", "work_dir"})
_LEFTOVERS = frozenset({LOCK_FILE, "logs"})  # what a run leaves before its config is written
_MAX_CONFIG_BYTES = 16 << 20  # a run's config is a few KiB; a larger file is not one
_STAMP = re.compile(r"(\d{8}_\d{6})(?:_(\d+))?")


class DirKind(enum.Enum):
    MISSING = "missing"
    EMPTY = "empty"
    RUN = "run"
    WORK = "work"  # holds run directories
    FOREIGN = "foreign"


def is_run_config(data: Any) -> bool:
    """Whether a parsed config.json is a groundscope run's (the marker, or the old shape)."""
    if not isinstance(data, dict):
        return False
    if data.get("format") == RUN_MARKER:
        return True
    return isinstance(data.get("schema_version"), int) and data.keys() >= _LEGACY_KEYS


def task_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's config.json without the marker keys ``RunStore.write_config`` adds
    (``schema_version``, ``format``): the task config and the run's own records (media
    roots), as written back by ``merge`` and ``score --judge``."""
    return {k: v for k, v in config.items() if k not in ("schema_version", "format")}


def read_run_config(run_dir: Path) -> dict[str, Any]:
    """The run's config.json as written (secrets hidden); ``StoreError`` (one line) when the
    directory is not a run, or its config is empty, torn or not groundscope's."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        hint = ""
        if classify(run_dir) is DirKind.WORK:
            hint = f"; it holds run directories, the latest is {latest_run(run_dir)}"
        raise StoreError(f"{run_dir}: not a groundscope run directory (no {CONFIG_FILE}){hint}")
    try:
        empty = path.stat().st_size == 0
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if empty:
        raise StoreError(f"{path}: empty file (0 bytes): not a usable groundscope run "
                         "config (was the disk full when the run started?)")
    data = read_json_file(path)  # bounded: size, depth, values (ConfigError, one line)
    if not is_run_config(data):
        raise StoreError(f"{path}: not a groundscope run config (no \"format\": "
                         f"\"{RUN_MARKER}\" and not the shape of one)")
    return data


def check_not_merging(run_dir: Path) -> None:
    """``StoreError`` (one line) for a run ``groundscope merge`` is still writing, or was
    killed while writing (``MERGING_FILE`` is there until its completion marker,
    ``merge.json``, is written): it holds part of the shards' rows and is no run to read."""
    if (run_dir / MERGING_FILE).exists() or (run_dir / MERGING_FILE).is_symlink():
        raise StoreError(f"{run_dir}: an unfinished groundscope merge (stopped before it wrote "
                         "merge.json, its completion marker): it holds only part of the "
                         "shards' rows; delete it and run groundscope merge again")


def _read_config(path: Path) -> bytes:
    """The bytes of a config.json; at most ``_MAX_CONFIG_BYTES`` (more is no run's: its
    first bytes are returned, which do not parse)."""
    return read_regular(path, _MAX_CONFIG_BYTES)[:_MAX_CONFIG_BYTES]


def _has_run_config(path: Path) -> bool:
    try:
        return is_run_config(orjson.loads(_read_config(path / CONFIG_FILE)))
    except (OSError, StoreError, orjson.JSONDecodeError):
        return False


def classify(path: Path) -> DirKind:
    """What ``path`` is (see the module docstring). Reads at most the config files."""
    if not path.exists():
        return DirKind.MISSING
    if not path.is_dir():
        return DirKind.FOREIGN
    if (path / CONFIG_FILE).exists():
        return DirKind.RUN if _has_run_config(path) else DirKind.FOREIGN
    try:
        if all(e.name in _LEFTOVERS for e in path.iterdir()):
            return DirKind.EMPTY
        return DirKind.WORK if _runs_in(path) else DirKind.FOREIGN
    except OSError:  # cannot even be listed: not a directory to write into
        return DirKind.FOREIGN


def _runs_in(work_dir: Path) -> list[Path]:
    return [p for p in work_dir.iterdir() if p.is_dir() and (p / CONFIG_FILE).is_file()
            and _has_run_config(p)]


def _age(run: Path) -> tuple[int, str, int, int]:
    """Sort key, oldest first: timestamped names by their stamp and counter, after the
    others (by their config's modification time)."""
    m = _STAMP.fullmatch(run.name)
    if m:
        return (1, m.group(1), int(m.group(2) or 1), 0)
    return (0, "", 0, (run / CONFIG_FILE).stat().st_mtime_ns)


def latest_run(work_dir: Path) -> Path | None:
    """The most recent run directory inside ``work_dir`` (timestamped names win), or None."""
    runs = _runs_in(work_dir)
    return max(runs, key=_age) if runs else None


def resume_target(path: Path) -> tuple[Path, str | None]:
    """The run directory ``--use-cache path`` resumes, and a note to show when it is not
    ``path`` itself. ``StoreError`` for a missing or foreign directory."""
    kind = classify(path)
    if kind is DirKind.MISSING:
        raise StoreError(f"use_cache: run directory not found: {path}")
    if kind is DirKind.RUN:
        return path, None
    if kind is DirKind.EMPTY:
        return path, f"use_cache: {path} holds no run yet; starting one there"
    if kind is DirKind.WORK:
        run = latest_run(path)
        assert run is not None
        return run, f"use_cache: {path} holds run directories; resuming the latest, {run}"
    _refuse_foreign(path, "use_cache")
    raise AssertionError("unreachable")


def check_fresh_run_dir(path: Path) -> None:
    """``--no-timestamp``: the work directory itself becomes the run directory, so it must be
    missing or empty; a run (or runs) there are resumed with ``--use-cache``, not overwritten."""
    kind = classify(path)
    if kind is DirKind.RUN:
        raise StoreError(f"no_timestamp: {path} already holds a groundscope run; resume it with "
                         f"--use-cache {path}, or choose another --work-dir")
    if kind is DirKind.WORK:
        raise StoreError(f"no_timestamp: {path} holds groundscope run directories; resume the "
                         f"latest with --use-cache {path}, or choose another --work-dir")
    if kind is DirKind.FOREIGN:
        _refuse_foreign(path, "no_timestamp")


def _refuse_foreign(path: Path, setting: str) -> None:
    if (path / CONFIG_FILE).is_file():
        read_run_config(path)  # says what is wrong with it: empty, torn, someone else's
    what = "not a directory" if not path.is_dir() else (
        f"not empty and not a groundscope run directory (no groundscope {CONFIG_FILE}, "
        "no run directories inside)")
    raise StoreError(f"{setting}: {path}: {what}; refusing to write into it")
