"""The report's histogram counts and latency percentiles, in pure Python: numpy's figures to
the bit, and no numpy imported to draw them (a report of more than ``BOOTSTRAP_MAX_N``
samples, and the run that writes it, then never loads numpy: ~12 MB of peak RSS)."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

from groundscope.report.plots import bin_counts, percentile

_SPECIAL = [0.0, 0.1, 0.25, 0.5, 1.0, 2.5, 1e-3, 5e-324, 1e4]


def _values(rng: random.Random, *, nan: bool) -> list[float]:
    """Up to 60 values: spread over decades, ties, edges, subnormals (and NaN if asked)."""
    out = []
    for _ in range(rng.randint(0 if nan else 1, 60)):
        pick = rng.random()
        if pick < 0.3:
            out.append(rng.choice(_SPECIAL))
        elif nan and pick < 0.35:
            out.append(float("nan"))
        else:
            out.append(rng.expovariate(1.0) * 10 ** rng.randint(-3, 3))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_bin_counts_are_numpys_histogram_of_the_clipped_values(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        values = _values(rng, nan=True)
        hi = rng.choice([1, 3, 0.5, rng.uniform(1e-3, 1e4)])
        bins = rng.choice([1, 6, 10, 30])
        counts, edges = bin_counts(values, 0.0, hi, bins)
        theirs, their_edges = np.histogram(np.clip(np.asarray(values, dtype=float), 0.0, hi),
                                           bins=bins, range=(0.0, hi))
        assert counts == theirs.tolist(), (values, hi, bins)
        assert edges == their_edges.tolist(), (hi, bins)


@pytest.mark.parametrize("seed", range(4))
def test_percentile_is_numpys_default_percentile(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        values = _values(rng, nan=False)
        for q in (0, 37.5, 50, 90, 99, 100):
            ours = percentile(sorted(values), q)
            assert ours == float(np.percentile(np.asarray(values), q)), (values, q)


def test_a_nan_latency_gives_nan_percentiles_as_numpy_did() -> None:
    assert np.isnan(percentile([0.1, float("nan")], 50))
    assert np.isnan(float(np.percentile(np.asarray([0.1, float("nan")]), 50)))


_DRAW = """
import sys
from groundscope.report import html, plots
text = html._latency("m", [0.2, 0.21, 0.5, 1.5]) + plots.histogram(
    "BLEU", [0.0, 0.5, 1.0], lo=0.0, hi=1.0, bins=10, fmt=str)
print("p50 0.355s" in text, "numpy" in sys.modules)
"""


def test_drawing_the_latency_section_and_a_histogram_imports_no_numpy() -> None:
    out = subprocess.run([sys.executable, "-c", _DRAW], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]


@pytest.mark.parametrize("weighted", [False, True])
def test_the_bootstrap_of_one_value_is_numpys_without_numpy(weighted: bool) -> None:
    """Every resample of one value is that value: the interval is the statistic of it,
    computed as numpy's bootstrap computed it (``v * w / w`` for a ratio)."""
    from groundscope.metrics import bootstrap_ci

    rng = random.Random(5)
    for _ in range(300):
        value = rng.choice([0.0, 1.0, 0.1, 1 / 3]) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
        weight = rng.uniform(1e-6, 1e6) if weighted else None
        data, w = np.asarray([value]), None if weight is None else np.asarray([weight])
        idx = np.zeros((1000, 1), dtype=int)
        means = (data[idx].mean(axis=1) if w is None
                 else (data[idx] * w[idx]).sum(axis=1) / w[idx].sum(axis=1))
        expected = (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))
        weights = None if weight is None else [weight]
        assert bootstrap_ci([value], weights=weights) == expected, (value, weight)


_ONE_SAMPLE = """
import sys
from groundscope.metrics import bootstrap_ci
print(bootstrap_ci([0.25]), bootstrap_ci([0.1], weights=[3.0]), "numpy" in sys.modules)
"""


def test_the_bootstrap_of_one_value_imports_no_numpy() -> None:
    out = subprocess.run([sys.executable, "-c", _ONE_SAMPLE], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == f"(0.25, 0.25) ({0.1 * 3.0 / 3.0!r}, {0.1 * 3.0 / 3.0!r}) False"
