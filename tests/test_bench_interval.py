"""The regression guard's interval of a median ratio (``benchmarks/_common.median_interval``):
its coverage, computed here by brute force over every way the values can fall around the
median, is the smallest interval of order statistics that reaches 95 %."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _common():  # benchmarks/ is a folder of scripts, not a package: loaded by its path
    spec = importlib.util.spec_from_file_location("bench_common", BENCH / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_common", module)
    spec.loader.exec_module(module)
    return module


def _coverage(n: int, k: int) -> float:
    """P(order statistic k < median < order statistic n+1-k), each of n values falling below
    the median with probability 1/2, counted over all 2**n outcomes."""
    inside = sum(1 for below in itertools.product((0, 1), repeat=n) if k <= sum(below) <= n - k)
    return inside / 2 ** n


@pytest.mark.parametrize("n", range(1, 17))
def test_the_interval_is_the_narrowest_that_covers_95_percent(n: int) -> None:
    values = [float(v) for v in range(1, n + 1)]  # order statistic k is the value k
    got = _common().median_interval(values)
    ks = [k for k in range(1, n // 2 + 1) if _coverage(n, k) >= 0.95]
    if not ks:
        assert got is None
    else:
        k = max(ks)
        assert got == (float(k), float(n + 1 - k))


def test_the_values_are_sorted_first() -> None:
    assert _common().median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)
