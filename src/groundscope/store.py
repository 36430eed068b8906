"""The run directory: append-only predictions and reviews, the resume index.

Layout (schema version 2; version 1 had groundscope's report at ``<dataset>.json``)::

    <run_dir>/
      config.json                               the task config, redacted (config.redacted()),
                                                marked "format": "groundscope-run" (rundir.py)
                                                and the media roots the run read from
      configs/task_config.yaml                  the same config in YAML, where EvalScope's is
      predictions/<model>/<dataset>_<subset>.jsonl   one line per finished request
      reviews/<model>/<dataset>_<subset>.jsonl       one line per (sample, scorer)
      reports/<model>/<dataset>.json                  the report in EvalScope's schema
                                                      (report/evalscope.py)
      reports/<model>/<dataset>.groundscope.json      groundscope's versioned dataset report
      skipped.jsonl                             bad records: file, line, field, problem
      report.html                               (report/html.py)
      logs/eval_log.log

Every line is written and flushed as soon as it is known, so a crash loses at most the
line being written; a torn last line is dropped when the file is read back. A resumed run
matches saved predictions by ``(sample_id, repeat)`` *and* the request hash, so a changed
prompt, model or generation config is requested again, never silently reused. When a run
ends, files holding superseded lines are compacted so every sample appears exactly once.
Whole files (config.json, task_config.yaml, reports) are replaced atomically
(``fileio.atomic_write``); a re-scoring writes its reviews aside and swaps them in only once
complete. A failed write (a full disk) is a one-line ``StoreError`` naming the file and how
to resume.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import shutil
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from groundscope.compat import default_model_id
from groundscope.errors import ConfigError, StoreError
from groundscope.fileio import atomic_write, check_no_symlink_dirs, fsync_dir, within, write_error
from groundscope.jsonl import Shard, read_jsonl_numbered
from groundscope.rowcodec import prediction_row, review_row, skipped_row
from groundscope.rows import KEYS, Kind, encode_row, read_rows, read_rows_numbered
from groundscope.rundir import RUN_MARKER, check_fresh_run_dir, resume_target
from groundscope.runlock import lock_dir, unlock_dir
from groundscope.types import Prediction, Sample, Score

MEDIA_ROOTS_KEY = "allowed_media_roots"  # config.json: the real paths media were read under
SCHEMA_VERSION = 2
REPORT_SUFFIX = ".groundscope.json"  # groundscope's report; <dataset>.json is EvalScope's
_UNSAFE = re.compile(r"[^\w.\-]+")


def saved_media_roots(config: Mapping[str, Any], run_dir: Path | None = None) -> tuple[str, ...]:
    """The media roots a run recorded in its config.json that ``score`` / ``report`` honour
    (none for a run made before they were recorded).

    A run directory is untrusted input: a recorded root is honoured only when it lies inside
    this process's working directory or the run directory's parent (its work directory),
    and is not a file-system root; a root named elsewhere (``/``, a home, ``/etc``) is
    dropped."""
    roots = config.get(MEDIA_ROOTS_KEY)
    if not isinstance(roots, list):
        return ()
    bounds = [os.path.realpath(os.getcwd())]
    if run_dir is not None:
        bounds.append(os.path.realpath(Path(run_dir).parent))
    out = []
    for r in roots:
        if not isinstance(r, str) or not r or not os.path.isabs(r):
            continue
        real = os.path.realpath(r)
        if real != os.path.dirname(real) and any(within(real, b) for b in bounds):
            out.append(r)
    return tuple(out)


def safe_name(name: str) -> str:
    """A file-system-safe version of a model / dataset / subset name."""
    return _UNSAFE.sub("_", name).strip("._") or "_"


def subset_file_name(dataset: str, subset: str) -> str:
    """The file name of a subset's predictions and reviews."""
    return f"{safe_name(dataset)}_{safe_name(subset)}.jsonl"


def check_subset_files(pairs: Iterable[tuple[str, str]]) -> None:
    """``ConfigError`` (before anything is written) when two (dataset, subset) pairs would
    share one output file, e.g. subsets ``a b`` and ``a_b``: their samples would mix."""
    seen: dict[str, tuple[str, str]] = {}
    for dataset, subset in pairs:
        first = seen.setdefault(subset_file_name(dataset, subset), (dataset, subset))
        if first != (dataset, subset):
            raise ConfigError(
                f"dataset_args.{dataset}: subsets {first[1]!r} ({first[0]}) and {subset!r} "
                f"({dataset}) would share the output file {subset_file_name(dataset, subset)}; "
                "rename one of them")


# ---------------------------------------------------------------- the store


class RunStore:
    """Owns one run directory. Not thread-safe: used from the runner's event loop only.

    ``create`` and ``open`` take an exclusive lock on the directory (``flock`` on
    ``.groundscope.lock``, which holds the owner's pid) until :meth:`unlock`, so two
    processes never append to one run at once; the system drops the lock of a process that
    dies, so a crash leaves nothing to clean up.
    """

    def __init__(self, run_dir: Path, model_name: str, *, legacy_model: str | None = None) -> None:
        self.run_dir = run_dir
        self.model_dir = safe_name(model_name)
        if legacy_model is not None and not (run_dir / "predictions" / self.model_dir).exists():
            # a run written when the folder was named after the whole model name
            old = safe_name(legacy_model)
            if (run_dir / "predictions" / old).is_dir():
                self.model_dir = old
        self._shards: dict[Path, Shard] = {}
        self._paths: dict[tuple[str, str, str], Path] = {}
        self._staged: dict[Path, Path] = {}  # reviews file -> its replacement being written
        self._unlock: Callable[[], None] | None = None
        self.note: str | None = None  # what ``open`` resolved the given path to, to show
        self.resume_hint = (f"finished work is kept in {run_dir}: free some space, then resume "
                            f"with --use-cache {run_dir}")

    def lock(self) -> RunStore:
        """Take the directory's lock (StoreError when another process holds it). Stores of
        one process share it: it is released when the last of them unlocks."""
        if self._unlock is None and lock_dir(self.run_dir):
            self._unlock = weakref.finalize(self, unlock_dir, self.run_dir)  # also if dropped
        return self

    def unlock(self) -> None:
        """Release this store's hold on the directory's lock (idempotent)."""
        release, self._unlock = self._unlock, None
        if release is not None:
            release()

    # -- opening

    @classmethod
    def create(cls, work_dir: str | Path, model_name: str, *, no_timestamp: bool = False) -> RunStore:
        """A new run directory under ``work_dir`` (or ``work_dir`` itself with
        ``no_timestamp``, which must then be missing or empty: see ``rundir``)."""
        root = Path(work_dir)
        if no_timestamp:
            check_fresh_run_dir(root)
            run_dir = root
        else:
            stamp = _dt.datetime.now().strftime("%Y%m%d_%H%M%S")
            run_dir = root / stamp
            n = 1
            while run_dir.exists():
                n += 1
                run_dir = root / f"{stamp}_{n}"
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(run_dir, exc) from None
        return cls(run_dir, model_name).lock()

    @classmethod
    def open(cls, run_dir: str | Path, model_name: str, *,
             legacy_model: str | None = None) -> RunStore:
        """The run directory ``run_dir`` (``--use-cache``): a run, an empty directory, or a
        work directory holding runs (the latest is opened; ``note`` says which).
        ``legacy_model``: the model folder's name in runs written before ``model_id``
        defaulted to the model's last path part, used when only that folder exists."""
        path, note = resume_target(Path(run_dir))
        store = cls(path, model_name, legacy_model=legacy_model).lock()
        store.note = note
        return store

    # -- paths

    def _subset_file(self, kind: str, dataset: str, subset: str) -> Path:
        path = self._paths.get((kind, dataset, subset))
        if path is None:  # built once: this is on the per-sample path
            name = subset_file_name(dataset, subset)
            path = self.run_dir / kind / self.model_dir / name
            check_no_symlink_dirs(self.run_dir, path)  # a run directory is untrusted input
            self._paths[(kind, dataset, subset)] = path
        return path

    def predictions_file(self, dataset: str, subset: str) -> Path:
        return self._subset_file("predictions", dataset, subset)

    def reviews_file(self, dataset: str, subset: str) -> Path:
        return self._subset_file("reviews", dataset, subset)

    def report_file(self, dataset: str) -> Path:
        """groundscope's report of ``dataset``."""
        path = self.run_dir / "reports" / self.model_dir / f"{safe_name(dataset)}{REPORT_SUFFIX}"
        check_no_symlink_dirs(self.run_dir, path)
        return path

    def evalscope_report_file(self, dataset: str) -> Path:
        """The report of ``dataset`` in EvalScope's schema, where EvalScope writes it."""
        path = self.run_dir / "reports" / self.model_dir / f"{safe_name(dataset)}.json"
        check_no_symlink_dirs(self.run_dir, path)
        return path

    @property
    def log_file(self) -> Path:
        return self.run_dir / "logs" / "eval_log.log"

    # -- writing

    def write_config(self, redacted: Mapping[str, Any], *,
                     schema_version: int = SCHEMA_VERSION) -> None:
        """config.json, atomically (never a 0-byte or torn file), with the run marker; then
        the same config as EvalScope's ``configs/task_config.yaml`` (keys sorted, as
        EvalScope dumps it), its ``model_id`` resolved. ``schema_version``: an existing
        run's, written back unchanged (a run of schema 1 keeps its reports' places)."""
        data = {"schema_version": schema_version, "format": RUN_MARKER, **redacted}
        atomic_write(self.run_dir / "config.json", orjson.dumps(data, option=orjson.OPT_INDENT_2),
                     hint=self.resume_hint)
        model_id = redacted.get("model_id") or default_model_id(str(redacted.get("model") or ""))
        text = yaml.safe_dump({**redacted, "model_id": model_id}, allow_unicode=True,
                              default_flow_style=False)
        check_no_symlink_dirs(self.run_dir, self.run_dir / "configs" / "task_config.yaml")
        atomic_write(self.run_dir / "configs" / "task_config.yaml", text.encode(),
                     hint=self.resume_hint)

    def _append(self, path: Path, kind: Kind, row: Mapping[str, Any]) -> None:
        """One row of ``kind``, written as ``rows.encode_row`` checked it (as it is read)."""
        path = self._staged.get(path, path)
        line = encode_row(kind, row, path)
        shard = self._shards.get(path)
        try:
            if shard is None:
                key_fields = KEYS[kind]
                shard = self._shards[path] = Shard(path, key_fields)
                if path.exists():
                    for old in read_rows(path, kind):
                        shard.keys.append(hash(tuple(old.get(f) for f in key_fields)))
            shard.append(row, line)
        except OSError as exc:
            raise write_error(path, exc, self.resume_hint) from None

    def append_prediction(self, dataset: str, subset: str, sample: Sample, pred: Prediction) -> None:
        self._append(self.predictions_file(dataset, subset), "prediction",
                     prediction_row(dataset, subset, sample, pred))

    def append_score(self, dataset: str, subset: str, score: Score, request_hash: str) -> None:
        self._append(self.reviews_file(dataset, subset), "review",
                     review_row(dataset, subset, score, request_hash))

    def append_saved(self, kind: Kind, dataset: str, subset: str, row: Mapping[str, Any]) -> None:
        """A row read (and checked) from another run directory, written as it was read
        (``groundscope merge``): ``kind`` is ``"prediction"`` or ``"review"``."""
        path = (self.predictions_file if kind == "prediction" else self.reviews_file)(dataset, subset)
        self._append(path, kind, row)

    def append_skipped(self, dataset: str, subset: str, problem: str) -> None:
        """One bad record; keyed, so a resumed run that meets it again does not count it twice."""
        self._append(self.run_dir / "skipped.jsonl", "skipped", skipped_row(dataset, subset, problem))

    def write_report(self, dataset: str, report: Mapping[str, Any],
                     evalscope: Mapping[str, Any]) -> Path:
        """groundscope's ``report`` and its ``evalscope``-schema twin; the latter's path."""
        atomic_write(self.report_file(dataset),
                     orjson.dumps(report, option=orjson.OPT_INDENT_2, default=str),
                     hint=self.resume_hint)
        path = self.evalscope_report_file(dataset)
        atomic_write(path, orjson.dumps(evalscope, option=orjson.OPT_INDENT_2), hint=self.resume_hint)
        return path

    def close(self) -> None:
        """Flush, fsync and close every file (compacting those with superseded lines); the
        first failure is raised once all are closed."""
        failed: StoreError | None = None
        for path, shard in self._shards.items():
            try:
                shard.close()
            except OSError as exc:
                failed = failed or write_error(path, exc, self.resume_hint)
        if failed is not None:
            raise failed

    def discard(self) -> None:
        """Remove the run directory this store created (``create``) and nothing else wrote
        into: a refused ``groundscope merge`` leaves no half-merged run behind."""
        for shard in self._shards.values():
            shard.discard()
        self._shards.clear()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- re-scoring: new reviews are written aside, then replace the old ones at once

    def stage_reviews(self, dataset: str, subset: str) -> None:
        """Send this subset's scores to a file aside until :meth:`commit_reviews`; until
        then (and for good if the process dies) the saved reviews stay as they were."""
        final = self.reviews_file(dataset, subset)
        aside = final.with_name(f".{final.name}.rescoring")
        try:
            aside.unlink(missing_ok=True)  # left by a re-scoring that was killed
            aside.parent.mkdir(parents=True, exist_ok=True)
            aside.touch()  # a subset whose scores are all gone is committed empty
        except OSError as exc:
            raise write_error(aside, exc, self.resume_hint) from None
        self._staged[final] = aside

    def commit_reviews(self, replacing: Callable[[], None] | None = None) -> None:
        """Replace each staged subset's reviews by its new file (fsync, then ``os.replace``).
        ``replacing()`` is called once the first of them is replaced, before the next: from
        then on a failure leaves new reviews in place (a re-scoring's error says so)."""
        staged, self._staged = self._staged, {}
        first = True
        for final, aside in staged.items():
            shard = self._shards.pop(aside, None)
            try:
                if shard is not None:
                    shard.close()
                os.replace(aside, final)
            except OSError as exc:
                self._staged = staged  # discard_staged removes what is left
                raise write_error(final, exc, self.resume_hint) from None
            self._shards.pop(final, None)  # its key index is stale now
            fsync_dir(final.parent)
            if first and replacing is not None:
                first = False
                try:
                    replacing()
                except BaseException:
                    self._staged = staged  # discard_staged removes what is left
                    raise

    def discard_staged(self) -> None:
        """Drop scores written aside and not committed (a failed re-scoring)."""
        staged, self._staged = self._staged, {}
        for aside in staged.values():
            shard = self._shards.pop(aside, None)
            if shard is not None:
                shard.discard()
            with contextlib.suppress(OSError):
                aside.unlink(missing_ok=True)

    # -- reading back (resume, re-score, re-report)

    def load_predictions(self, dataset: str, subset: str) -> dict[tuple[str, int], dict[str, Any]]:
        """Saved prediction rows by (sample_id, repeat); later lines win."""
        path = self.predictions_file(dataset, subset)
        if not path.exists():
            return {}
        return {(str(r["sample_id"]), int(r.get("repeat", 0))): r
                for r in read_rows(path, "prediction")}

    def load_reviews(self, dataset: str, subset: str) -> dict[tuple[str, int, str], dict[str, Any]]:
        path = self.reviews_file(dataset, subset)
        if not path.exists():
            return {}
        return {(str(r["sample_id"]), int(r.get("repeat", 0)), r["scorer"]): r
                for r in read_rows(path, "review")}

    def saved_subsets(self) -> list[tuple[str, str]]:
        """(dataset, subset) pairs that have a predictions file, from their rows."""
        found: list[tuple[str, str]] = []
        folder = self.run_dir / "predictions" / self.model_dir
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            for row in read_rows(path, "prediction"):
                found.append((row["dataset"], row["subset"]))
                break
        return found


def _row_key(row: Mapping[str, Any], fields: tuple[str, ...]) -> int:
    return hash(tuple(str(row.get(f, 0 if f == "repeat" else None)) for f in fields))


def latest_rows(path: Path, kind: Kind) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of each key's last line in ``path`` (a later line supersedes
    an earlier one, as in :meth:`RunStore.load_predictions`), in file order, each checked
    as ``rows.read_rows`` checks it. Streamed: two passes over the file (the first parses
    only, for each key's last line number), so memory holds one number per key, never the
    rows (``groundscope merge`` and ``report`` on shards of any size)."""
    fields = KEYS[kind]
    last = {_row_key(raw, fields): lineno for lineno, raw in read_jsonl_numbered(path)}
    for lineno, row in read_rows_numbered(path, kind):
        if last.get(_row_key(row, fields)) == lineno:
            yield lineno, row
