"""Scores -> metric results: the mean per subset, an OVERALL row, a 95% bootstrap CI.

Only ``ScoreStatus.OK`` scores enter a mean; the others are counted as ``excluded`` so the
report can say how many samples a number rests on. OVERALL is the mean over all samples
of all subsets (i.e. subset means weighted by their sample counts), as in EvalScope.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from groundscope.types import MetricResult, Score, ScoreStatus

OVERALL = "OVERALL"
_BOOTSTRAP_MAX_N = 5000  # above this the normal approximation is used (CLT; equal to 1e-3)


def category_of(metadata: Mapping[str, Any]) -> str | None:
    """The category a sample reports under, from its ``category`` field (if any)."""
    value = metadata.get("category")
    return None if value is None or value == "" else str(value)


class MetricAccumulator:
    """Collects per-sample values compactly (8 bytes each) as scores arrive."""

    def __init__(self) -> None:
        self._values: dict[str, dict[str, array[float]]] = {}
        self._excluded: dict[str, dict[str, int]] = {}
        self._order: list[str] = []
        self._categories: MetricAccumulator | None = None

    def add(self, subset: str, score: Score, keys: Sequence[str],
            category: str | None = None) -> None:
        """Record one score; ``keys`` are the metric keys its scorer produces.

        With a ``category`` (e.g. a legacy MCQ record's ``category`` column) the score also
        counts toward that category's own rows within the subset.
        """
        if category is not None:
            if self._categories is None:
                self._categories = MetricAccumulator()
            self._categories.add(f"{subset}\x1f{category}", score, keys)
        by_metric = self._values.setdefault(subset, {})
        for key in keys:
            if key not in self._order:
                self._order.append(key)
        if score.status is ScoreStatus.OK:
            for key in keys:
                if key in score.values:
                    by_metric.setdefault(key, array("d")).append(float(score.values[key]))
        else:
            excl = self._excluded.setdefault(subset, {})
            for key in keys:
                excl[key] = excl.get(key, 0) + 1

    def subsets(self) -> list[str]:
        return list(self._values)

    def results(self, *, seed: int = 0, ci: bool = True, overall: bool = True) -> list[MetricResult]:
        """One result per (metric, subset), metric-major, OVERALL after the subsets."""
        out: list[MetricResult] = []
        subsets = self.subsets()
        for key in self._order:
            pooled = array("d")
            excluded_total = 0
            for subset in subsets:
                vals = self._values[subset].get(key, array("d"))
                excluded = self._excluded.get(subset, {}).get(key, 0)
                out.append(_result(key, subset, vals, excluded, seed, ci))
                pooled.extend(vals)
                excluded_total += excluded
            if overall and len(subsets) > 1:
                out.append(_result(key, OVERALL, pooled, excluded_total, seed, ci))
        return out


    def category_results(self, *, seed: int = 0, ci: bool = True) -> list[tuple[str, MetricResult]]:
        """``(category, result)`` per (metric, subset, category); empty without categories."""
        if self._categories is None:
            return []
        out = []
        for r in self._categories.results(seed=seed, ci=ci, overall=False):
            subset, category = r.subset.split("\x1f", 1)
            out.append((category, replace(r, subset=subset)))
        return out

    def rows(self, *, seed: int = 0) -> list[tuple[str | None, MetricResult]]:
        """Subset rows (category None) followed by category rows."""
        return [(None, r) for r in self.results(seed=seed)] + self.category_results(seed=seed)


def _result(key: str, subset: str, vals: Sequence[float], excluded: int, seed: int,
            ci: bool) -> MetricResult:
    n = len(vals)
    mean = sum(vals) / n if n else float("nan")
    low, high = bootstrap_ci(vals, seed=seed) if ci and n else (None, None)
    return MetricResult(metric=key, subset=subset, num=n, score=mean, ci_low=low, ci_high=high,
                        excluded=excluded)


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, resamples: int = 1000,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean.

    For more than 5,000 values the normal approximation ``mean ± z·sd/√n`` is used instead
    (the two agree to about 1e-3 there, and it costs nothing).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    import numpy as np

    data = np.asarray(values, dtype=float)
    n = data.size
    if n == 0:
        return (float("nan"), float("nan"))
    alpha = (1.0 - level) / 2.0
    if n > _BOOTSTRAP_MAX_N:
        from statistics import NormalDist

        z = NormalDist().inv_cdf(1.0 - alpha)
        half = z * float(data.std(ddof=1)) / n**0.5
        mean = float(data.mean())
        return (max(0.0, mean - half), min(1.0, mean + half))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, min(resamples, 2_000_000 // n))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = data[idx].mean(axis=1)
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))


def mean_of(results: Iterable[MetricResult], metric: str, subset: str = OVERALL) -> float | None:
    """Look up one aggregate (convenience for the API and tests)."""
    for r in results:
        if r.metric == metric and r.subset == subset:
            return r.score
    return None
