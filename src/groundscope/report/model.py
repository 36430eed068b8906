"""The versioned JSON report: one ``DatasetReport`` per dataset, gathered in a ``Report``.

The JSON files under ``reports/<model>/<dataset>.json`` are part of the public API
(``schema_version`` changes on any incompatible change).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from groundscope.metrics import OVERALL
from groundscope.types import MetricResult

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


class Summary(_Model):
    """The execution summary: what was asked, what came back, what was skipped."""

    requested: int = 0
    succeeded: int = 0
    errored: int = 0
    skipped: int = 0
    cached: int = 0
    changed: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    unscored: dict[str, int] = Field(default_factory=dict)  # subset -> predictions without a score
    warnings: list[str] = Field(default_factory=list)  # one line each, shown with the table


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


class Report(_Model):
    """What ``run_task`` returns: every dataset's report plus where the run lives."""

    run_dir: str
    model: str
    datasets: list[DatasetReport]

    def dataset(self, name: str) -> DatasetReport:
        for d in self.datasets:
            if d.dataset == name:
                return d
        raise KeyError(name)

    def table(self) -> str:
        from groundscope.report.table import render_table

        return render_table(self.datasets)

    def __str__(self) -> str:
        return self.table()
