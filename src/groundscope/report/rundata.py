"""Read a finished run directory for the HTML report and for run comparison (read-only).

Everything here works from the files alone (``config.json``, groundscope's reports
``reports/<model>/<dataset>.groundscope.json``, ``predictions/``, ``reviews/``,
``skipped.jsonl``): no dataset is re-read, no scorer runs, nothing is written.

A sample's *outcome* under its dataset's primary metric is one of:

- ``errored``: the request failed, so nothing was scored;
- ``excluded``: answered, but the primary metric has no usable score (no reference, judge
  failure, scorer error) and so does not enter the average;
- ``pass`` / ``fail``: the primary metric's value is at least / below ``PASS_THRESHOLD``
  (0.5: exactly right/wrong for 0/1 metrics such as accuracy; "more than half" for
  continuous ones such as ROUGE-L recall).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundscope.bounds import MAX_RUN_FILE_BYTES
from groundscope.compat import default_model_id
from groundscope.errors import StoreError
from groundscope.fileio import read_regular
from groundscope.report.model import DatasetReport
from groundscope.rows import read_rows, read_rows_picked
from groundscope.rundir import read_run_config
from groundscope.store import REPORT_SUFFIX, safe_name, saved_media_roots

PASS_THRESHOLD = 0.5
OUTCOMES = ("pass", "fail", "errored", "excluded")


# ASCII: a note with "…" would make the cut copy of an ASCII text two bytes a character
_CUT_NOTE = " ... [{} more characters not shown]"
CUT_DEPTH = 32  # lists and dicts nested deeper are not shown (orjson reads up to 1,024)
_DEEPER = f"[nested deeper than {CUT_DEPTH} levels: not shown]"
_IDENTITY = frozenset({"sample_id", "repeat", "dataset", "subset"})  # a row's key: never cut


def cut_text(text: Any, limit: int) -> Any:
    """A ``str`` over ``limit`` characters cut there, with a note of how many more there
    were (a text is cut once, where it is read: one that looks cut already is cut again);
    anything else as it is."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return text[:limit] + _CUT_NOTE.format(len(text) - limit)


def cut_texts(value: Any, limit: int, depth: int = 0) -> Any:
    """Every ``str`` in nested lists and dicts cut as :func:`cut_text` does, in place (keys
    kept); a list or dict more than :data:`CUT_DEPTH` levels down is replaced by a note."""
    if isinstance(value, str):
        return cut_text(value, limit)
    if not isinstance(value, dict | list):
        return value
    if depth >= CUT_DEPTH:
        return _DEEPER
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        if isinstance(item, str):
            if len(item) > limit:
                value[key] = cut_text(item, limit)
        elif isinstance(item, dict | list):
            value[key] = cut_texts(item, limit, depth + 1)
    return value


def _cut_row(row: dict[str, Any], limit: int) -> dict[str, Any]:
    """A checked row (a prediction with its sample, or a review) with every text in it cut
    and its nesting bounded, in place, except the fields that name its sample."""
    for key, value in row.items():
        if key not in _IDENTITY and isinstance(value, str | dict | list):
            row[key] = cut_texts(value, limit, 1)
    return row


@dataclass
class SampleRow:
    """One answered (sample, repeat): its predictions line and its reviews lines."""

    dataset: str
    subset: str
    prediction: dict[str, Any]
    reviews: list[dict[str, Any]]

    @property
    def sample_id(self) -> str:
        return str(self.prediction["sample_id"])

    @property
    def repeat(self) -> int:
        return int(self.prediction.get("repeat", 0))

    def ok(self) -> bool:
        return self.prediction.get("status") == "ok"

    def values(self) -> dict[str, float]:
        """Every metric value of the scores that may enter an average."""
        out: dict[str, float] = {}
        for review in self.reviews:
            if review.get("status") == "ok":
                out.update({k: float(v) for k, v in (review.get("values") or {}).items()})
        return out

    def outcome(self, metric: str | None) -> tuple[str, float | None]:
        """``(outcome, value)`` under ``metric`` (see the module docstring)."""
        if not self.ok():
            return "errored", None
        value = self.values().get(metric) if metric else None
        if value is None:
            return "excluded", None
        return ("pass" if value >= PASS_THRESHOLD else "fail"), value


@dataclass
class RunData:
    """A run directory's config, dataset reports and skipped records."""

    run_dir: Path
    config: dict[str, Any]
    model: str
    model_dir: str
    reports: list[DatasetReport] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def media_roots(self) -> tuple[str, ...]:
        """The media roots the run read under (config.json): the page embeds nothing else."""
        return saved_media_roots(self.config, self.run_dir)

    def report(self, dataset: str) -> DatasetReport | None:
        return next((r for r in self.reports if r.dataset == dataset), None)

    def primary_metric(self, dataset: str) -> str | None:
        """The dataset's primary metric, or its first metric when the primary was not run."""
        rep = self.report(dataset)
        if rep is None:
            return None
        metrics = [r.metric for r in rep.metrics]
        if rep.primary_metric in metrics or not metrics:
            return rep.primary_metric
        return metrics[0]

    def datasets(self) -> list[str]:
        names = [r.dataset for r in self.reports]
        for dataset, _ in self.prediction_files():
            if dataset not in names:
                names.append(dataset)
        return names

    def prediction_files(self) -> list[tuple[str, Path]]:
        """``(dataset, path)`` of each predictions file, in the reports' subset order."""
        folder = self.run_dir / "predictions" / self.model_dir
        found: list[tuple[str, str, Path]] = []
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            first = next(read_rows(path, "prediction"), None)
            if first is not None:
                found.append((first["dataset"], first["subset"], path))
        order = {(r.dataset, s): (i, j) for i, r in enumerate(self.reports)
                 for j, s in enumerate(r.subsets)}
        found.sort(key=lambda f: order.get((f[0], f[1]), (len(order), 0)))
        return [(d, p) for d, _, p in found]

    def samples(self, limit: int | None = None, *, text_max: int | None = None) -> Iterator[SampleRow]:
        """Every saved (sample, repeat) with its reviews, file by file; with ``limit``, only
        the first ``limit`` of them (nothing past the cut is read into memory). With
        ``text_max``, each row's texts are cut to that many characters as it is read, and
        its nesting to :data:`CUT_DEPTH` (:func:`cut_texts`): what is held is bounded by what
        is shown, not by the answers."""
        left = limit
        for _, path in self.prediction_files():
            if left is not None and left <= 0:
                return
            latest: dict[tuple[str, int], dict[str, Any]] = {}
            for r in read_rows(path, "prediction"):
                key = (str(r["sample_id"]), int(r.get("repeat", 0)))
                if left is not None and key not in latest and len(latest) >= left:
                    break
                # a later line supersedes (an uncompacted, crashed run)
                latest[key] = r if text_max is None else _cut_row(r, text_max)
            reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
            review_path = self.run_dir / "reviews" / self.model_dir / path.name
            if review_path.exists():  # with a limit, only the shown samples' reviews are checked
                rows = (read_rows(review_path, "review") if limit is None
                        else read_rows_picked(review_path, "review", partial(_among, latest)))
                for row in rows:
                    key = (str(row["sample_id"]), int(row.get("repeat", 0)))
                    if key in latest:
                        reviews.setdefault(key, []).append(
                            row if text_max is None else _cut_row(row, text_max))
            for key, row in latest.items():
                yield SampleRow(row["dataset"], row["subset"], row, reviews.get(key, []))
            if left is not None:
                left -= len(latest)


def _among(keys: dict[tuple[str, int], Any], row: dict[str, Any]) -> bool:
    """Whether a review row not checked yet is to be read: one of ``keys``' samples, or a
    row whose sample it cannot name (checked, so it is an error, never dropped unseen)."""
    sample_id, repeat = row.get("sample_id"), row.get("repeat", 0)
    if type(sample_id) not in (str, int) or type(repeat) is not int:
        return True
    return (str(sample_id), repeat) in keys


def report_files(folder: Path, schema_version: int) -> list[Path]:
    """groundscope's report files in ``reports/<model>/``: ``<dataset>.groundscope.json``;
    in a run directory of schema 1 (before EvalScope's files took ``<dataset>.json``),
    ``<dataset>.json``, unless ``groundscope report`` has since written the dataset's
    ``<dataset>.groundscope.json`` (and EvalScope's file over the old one)."""
    if not folder.is_dir():
        return []
    ours = list(folder.glob(f"*{REPORT_SUFFIX}"))
    if schema_version >= 2:
        return sorted(ours)
    rebuilt = {p.name[:-len(REPORT_SUFFIX)] for p in ours}
    legacy = [p for p in folder.glob("*.json")
              if not p.name.endswith(REPORT_SUFFIX) and p.name[:-len(".json")] not in rebuilt]
    return sorted(ours + legacy)


def _read_report(path: Path) -> DatasetReport:
    """One saved report, bounded (``MAX_RUN_FILE_BYTES``), a regular file, checked."""
    raw = read_regular(path, MAX_RUN_FILE_BYTES)
    if len(raw) > MAX_RUN_FILE_BYTES:
        raise StoreError(f"{path}: over {MAX_RUN_FILE_BYTES} bytes; refused")
    try:
        return DatasetReport.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "report"
        raise StoreError(f"{path}: {where}: {err['msg']}") from None


def load_run(run_dir: str | Path) -> RunData:
    """Read a run directory's config, reports and skipped records (samples are streamed)."""
    root = Path(run_dir)
    config = read_run_config(root)
    model = str(config.get("model_id") or default_model_id(str(config.get("model") or "model")))
    model_dir = safe_name(model)
    if not (root / "predictions" / model_dir).is_dir():
        others = sorted(p.name for p in (root / "predictions").glob("*") if p.is_dir())
        model_dir = others[0] if others else model_dir
    run = RunData(root, config, model, model_dir)
    order = {name: i for i, name in enumerate(config.get("datasets") or [])}
    version = config.get("schema_version")
    reports = [_read_report(p) for p in report_files(root / "reports" / model_dir,
                                     version if isinstance(version, int) else 1)]
    run.reports = sorted(reports, key=lambda r: (order.get(r.dataset, len(order)), r.dataset))
    skipped = root / "skipped.jsonl"
    if skipped.exists():
        run.skipped = list(read_rows(skipped, "skipped"))
    return run
