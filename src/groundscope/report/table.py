"""The terminal table, in EvalScope's look: ``Model | Dataset | Metric | Subset | Num | Score``.

Names in it come from datasets and run directories: every cell is shown with
``terminal.visible`` (control characters and bidi overrides as visible escapes).
"""

from __future__ import annotations

from collections.abc import Sequence

from groundscope.report.model import DatasetReport
from groundscope.terminal import visible

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
    """A score as a percentage with at most one decimal.

    >>> format_score(0.24), format_score(0.3125), format_score(0.007), format_score(None)
    ('24%', '31.2%', '0.7%', 'n/a')
    """
    if value is None:
        return "n/a"
    text = f"{value * 100:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    if text == "-0":
        text = "0"
    return f"{text}%"


def render_table(reports: Sequence[DatasetReport]) -> str:
    """The grid table of every metric row of every dataset report."""
    from tabulate import tabulate

    rows = []
    for rep in reports:
        for r in rep.metrics:
            subset = r.subset if r.category is None else f"{r.subset} · {r.category}"
            rows.append([visible(rep.model), visible(rep.pretty_name), visible(metric_label(r.metric)),
                         visible(subset), r.num, format_score(r.score)])
    headers = ["Model", "Dataset", "Metric", "Subset", "Num", "Score"]
    return tabulate(rows, headers=headers, tablefmt="grid", colalign=("left",) * 4 + ("right",) * 2)


def render_summary(reports: Sequence[DatasetReport]) -> str:
    """One line per dataset: requested / succeeded / errored / skipped, and exclusions."""
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
        lines.append(visible(f"{rep.pretty_name}: " + ", ".join(parts)))
    return "\n".join(lines)
