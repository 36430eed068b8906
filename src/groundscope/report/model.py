"""The versioned JSON report: one ``DatasetReport`` per dataset, gathered in a ``Report``.

The JSON files under ``reports/<model>/<dataset>.json`` are part of the public API
(``schema_version`` changes on any incompatible change).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from groundscope.metrics import OVERALL
from groundscope.summary import Summary
from groundscope.types import MetricResult

__all__ = ["SCHEMA_VERSION", "DatasetReport", "MetricRow", "Report", "Summary"]

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MetricRow(_Model):
    """One aggregate: a metric over a subset (or OVERALL)."""

    metric: str
    subset: str
    num: int
    score: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    excluded: int = 0
    category: str | None = None

    @classmethod
    def from_result(cls, r: MetricResult, category: str | None = None) -> MetricRow:
        score = None if math.isnan(r.score) else r.score
        return cls(metric=r.metric, subset=r.subset, num=r.num, score=score,
                   ci_low=r.ci_low, ci_high=r.ci_high, excluded=r.excluded, category=category)


class DatasetReport(_Model):
    schema_version: int = SCHEMA_VERSION
    model: str
    dataset: str
    pretty_name: str
    primary_metric: str
    subsets: list[str]
    summary: Summary
    metrics: list[MetricRow]
    extra: dict[str, Any] = Field(default_factory=dict)

    def row(self, metric: str, subset: str | None = None) -> MetricRow | None:
        """The row of ``metric`` for ``subset``; by default OVERALL, or the only subset."""
        if subset is None:
            subset = OVERALL if len(self.subsets) > 1 else (self.subsets[0] if self.subsets else OVERALL)
        for r in self.metrics:
            if r.metric == metric and r.subset == subset and r.category is None:
                return r
        return None

    def score(self, metric: str | None = None, subset: str | None = None) -> float | None:
        row = self.row(metric or self.primary_metric, subset)
        return row.score if row else None


class Report(Mapping[str, DatasetReport]):
    """What ``run_task`` returns: a mapping from dataset name to that dataset's report, as
    EvalScope's ``run_task`` returns (``result["general_vqa"]``), plus where the run lives.

    >>> rep = DatasetReport(model="m", dataset="general_vqa", pretty_name="General-VQA",
    ...                     primary_metric="rouge-l-r", subsets=["s"], summary=Summary(),
    ...                     metrics=[MetricRow(metric="rouge-l-r", subset="s", num=2, score=0.5)])
    >>> report = Report(run_dir="outputs/run", model="m", datasets=[rep])
    >>> list(report), report["general_vqa"].score(), "general_vmcq" in report
    (['general_vqa'], 0.5, False)
    """

    __slots__ = ("_by_name", "datasets", "model", "page", "run_dir")

    def __init__(self, run_dir: str, model: str, datasets: Sequence[DatasetReport],
                 page: str | None = None) -> None:
        self.run_dir = str(run_dir)
        self.model = model
        self.datasets = list(datasets)
        self.page = page  # report.html as written now; None: not written (the log says why)
        self._by_name = {d.dataset: d for d in self.datasets}

    def __getitem__(self, name: str) -> DatasetReport:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a dataset of this run "
                           f"(its datasets: {', '.join(self._by_name) or 'none'})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def dataset(self, name: str) -> DatasetReport:
        """The report of dataset ``name`` (``report[name]``)."""
        return self[name]

    def nothing_evaluated(self, *, shard: bool = False) -> str:
        """One line naming each dataset with no answered sample, and why; empty when every
        dataset has one. A ``shard`` that asked nothing of a dataset (no record, or only bad
        ones, dealt to it) is not at fault: ``groundscope merge`` judges the whole run."""
        skipped = Path(self.run_dir) / "skipped.jsonl"
        return "; ".join(f"{rep.dataset}: nothing was evaluated: {why}" for rep in self.datasets
                         if not (shard and rep.summary.requested == 0)
                         and (why := rep.summary.why_nothing(skipped)))

    def table(self) -> str:
        from groundscope.report.table import render_table

        return render_table(self.datasets)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Report(run_dir={self.run_dir!r}, model={self.model!r}, datasets={list(self)!r})"
