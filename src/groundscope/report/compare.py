"""Compare runs: scores side by side, deltas, a paired significance test, disagreements.

``compare_runs([run_a, run_b, ...])`` reads each run directory (read-only) and, per dataset,
subset (and OVERALL) and metric, gives every run's score (the same mean as its report), the
delta of each later run against the first, and a two-sided p-value for that delta.

The test is a paired sign-flip permutation test on per-sample scores matched by
``(dataset, subset, sample_id)`` (a sample's repeats are averaged first). Under the null
hypothesis that the two runs are exchangeable, each paired difference is as likely to have
either sign, so the p-value is the share of random sign flips whose mean difference is at
least as far from zero as the observed one. It is exact (every sign pattern is enumerated)
when at most ``log2(resamples)`` differences are non-zero, and otherwise estimated from
``resamples`` seeded random flips with the add-one correction, so it is never 0. It needs no
normality assumption and suits 0/1 metrics (it is then an exact McNemar-style test) as well
as continuous ones. The delta itself is over all samples of each run; the test uses the
samples present in both.

A *disagreement* is a sample whose primary metric passes in one run and fails in another
(see ``rundata`` for pass/fail).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundscope.metrics import OVERALL
from groundscope.report.rundata import RunData, load_run
from groundscope.terminal import visible

EXCERPT_CHARS = 400  # of a question, reference or answer on the comparison page

SampleKey = tuple[str, str, str]  # dataset, subset, sample_id


def paired_permutation_test(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000,
                            seed: int = 0) -> float:
    """Two-sided p-value that paired samples ``a`` and ``b`` have the same mean.

    >>> paired_permutation_test([0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1])  # exact: 2 of 64
    0.03125
    >>> paired_permutation_test([1, 0, 1], [1, 0, 1])
    1.0
    """
    import numpy as np

    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    d = d[np.abs(d) > 1e-12]
    n = int(d.size)
    if n == 0:
        return 1.0
    observed = abs(float(d.sum()))
    tol = 1e-9 * max(1.0, observed)
    if 2**n <= resamples:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        sums = np.abs((2 * bits - 1) @ d)
        return float(np.count_nonzero(sums >= observed - tol)) / 2**n
    rng = np.random.default_rng(seed)
    total = float(d.sum())
    hits, done, chunk = 0, 0, max(1, 2_000_000 // n)
    while done < resamples:
        m = min(chunk, resamples - done)
        bits = np.unpackbits(rng.integers(0, 256, size=(m, (n + 7) // 8), dtype=np.uint8),
                             axis=1, count=n)
        sums = np.abs(2.0 * (bits @ d) - total)  # sum of s_i * d_i with s_i = 2 * bit_i - 1
        hits += int(np.count_nonzero(sums >= observed - tol))
        done += m
    return (hits + 1) / (resamples + 1)


@dataclass
class RunSide:
    """One run reduced to what a comparison needs."""

    label: str
    data: RunData
    per_sample: dict[SampleKey, dict[str, float]] = field(default_factory=dict)
    pooled: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    outcomes: dict[SampleKey, tuple[str, float | None]] = field(default_factory=dict)
    texts: dict[SampleKey, dict[str, Any]] = field(default_factory=dict)


def _load_side(label: str, run_dir: str | Path) -> RunSide:
    side = RunSide(label, load_run(run_dir))
    sums: dict[SampleKey, dict[str, list[float]]] = {}
    outs: dict[SampleKey, list[tuple[str, float | None]]] = {}
    for row in side.data.samples(text_max=EXCERPT_CHARS):  # only excerpts are shown
        key = (row.dataset, row.subset, row.sample_id)
        for metric, v in row.values().items():
            side.pooled.setdefault((row.dataset, row.subset, metric), []).append(v)
            sums.setdefault(key, {}).setdefault(metric, []).append(v)
        outs.setdefault(key, []).append(row.outcome(side.data.primary_metric(row.dataset)))
        if key not in side.texts:
            sample = row.prediction.get("sample") or {}
            side.texts[key] = {"question": sample.get("question", ""),
                               "refs": sample.get("target") or [],
                               "prediction": row.prediction.get("prediction"),
                               "error_kind": row.prediction.get("error_kind")}
    side.per_sample = {k: {m: sum(v) / len(v) for m, v in ms.items()} for k, ms in sums.items()}
    for key, results in outs.items():
        values = [v for _, v in results if v is not None]
        if values:
            mean = sum(values) / len(values)
            side.outcomes[key] = ("pass" if mean >= 0.5 else "fail", mean)
        else:
            errored = all(o == "errored" for o, _ in results)
            side.outcomes[key] = ("errored" if errored else "excluded", None)
    return side


@dataclass
class CompareRow:
    """One (dataset, subset, metric) across runs; deltas and p-values vs the first run."""

    dataset: str
    pretty_name: str
    subset: str
    metric: str
    scores: list[float | None]
    nums: list[int]
    deltas: list[float | None]
    p_values: list[float | None]
    paired: list[int]


@dataclass
class Disagreement:
    dataset: str
    subset: str
    sample_id: str
    outcomes: list[str]
    values: list[float | None]
    texts: list[dict[str, Any] | None]


@dataclass
class Comparison:
    runs: list[RunSide]
    rows: list[CompareRow]
    disagreements: list[Disagreement]
    matched: dict[str, int]  # per dataset: samples present in every run
    primary: dict[str, str | None]


@dataclass
class _DatasetRows:
    """What a dataset's comparison rows range over; dicts as ordered sets (first appearance)."""

    pretty: str
    metrics: dict[str, None] = field(default_factory=dict)
    subsets: dict[str, None] = field(default_factory=dict)


def _layout(runs: list[RunSide]) -> list[tuple[str, str, list[str], list[str]]]:
    """(dataset, pretty name, metrics, subsets) in order of first appearance: each run's
    report first, then the scores it pooled."""
    layout: dict[str, _DatasetRows] = {}
    for side in runs:
        for name in side.data.datasets():
            rep = side.data.report(name)
            rows = layout.setdefault(name, _DatasetRows(rep.pretty_name if rep else name))
            if rep is not None:
                rows.metrics.update(dict.fromkeys(r.metric for r in rep.metrics))
                rows.subsets.update(dict.fromkeys(rep.subsets))
            for ds, subset, metric in side.pooled:
                if ds == name:
                    rows.subsets[subset] = None
                    rows.metrics[metric] = None
    return [(name, rows.pretty, list(rows.metrics), list(rows.subsets))
            for name, rows in layout.items()]


def _row(runs: list[RunSide], ds: str, pretty: str, subset: str, metric: str,
         subsets: list[str], seed: int) -> CompareRow:
    scope = subsets if subset == OVERALL else [subset]
    scores, nums = [], []
    for side in runs:
        vals = [v for s in scope for v in side.pooled.get((ds, s, metric), [])]
        scores.append(sum(vals) / len(vals) if vals else None)
        nums.append(len(vals))
    deltas: list[float | None] = [None]
    p_values: list[float | None] = [None]
    paired = [0]
    base = runs[0].per_sample
    for k, side in enumerate(runs[1:], start=1):
        a, b = [], []
        for key, vals in side.per_sample.items():
            if key[0] == ds and key[1] in scope and metric in vals and metric in base.get(key, {}):
                a.append(base[key][metric])
                b.append(vals[metric])
        first, score = scores[0], scores[k]
        deltas.append(None if first is None or score is None else score - first)
        p_values.append(paired_permutation_test(a, b, seed=seed) if a else None)
        paired.append(len(a))
    return CompareRow(ds, pretty, subset, metric, scores, nums, deltas, p_values, paired)


def compare_runs(run_dirs: Sequence[str | Path], *, seed: int = 0) -> Comparison:
    """Compare two or more run directories (the first is the baseline)."""
    runs = [_load_side(f"[{i + 1}]", d) for i, d in enumerate(run_dirs)]
    rows: list[CompareRow] = []
    primary: dict[str, str | None] = {}
    for ds, pretty, metrics, subsets in _layout(runs):
        primary[ds] = next((s.data.primary_metric(ds) for s in runs if s.data.report(ds)), None)
        scopes = subsets + ([OVERALL] if len(subsets) > 1 else [])
        rows += [_row(runs, ds, pretty, sub, m, subsets, seed) for m in metrics for sub in scopes]
    keys = list(dict.fromkeys(k for side in runs for k in side.outcomes))
    disagreements, matched = [], {}
    for key in keys:
        outs = [side.outcomes.get(key, ("missing", None)) for side in runs]
        names = [o for o, _ in outs]
        if "missing" not in names:
            matched[key[0]] = matched.get(key[0], 0) + 1
        if "pass" in names and "fail" in names:
            disagreements.append(Disagreement(*key, names, [v for _, v in outs],
                                              [side.texts.get(key) for side in runs]))
    return Comparison(runs, rows, disagreements, matched, primary)


def format_delta(delta: float | None) -> str:
    """A difference of two scores in percentage points.

    >>> format_delta(0.0312), format_delta(-0.1), format_delta(0.0), format_delta(None)
    ('+3.1 pp', '-10 pp', '0 pp', 'n/a')
    """
    if delta is None:
        return "n/a"
    text = f"{delta * 100:+.1f}".removesuffix(".0")
    return "0 pp" if text in ("+0", "-0") else f"{text} pp"


def format_p(p: float | None) -> str:
    """A p-value, starred below 0.05.

    >>> format_p(0.0001), format_p(0.0312), format_p(0.5), format_p(None)
    ('<0.001 *', '0.031 *', '0.5', 'n/a')
    """
    if p is None:
        return "n/a"
    text = "<0.001" if p < 0.001 else f"{p:.3f}".rstrip("0").rstrip(".")
    return f"{text} *" if p < 0.05 else text


def render_comparison(cmp: Comparison, *, max_listed: int = 30) -> str:
    """The terminal view: the runs, the score table, and the disagreements (names from the
    runs shown with ``terminal.visible``)."""
    from tabulate import tabulate

    from groundscope.report.table import format_score, metric_label

    lines = ["Runs (the first is the baseline):"]
    lines += [visible(f"  {s.label} {s.data.model}  {s.data.run_dir}") for s in cmp.runs]
    headers = ["Dataset", "Metric", "Subset", "Num", *(s.label for s in cmp.runs)]
    for s in cmp.runs[1:]:
        headers += [f"Δ {s.label}", f"p {s.label}"]
    rows = []
    for r in cmp.rows:
        nums = sorted(set(r.nums))
        cells = [visible(r.pretty_name), visible(metric_label(r.metric)), visible(r.subset),
                 "/".join(map(str, r.nums))
                 if len(nums) > 1 else nums[0], *(format_score(v) for v in r.scores)]
        for k in range(1, len(cmp.runs)):
            cells += [format_delta(r.deltas[k]), format_p(r.p_values[k])]
        rows.append(cells)
    lines.append(tabulate(rows, headers=headers, tablefmt="grid",
                          colalign=("left",) * 3 + ("right",) * (len(headers) - 3)))
    lines.append("p: paired sign-flip permutation test on per-sample scores matched by sample id "
                 "(* = p < 0.05).")
    total = sum(cmp.matched.values())
    lines.append(f"Disagreements (primary metric passes in one run and fails in another): "
                 f"{len(cmp.disagreements)} of {total} samples present in every run")
    for d in cmp.disagreements[:max_listed]:
        verdicts = "  ".join(f"{s.label} {o}" for s, o in zip(cmp.runs, d.outcomes, strict=True))
        lines.append(visible(f"  {d.dataset} / {d.subset} / {d.sample_id}: {verdicts}"))
    if len(cmp.disagreements) > max_listed:
        lines.append(f"  … and {len(cmp.disagreements) - max_listed} more (see the comparison page)")
    return "\n".join(lines)
