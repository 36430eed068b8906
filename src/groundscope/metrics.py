"""Scores -> metric results: the mean per subset, an OVERALL row, a 95% CI (a percentile
bootstrap up to ``BOOTSTRAP_MAX_N`` samples, the normal approximation above).

Only ``ScoreStatus.OK`` scores enter a mean; the others are counted as ``excluded`` so the
report can say how many samples a number rests on. OVERALL is the mean over all samples
of all subsets (i.e. subset means weighted by their sample counts), as in EvalScope.

A *ratio* (micro) metric is a weighted mean: a score that carries ``weights[key]`` (e.g. a
grounding score's number of claims, its value being supported / claims) contributes
``weight * value`` to the numerator and ``weight`` to the denominator, so the aggregate is
``sum(part) / sum(whole)`` over the samples, not a mean of per-sample ratios; its CI
resamples samples (a cluster bootstrap). ``num`` stays the number of samples.

A metric gets a row for a subset only if a score of that subset was added with the metric
among its ``keys`` (scorers run on every sample, so in practice every subset; a group
metric, added once per group, only where there are groups).

Results do not depend on the order in which scores arrive (concurrent requests finish in
any order, a resumed run replays the cached ones first): values are sorted before they are
summed or bootstrapped, subsets follow the planned order (else their names) and categories
their names.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from groundscope.types import MetricResult, Score, ScoreStatus

OVERALL = "OVERALL"
BOOTSTRAP_MAX_N = 1000  # above this the normal approximation is used (CLT; agrees to ~1e-3)


def category_of(metadata: Mapping[str, Any]) -> str | None:
    """The category a sample reports under, from its ``category`` field (if any)."""
    value = metadata.get("category")
    return None if value is None or value == "" else str(value)


class MetricAccumulator:
    """Collects per-sample values compactly (8 bytes each) as scores arrive.

    ``subsets``: the planned subset order of the results (unplanned ones follow by name).
    """

    def __init__(self, subsets: Sequence[str] = ()) -> None:
        self._rank = {name: i for i, name in enumerate(subsets)}
        self._values: dict[str, dict[str, array[float]]] = {}
        self._weights: dict[str, dict[str, array[float]]] = {}  # ratio metrics only
        self._weighted: set[str] = set()  # keys with weights in some subset
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
                self._categories = MetricAccumulator(list(self._rank))
            self._categories.add(f"{subset}\x1f{category}", score, keys)
        by_metric = self._values.get(subset)
        if by_metric is None:
            by_metric = self._values[subset] = {}
        for key in keys:
            if key not in by_metric:  # a new metric here: the per-sample path skips this
                by_metric[key] = array("d")
                if key not in self._order:
                    self._order.append(key)
        if score.status is ScoreStatus.OK:
            values, weights = score.values, score.weights
            for key in keys:
                if key in values:
                    column = by_metric[key]
                    column.append(float(values[key]))
                    if weights or key in self._weighted:
                        self._add_weight(subset, key, weights.get(key), len(column))
        else:
            excl = self._excluded.setdefault(subset, {})
            for key in keys:
                excl[key] = excl.get(key, 0) + 1

    def _add_weight(self, subset: str, key: str, weight: float | None, n: int) -> None:
        """Keep ``weight`` for the n-th value of ``key`` (earlier unweighted values count 1)."""
        weights = self._weights.get(subset, {}).get(key)
        if weight is None and weights is None:
            return
        if weights is None:
            self._weighted.add(key)
            weights = self._weights.setdefault(subset, {})[key] = array("d", [1.0] * (n - 1))
        weights.append(1.0 if weight is None else float(weight))

    def subsets(self) -> list[str]:
        """The subsets seen, in planned order (a category key ``subset\x1fcategory`` by its subset)."""
        last = len(self._rank)
        return sorted(self._values, key=lambda s: (self._rank.get(s.split("\x1f", 1)[0], last), s))

    def results(self, *, seed: int = 0, ci: bool = True, overall: bool = True) -> list[MetricResult]:
        """One result per (metric, subset), metric-major, OVERALL after the subsets."""
        out: list[MetricResult] = []
        subsets = self.subsets()
        for key in self._order:
            pooled, pooled_w = array("d"), array("d")
            weighted = any(key in w for w in self._weights.values())
            excluded_total = 0
            for subset in subsets:
                if key not in self._values[subset]:
                    continue  # the metric was not computed for this subset
                vals = self._values[subset][key]
                weights = self._weights.get(subset, {}).get(key)
                if weighted and weights is None:
                    weights = array("d", [1.0] * len(vals))
                excluded = self._excluded.get(subset, {}).get(key, 0)
                out.append(_result(key, subset, vals, excluded, seed, ci, weights))
                pooled.extend(vals)
                pooled_w.extend(weights or ())
                excluded_total += excluded
            if overall and len(subsets) > 1:
                out.append(_result(key, OVERALL, pooled, excluded_total, seed, ci,
                                   pooled_w if weighted else None))
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
            ci: bool, weights: Sequence[float] | None = None) -> MetricResult:
    n = len(vals)
    if weights is None:
        vals = sorted(vals)  # the arrival order must not change a digit (nor the bootstrap)
        mean = sum(vals) / n if n else float("nan")
    else:
        pairs = sorted(zip(vals, weights, strict=True))
        vals, weights = [v for v, _ in pairs], [w for _, w in pairs]
        total = sum(weights)
        mean = sum(v * w for v, w in pairs) / total if total else float("nan")
    low, high = bootstrap_ci(vals, seed=seed, weights=weights) if ci and n else (None, None)
    return MetricResult(metric=key, subset=subset, num=n, score=mean, ci_low=low, ci_high=high,
                        excluded=excluded)


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, resamples: int = 1000,
                 level: float = 0.95,
                 weights: Sequence[float] | None = None) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (weighted: of the ratio).

    With ``weights`` the statistic is ``sum(w * v) / sum(w)`` and samples are resampled with
    their weights (a cluster bootstrap of a micro metric). For more than 1,000 values the
    normal approximation ``mean ± z·se`` is used instead (the two agree to about 1e-3
    there, and it costs nothing; a ratio's se is the linearised one).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    >>> bootstrap_ci([0.5, 0.5], weights=[2.0, 4.0])
    (0.5, 0.5)
    """
    n = len(values)
    if n == 0 or (weights is not None and math.fsum(weights) <= 0):
        return (float("nan"), float("nan"))
    alpha = (1.0 - level) / 2.0
    if n > BOOTSTRAP_MAX_N:  # pure Python: a large run's report does not import numpy
        return _normal_ci(values, weights, alpha)
    if n == 1 and values[0] == values[0]:  # every resample is the one value: what numpy's
        # arithmetic gives, without importing it (76 ms of a `--limit 1` run's 0.6 s)
        one = float(values[0]) if weights is None else (
            float(values[0]) * float(weights[0]) / float(weights[0]))
        return (one, one)
    import numpy as np

    data = np.asarray(values, dtype=float)
    w = None if weights is None else np.asarray(weights, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, min(resamples, 2_000_000 // n))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        if w is None:
            means[start:stop] = data[idx].mean(axis=1)
        else:
            totals = w[idx].sum(axis=1)
            ratio = (data[idx] * w[idx]).sum(axis=1) / np.where(totals > 0, totals, 1.0)
            means[start:stop] = np.where(totals > 0, ratio, np.nan)
    means = means[~np.isnan(means)]
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))


def _normal_ci(values: Sequence[float], weights: Sequence[float] | None,
               alpha: float) -> tuple[float, float]:
    """``mean ± z·se`` (a ratio's se linearised), clipped to [0, 1]; sums are exact (fsum)."""
    from statistics import NormalDist

    n = len(values)
    z = NormalDist().inv_cdf(1.0 - alpha)
    if weights is None:
        mean = math.fsum(values) / n
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
        half = z * sd / math.sqrt(n)
    else:
        total = math.fsum(weights)
        mean = math.fsum(map(operator.mul, values, weights)) / total
        spread = math.fsum((wt * (x - mean)) ** 2 for x, wt in zip(values, weights, strict=True))
        half = z * math.sqrt((n / (n - 1)) * spread) / total
    return (max(0.0, mean - half), min(1.0, mean + half))


def mean_of(results: Iterable[MetricResult], metric: str, subset: str = OVERALL) -> float | None:
    """Look up one aggregate (convenience for the API and tests)."""
    for r in results:
        if r.metric == metric and r.subset == subset:
            return r.score
    return None
