"""The terminal table, in EvalScope's look: ``Model | Dataset | Metric | Subset | Num | Score``.

Names in it come from datasets and run directories: every cell is shown with
``terminal.visible`` (control characters and bidi overrides as visible escapes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Protocol

from groundscope.bounds import MAX_REFERENCES
from groundscope.terminal import visible
from groundscope.usage import UsageSummary, usage_line


class RowView(Protocol):
    """What the table reads of a metric row (``report.model.MetricRow``)."""

    @property
    def metric(self) -> str: ...
    @property
    def subset(self) -> str: ...
    @property
    def category(self) -> str | None: ...
    @property
    def num(self) -> int: ...
    @property
    def score(self) -> float | None: ...
    @property
    def excluded(self) -> int: ...


class SummaryView(Protocol):
    """What the summary line reads of an execution summary (``summary.Summary``)."""

    @property
    def requested(self) -> int: ...
    @property
    def succeeded(self) -> int: ...
    @property
    def errored(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def cached(self) -> int: ...
    @property
    def usage(self) -> UsageSummary: ...


class DatasetView(Protocol):
    """What the table reads of a dataset's report (``report.model.DatasetReport``, which
    renders itself with this module: the protocols keep the import one-way)."""

    @property
    def model(self) -> str: ...
    @property
    def pretty_name(self) -> str: ...
    @property
    def summary(self) -> SummaryView: ...
    @property
    def metrics(self) -> Sequence[RowView]: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...

_ROUGE_STAT = {"r": "Recall", "p": "Precision", "f": "F1"}
_FIXED_LABELS = {
    "accuracy": "Accuracy ↑",
    "exact_match": "ExactMatch ↑",
    "grounding": "Grounding ↑",
    "grounding_claims": "Grounding (claims) ↑",
    "hallucination": "Hallucination ↓",
    "hallucinated_answers": "Hallucinated answers ↓",
    "completeness": "Completeness ↑",
    "consistency": "Consistency ↑",
    "consistent_correct": "Consistent and correct ↑",
    "judge_agreement": "Judge agreement ↑",
    "judge_human_accuracy": "Judge vs human ↑",
    "judge_human_kappa": "Judge vs human · κ ↑",
    "grounding_human_accuracy": "Grounding judge vs human ↑",
    "grounding_human_kappa": "Grounding judge vs human · κ ↑",
}


def metric_label(key: str) -> str:
    """The display label of a canonical metric key.

    >>> metric_label("rouge-l-r"), metric_label("bleu-1"), metric_label("accuracy")
    ('ROUGE ↑ · L · Recall', 'BLEU ↑ · 1', 'Accuracy ↑')
    """
    if key in _FIXED_LABELS:
        return _FIXED_LABELS[key]
    if key.startswith("bleu-"):
        return f"BLEU ↑ · {key.split('-')[1]}"
    if key.startswith("rouge-"):
        _, variant, stat = key.split("-")
        return f"ROUGE ↑ · {variant.upper()} · {_ROUGE_STAT[stat]}"
    return key


def format_score(value: float | None) -> str:
    """A score as EvalScope's table shows it: the score as its report stores it (4 decimals),
    as a percentage rounded half-up to one decimal, trailing zeros dropped
    (``evalscope/metrics/semantics/formatting.py``).

    >>> format_score(0.24), format_score(0.3125), format_score(0.007), format_score(None)
    ('24%', '31.3%', '0.7%', 'n/a')
    """
    if value is None or not math.isfinite(value):
        return "n/a"
    tenths = Decimal(str(round(value, 4) * 100)) * 10 + Decimal("0.5")
    rounded = tenths.to_integral_value(rounding=ROUND_FLOOR) / 10
    return f"{format(rounded.normalize(), 'f') if rounded else '0'}%"


def render_table(reports: Sequence[DatasetView]) -> str:
    """The grid table of every metric row of every dataset report."""
    from tabulate import tabulate

    rows = []
    for rep in reports:
        for r in rep.metrics:
            subset = r.subset if r.category is None else f"{r.subset} · {r.category}"
            rows.append([visible(rep.model), visible(rep.pretty_name), visible(metric_label(r.metric)),
                         visible(subset), r.num, format_score(r.score)])
    headers = ["Model", "Dataset", "Metric", "Subset", "Num", "Score"]
    # EvalScope's look (evalscope/report/combinator.py): box-drawing "simple_grid", tabulate's
    # default alignment (Num right, the formatted Score left)
    return tabulate(rows, headers=headers, tablefmt="simple_grid")


def cut_notes(extra: Mapping[str, Any]) -> list[str]:
    """What the fan-out bounds cut, from a dataset report's ``extra``: one phrase each
    (empty when nothing was cut).

    >>> extra = {"grounding": {"bounds": {"max_claims": 32, "max_claim_chars": 500},
    ...     "overall": {"cut": {"answers_with_claims_cut": 1, "claims_over_max_claims": 4968}}}}
    >>> cut_notes(extra)
    ['claims not verified in 1 answer(s): 4968 over max_claims (32)']
    """
    block = extra.get("grounding") or {}
    cut = (block.get("overall") or {}).get("cut") or {}
    b = block.get("bounds") or {}
    claims = [f"{cut[key]} {text}" for key, text in (
        ("claims_over_max_claims", f"over max_claims ({b.get('max_claims')})"),
        ("claims_over_max_claim_chars", f"longer than max_claim_chars ({b.get('max_claim_chars')})"),
    ) if cut.get(key)]
    notes = []
    if claims:
        answers = cut.get("answers_with_claims_cut", 0)
        notes.append(f"claims not verified in {answers} answer(s): {', '.join(claims)}")
    if cut.get("records_over_max_elements"):
        notes.append(f"{cut['records_over_max_elements']} record(s) over max_elements "
                     f"({b.get('max_elements')}) not scored for completeness")
    if cut.get("group_members_over_max_group_size"):
        notes.append(f"{cut['group_members_over_max_group_size']} paraphrase group member(s) "
                     f"over max_group_size ({b.get('max_group_size')}) left out of consistency")
    if cut.get("references_over_max_references"):
        notes.append(f"{cut['references_over_max_references']} reference(s) over "
                     f"{MAX_REFERENCES} per answer not compared for consistency")
    return notes


def render_summary(reports: Sequence[DatasetView]) -> str:
    """One line per dataset: requested / succeeded / errored / skipped, and exclusions; then
its usage line (requests and tokens per step and model, cached apart, cost), if any."""
    lines = []
    for rep in reports:
        s = rep.summary
        parts = [f"requested {s.requested}", f"succeeded {s.succeeded}", f"errored {s.errored}",
                 f"skipped {s.skipped} bad record{'s' if s.skipped != 1 else ''}"]
        if s.cached:
            parts.append(f"reused {s.cached} from cache")
        judge = rep.extra.get("judge") or {}
        if judge.get("judged"):
            parts.append(f"judged {judge['judged']}, judge_failed {judge.get('judge_failed', 0)}")
        excluded = {r.metric: r.excluded for r in rep.metrics if r.excluded}
        if excluded:
            worst = max(excluded.values())
            parts.append(f"up to {worst} sample(s) excluded from a metric (no reference / failed)")
        parts += [f"bounded: {note}" for note in cut_notes(rep.extra)]
        lines.append(visible(f"{rep.pretty_name}: " + ", ".join(parts)))
        usage = usage_line(s.usage)
        if usage:
            lines.append(visible(f"{rep.pretty_name} {usage}"))
    return "\n".join(lines)
