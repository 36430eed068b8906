"""The report's histogram counts and latency percentiles, in pure Python: numpy's figures to
the bit, and no numpy imported to draw them (a report of more than ``BOOTSTRAP_MAX_N``
samples, and the run that writes it, then never loads numpy: ~12 MB of peak RSS)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from groundscope.report.plots import bin_counts, percentile

_VALUES = st.lists(st.one_of(st.floats(min_value=0.0, max_value=1e4, allow_nan=False),
                             st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 2.5]),
                             st.just(float("nan"))), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(values=_VALUES, hi=st.one_of(st.floats(min_value=1e-3, max_value=1e4),
                                     st.sampled_from([1, 3, 0.5])),
       bins=st.sampled_from([1, 6, 10, 30]))
def test_bin_counts_are_numpys_histogram_of_the_clipped_values(
        values: list[float], hi: float, bins: int) -> None:
    counts, edges = bin_counts(values, 0.0, hi, bins)
    theirs, their_edges = np.histogram(np.clip(np.asarray(values, dtype=float), 0.0, hi),
                                       bins=bins, range=(0.0, hi))
    assert counts == theirs.tolist()
    assert edges == their_edges.tolist()


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1,
                       max_size=60),
       q=st.sampled_from([0, 37.5, 50, 90, 99, 100]))
def test_percentile_is_numpys_default_percentile(values: list[float], q: float) -> None:
    assert percentile(sorted(values), q) == float(np.percentile(np.asarray(values), q))


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


@settings(max_examples=300, deadline=None)
@given(value=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
       weight=st.one_of(st.none(), st.floats(min_value=1e-6, max_value=1e6)))
def test_the_bootstrap_of_one_value_is_numpys_without_numpy(
        value: float, weight: float | None) -> None:
    """Every resample of one value is that value: the interval is the statistic of it,
    computed as numpy's bootstrap computed it (``v * w / w`` for a ratio)."""
    from groundscope.metrics import bootstrap_ci

    data, w = np.asarray([value]), None if weight is None else np.asarray([weight])
    idx = np.zeros((1000, 1), dtype=int)
    means = data[idx].mean(axis=1) if w is None else (data[idx] * w[idx]).sum(axis=1) / w[idx].sum(
        axis=1)
    expected = (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))
    weights = None if weight is None else [weight]
    assert bootstrap_ci([value], weights=weights) == expected


_ONE_SAMPLE = """
import sys
from groundscope.metrics import bootstrap_ci
print(bootstrap_ci([0.25]), bootstrap_ci([0.1], weights=[3.0]), "numpy" in sys.modules)
"""


def test_the_bootstrap_of_one_value_imports_no_numpy() -> None:
    out = subprocess.run([sys.executable, "-c", _ONE_SAMPLE], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == f"(0.25, 0.25) ({0.1 * 3.0 / 3.0!r}, {0.1 * 3.0 / 3.0!r}) False"
