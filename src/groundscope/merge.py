"""``groundscope merge RUN_DIR...``: the shards of one run (``eval --shard K/N``, see
``sharding.py``) joined into a new run directory, the one a single run of the same config
gives: its predictions and reviews are the union of the shards' (each ``(sample, repeat)``
once), its ``skipped.jsonl`` the union of theirs (a bad record is dealt to one shard, so it
is counted once), and its reports (both JSON reports, ``report.html``, the summary) are
built by the one report builder, as ``groundscope report`` builds them.

Shard directories are untrusted input, read as ``score`` / ``report`` read a run: the config
through ``rundir`` and ``TaskConfig``, every row checked (``rows.py``), files opened
``O_NOFOLLOW`` (regular files only), no symlinked folder, each shard locked while it is read
(one still being written is refused). Before anything is written, the shards must be of
one run: the same config apart from where and how each ran (``resume.config_changes``:
work dir, endpoint URL, concurrency, retries ...) and ``shard``, the same N, each K once and
every K present (``partial``: the missing ones are named in each report's warnings), each
shard finished (its reports written). A ``(sample, repeat)`` found in two shards must be the
same answer (request hash, status, text; a review: its values), else the merge is refused:
the shards overlap. Judge reply caches (``cache/``) are not merged.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from groundscope.config import TaskConfig
from groundscope.errors import ConfigError, NothingEvaluated, StoreError
from groundscope.fileio import atomic_write, check_no_symlink_dirs
from groundscope.planid import EARLIER_MEDIA_IDS, MEDIA_IDS, PLAN_FILE, media_ids, plan_difference, read_plan
from groundscope.report.model import Report
from groundscope.rescore import load_run_config, rebuild_report
from groundscope.resume import config_changes
from groundscope.rows import Kind, read_rows
from groundscope.rundir import MERGING_FILE, check_not_merging, read_run_config, task_fields
from groundscope.runlock import lock_dir, unlock_dir
from groundscope.sharding import parse_shard
from groundscope.store import MEDIA_ROOTS_KEY, RunStore, latest_rows, subset_file_name
from groundscope.summary import EndpointLimits, add_rate_limits, read_rate_limits, write_rate_limits

log = logging.getLogger("groundscope")

__all__ = ["merge_runs"]

MERGE_FILE = "merge.json"  # in the merged run: which shard came from where


@dataclass(frozen=True)
class _Shard:
    path: Path
    k: int
    n: int
    config: dict[str, Any]  # config.json as the shard wrote it (secrets already hidden)
    cfg: TaskConfig

    @property
    def name(self) -> str:
        return f"{self.k}/{self.n}"

    def store(self) -> RunStore:
        return RunStore(self.path, self.cfg.model_name,
                        legacy_model=self.cfg.model_id or self.cfg.model)


def merge_runs(run_dirs: Sequence[str | Path], work_dir: str | Path = "./outputs", *,
               partial: bool = False) -> Report:
    """Merge the shard run directories ``run_dirs`` into a new run directory under
    ``work_dir`` and return its report (see the module docstring). ``StoreError`` /
    ``ConfigError`` (one line naming the directory) when they are not the shards of one
    finished run; ``NothingEvaluated`` when the merged run has a dataset with no answer."""
    if not run_dirs:
        raise ConfigError("merge: no run directory given")
    shards = sorted((_read_shard(Path(d)) for d in run_dirs), key=lambda s: s.k)
    notes = _check_shards(shards, partial=partial)
    _check_out_of_shards(Path(work_dir), shards)
    out = _write_merged(shards, Path(work_dir))
    try:
        report = rebuild_report(out, notes=notes, merging=True)
        record = {"shards": {s.name: str(s.path) for s in shards}, "notes": list(notes)}
        atomic_write(out / MERGE_FILE, orjson.dumps(record, option=orjson.OPT_INDENT_2))
        (out / MERGING_FILE).unlink()  # complete: merge.json, the completion marker, is in
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # a failed merge leaves no half run behind
        raise
    empty = report.nothing_evaluated()
    if empty:
        raise NothingEvaluated(empty, report)
    return report


def _read_shard(path: Path) -> _Shard:
    if not path.is_dir():
        raise StoreError(f"merge: {path}: not a directory")
    check_not_merging(path)
    config = read_run_config(path)  # one line when it is not a run
    try:
        cfg = load_run_config(path)
    except ConfigError as exc:
        raise StoreError(f"merge: {path / 'config.json'}: {exc}") from None
    if cfg.shard is None:
        raise StoreError(f"merge: {path}: not a shard (its config.json has no shard); merge "
                         "joins the run directories of groundscope eval --shard K/N")
    k, n = parse_shard(cfg.shard)
    return _Shard(path, k, n, config, cfg)


def _check_out_of_shards(work_dir: Path, shards: Sequence[_Shard]) -> None:
    """The merged run is never written inside a shard: deleting the shards once merged
    would take it along."""
    out = work_dir.resolve()
    for s in shards:
        src = s.path.resolve()
        if out == src or src in out.parents:
            raise ConfigError(f"merge: --work-dir {work_dir} is inside shard {s.name} "
                              f"({s.path}); choose a directory outside the shards")


def _check_shards(shards: Sequence[_Shard], *, partial: bool) -> list[str]:
    """One line (``StoreError``) for the first problem; the notes of a partial merge."""
    first = shards[0]
    seen: dict[int, Path] = {}
    for s in shards:
        if s.n != first.n:
            raise StoreError(f"merge: {s.path}: shard {s.name}, but {first.path} is shard "
                             f"{first.name}: not parts of one split")
        changed = [key for key in config_changes(first.cfg.redacted(), s.cfg.redacted())
                   if key != "shard"]
        if changed:
            raise StoreError(f"merge: {s.path}: not a shard of the same run as {first.path}: "
                             f"{', '.join(changed)} differ")
        if s.k in seen:
            raise StoreError(f"merge: {s.path}: shard {s.name} given twice (also {seen[s.k]})")
        seen[s.k] = s.path
    _check_plans(shards)
    notes = []
    missing = [f"{k}/{first.n}" for k in range(1, first.n + 1) if k not in seen]
    if missing:
        if not partial:
            raise StoreError(f"merge: shard {', '.join(missing)} missing (given "
                             f"{len(seen)} of {first.n}); pass --partial to merge the given ones")
        notes.append(f"partial merge: shard {', '.join(missing)} missing; this report covers "
                     f"{len(seen)} of {first.n} shards")
    for s in shards:
        unfinished = [name for name in s.cfg.datasets if not s.store().report_file(name).is_file()]
        if unfinished and not partial:
            raise StoreError(f"merge: {s.path}: shard {s.name} did not finish (no report for "
                             f"{unfinished[0]}); resume it with groundscope eval ... --shard "
                             f"{s.name} --use-cache {s.path}, or pass --partial")
        if unfinished:
            notes.append(f"partial merge: shard {s.name} ({s.path}) did not finish")
    return notes


def _check_plans(shards: Sequence[_Shard]) -> None:
    """Every shard ran on the same plan (``planid.py``): the same records, texts and media
    in the same order. Not overridden by ``partial``: a merge of different data is wrong."""
    plans: dict[str, dict[str, Any]] = {}
    for s in shards:
        plan = read_plan(s.path)
        if plan is None:
            raise StoreError(f"merge: {s.path}: shard {s.name} has no {PLAN_FILE} (the record "
                             "of the data it ran on): it stopped before reading its whole "
                             "plan, or an older groundscope ran it; resume it with groundscope "
                             f"eval ... --shard {s.name} --use-cache {s.path}")
        plans[s.name] = plan
    _check_media_ids(shards, plans)
    first = shards[0]
    for s in shards[1:]:
        why = plan_difference(first.path, s.path)
        if why:
            raise StoreError(f"merge: {s.path}: shard {s.name} ran on different data than "
                             f"shard {first.name} ({first.path}): {why}")


_NAMED = 5  # shards named in one line; more are counted


def _check_media_ids(shards: Sequence[_Shard], plans: dict[str, dict[str, Any]]) -> None:
    """Shards whose plans identify media by another hash than this version's (a version to
    2026-12-06 used BLAKE2b), where that is why their plans differ: each of them is named in
    one line with the command that mends it (resumed by this version, a shard asks nothing
    again and records its plan anew). A shard of another scheme whose plan equals one of
    this version's (no local medium in it) is not named, and shards all of one scheme are
    compared as they are (``plan_difference`` names a real difference). ``plans``: each
    shard's, by name (``read_plan``)."""
    ids = {name: media_ids(plan) for name, plan in plans.items()}
    if len(set(ids.values())) == 1:
        return

    def key(name: str) -> tuple[Any, Any]:
        return plans[name].get("records"), plans[name].get("digest")

    current = {key(s.name) for s in shards if ids[s.name] == MEDIA_IDS}
    other = [s for s in shards if ids[s.name] != MEDIA_IDS and key(s.name) not in current]
    if not other:
        return
    named = "; ".join(f"{s.name} ({s.path}" + ("" if ids[s.name] == EARLIER_MEDIA_IDS
                                               else f", media ids {ids[s.name]!r}")
                      + f"): groundscope eval ... --shard {s.name} --use-cache {s.path}"
                      for s in other[:_NAMED])
    more = f"; and {len(other) - _NAMED} more shards" if len(other) > _NAMED else ""
    raise StoreError(f"merge: {len(other)} shard{'s' if len(other) > 1 else ''} identified media "
                     f"by another hash than this version's ({MEDIA_IDS}; a groundscope before "
                     "2026-12-06 used BLAKE2b): resume each with this version (no answer is "
                     f"asked again), then merge again: {named}{more}")


def _write_merged(shards: Sequence[_Shard], work_dir: Path) -> Path:
    """The shards' rows in a new run directory, built in a temporary directory beside it
    (``.merge-<pid>-<stamp>``, marked unfinished by ``MERGING_FILE`` from the start) and
    renamed into place: a merge killed at any moment leaves no directory that reads as a
    complete run (``rundir.check_not_merging``)."""
    first = shards[0]
    _sweep_staging(work_dir)
    stamp = _dt.datetime.now().strftime("%Y%m%d_%H%M%S")
    out = RunStore.create(work_dir / f".merge-{os.getpid()}-{stamp}", first.cfg.model_name,
                          no_timestamp=True)
    try:
        atomic_write(out.run_dir / MERGING_FILE, b"groundscope merge in progress\n")
        config = task_fields(first.config)
        config.update(shard=None, use_cache=None, work_dir=str(work_dir),
                      **{MEDIA_ROOTS_KEY: _union(s.config.get(MEDIA_ROOTS_KEY) for s in shards)})
        out.write_config(config)
        taken: dict[int, int] = {}
        skipped: set[tuple[str, str, str]] = set()
        for index, shard in enumerate(shards):
            src = shard.store().lock()  # refused while the shard is still being written
            try:
                _copy_rows(shards, index, src, out, taken)
                _copy_skipped(shard, out, skipped)
            finally:
                src.unlock()
        out.close()
        write_rate_limits(out.run_dir, _rate_limits(shards))
        final = work_dir / stamp
        n = 1
        while final.exists():
            n += 1
            final = work_dir / f"{stamp}_{n}"
        out.unlock()
        os.rename(out.run_dir, final)
    except BaseException:
        out.discard()  # a refused merge leaves no half-merged run behind
        raise
    finally:
        out.unlock()
    return final


def _sweep_staging(work_dir: Path) -> None:
    """Remove the temporary directories merges killed before left in ``work_dir``: hidden
    ``.merge-<pid>-<stamp>`` directories (not links) still marked unfinished, whose process
    is gone and whose lock no process holds (a merge running now holds its own, and its
    process is alive also between its unlock and its rename)."""
    try:
        entries = [e for e in os.scandir(work_dir) if e.name.startswith(".merge-")]
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        pid = entry.name.split("-")[1]
        if not entry.is_dir(follow_symlinks=False) or not (path / MERGING_FILE).is_file() \
                or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            if not lock_dir(path):
                continue
        except StoreError:  # a merge writing it now, or a lock file that is not one
            continue
        try:
            shutil.rmtree(path)
            log.info("merge: removed %s, left by a merge that was killed", path)
        except OSError as exc:
            log.warning("merge: could not remove %s, left by a killed merge: %s", path, exc)
        finally:
            unlock_dir(path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _rate_limits(shards: Sequence[_Shard]) -> dict[str, EndpointLimits]:
    """Each endpoint's rate limiting over all shards: 429s, retries and seconds paused
    added up, the lowest in-flight limit any shard reached (each shard's file is read as
    untrusted: a bad one counts as absent)."""
    merged: dict[str, EndpointLimits] = {}
    for shard in shards:
        merged = add_rate_limits(merged, read_rate_limits(shard.path))
    return merged


def _union(lists: Iterable[Any]) -> list[str]:
    roots: dict[str, None] = {}
    for roots_of_one in lists:
        if isinstance(roots_of_one, list):
            roots.update((r, None) for r in roots_of_one if isinstance(r, str))
    return list(roots)


# kind, folder, what two shards' rows of one key must agree on
_KINDS: tuple[tuple[Kind, str, tuple[str, ...]], ...] = (
    ("prediction", "predictions", ("request_hash", "status", "prediction")),
    ("review", "reviews", ("request_hash", "status", "values")))


_SHARD_BITS = 20  # a shard's index in ``taken``'s packed values (MAX_SHARDS < 2**20)


def _copy_rows(shards: Sequence[_Shard], index: int, src: RunStore, out: RunStore,
               taken: dict[int, int]) -> None:
    """The shard's current rows (a key's last line, as the store reads them) into ``out``,
    streamed (``store.latest_rows``); a key another shard wrote must hold the same answer
    there. ``taken``: a hash of each key written so far -> the hash of its answer, with the
    index of the shard it came from in the low bits (two numbers per row, never the rows)."""
    shard = shards[index]
    for kind, folder, same in _KINDS:
        base = src.run_dir / folder / src.model_dir
        check_no_symlink_dirs(src.run_dir, base / "_")
        if not base.is_dir():
            continue
        for path in sorted(base.glob("*.jsonl")):
            for lineno, row in latest_rows(path, kind):
                place = _place(path, lineno, row, shard.cfg.datasets)
                key = hash((kind, *place, str(row["sample_id"]), row.get("repeat", 0),
                            row.get("scorer")))
                digest = hash(orjson.dumps([row.get(f) for f in same], option=orjson.OPT_SORT_KEYS))
                packed = (digest >> _SHARD_BITS << _SHARD_BITS) | index
                where = taken.setdefault(key, packed)
                if where >> _SHARD_BITS != digest >> _SHARD_BITS:
                    other = shards[where & ((1 << _SHARD_BITS) - 1)].path
                    raise StoreError(f"merge: {path}:{lineno}: {kind} of sample "
                                     f"{str(row['sample_id'])!r} repeat {row.get('repeat', 0)} "
                                     f"differs from the one in {other}: the shards overlap")
                if where == packed:
                    out.append_saved(kind, place[0], place[1], row)


def _place(path: Path, lineno: int, row: Mapping[str, Any], datasets: Sequence[str]) -> tuple[str, str]:
    """The (dataset, subset) of a saved row, which must be the ones its file is named after."""
    dataset, subset = row.get("dataset"), row.get("subset")
    if not (isinstance(dataset, str) and isinstance(subset, str) and dataset in datasets
            and subset_file_name(dataset, subset) == path.name):
        raise StoreError(f"merge: {path}:{lineno}: subset: {subset!r} of dataset {dataset!r} "
                         f"does not belong in {path.name}")
    return dataset, subset


def _copy_skipped(shard: _Shard, out: RunStore, skipped: set[tuple[str, str, str]]) -> None:
    path = shard.path / "skipped.jsonl"
    if not path.exists() and not path.is_symlink():
        return
    for row in read_rows(path, "skipped"):
        key = (row["dataset"], row["subset"], row["problem"])
        if key not in skipped:
            skipped.add(key)
            out.append_skipped(*key)
