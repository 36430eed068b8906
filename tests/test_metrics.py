"""Aggregation: means, OVERALL weighting, exclusions, confidence intervals."""

import math

from groundscope.metrics import MetricAccumulator, bootstrap_ci
from groundscope.types import Score, ScoreStatus


def ok(v: float) -> Score:
    return Score("s", "acc", ScoreStatus.OK, {"accuracy": v})


def test_means_overall_and_exclusions() -> None:
    acc = MetricAccumulator()
    for v in (1, 0, 1, 1):
        acc.add("a", ok(v), ("accuracy",))
    for v in (0, 0):
        acc.add("b", ok(v), ("accuracy",))
    acc.add("b", Score("s", "acc", ScoreStatus.JUDGE_FAILED), ("accuracy",))
    res = {(r.subset): r for r in acc.results()}
    assert res["a"].score == 0.75 and res["a"].num == 4
    assert res["b"].score == 0.0 and res["b"].num == 2 and res["b"].excluded == 1
    # OVERALL is weighted by sample counts: 3 of 6, not the mean of 0.75 and 0.
    assert res["OVERALL"].score == 0.5 and res["OVERALL"].num == 6
    assert res["OVERALL"].excluded == 1


def test_single_subset_has_no_overall() -> None:
    acc = MetricAccumulator()
    acc.add("only", ok(1.0), ("accuracy",))
    assert [r.subset for r in acc.results()] == ["only"]


def test_all_excluded_gives_nan_not_zero() -> None:
    acc = MetricAccumulator()
    acc.add("a", Score("s", "acc", ScoreStatus.ERROR), ("accuracy",))
    (r,) = acc.results()
    assert r.num == 0 and math.isnan(r.score) and r.excluded == 1


def test_bootstrap_ci_brackets_the_mean_and_is_seeded() -> None:
    vals = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_ci(vals, seed=1)
    assert low < 0.3 < high
    assert 0.18 < low < 0.25 and 0.35 < high < 0.42
    assert bootstrap_ci(vals, seed=1) == (low, high)


def test_normal_approximation_for_large_n() -> None:
    vals = [1.0, 0.0] * 5000
    low, high = bootstrap_ci(vals)
    assert abs((low + high) / 2 - 0.5) < 1e-9
    assert abs((high - low) / 2 - 1.96 * 0.5 / 100) < 1e-3
