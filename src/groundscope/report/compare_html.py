"""The comparison page of ``groundscope report RUN_A RUN_B ...`` (one self-contained file).

It shows the runs, the primary metric per subset as bars (one colour per run, each run's
95% CI from its own report), the full score table with deltas and p-values, and the samples
whose primary metric passes in one run and fails in another, with each run's answer. The
page has no script at all; like the run page it can fetch nothing (see ``page.py``).
"""

from __future__ import annotations

import datetime as _dt
from html import escape
from pathlib import Path
from typing import Any

from groundscope.fileio import atomic_write
from groundscope.metrics import OVERALL
from groundscope.report.compare import EXCERPT_CHARS, Comparison, format_delta, format_p
from groundscope.report.page import render_page
from groundscope.report.plots import Bar, bar_chart
from groundscope.report.table import format_score, metric_label

MAX_DISAGREEMENTS = 2000


def write_comparison(cmp: Comparison, out: str | Path) -> Path:
    """Write the comparison page to ``out`` and return its path."""
    path = Path(out)
    generated = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    labels = " vs ".join(f"{s.label} {s.data.model}" for s in cmp.runs)
    body = "\n".join([
        '<header class="gs-head"><h1>groundscope comparison</h1>',
        f'<p class="gs-sub">{escape(labels)} · generated {escape(generated)}</p>',
        '<nav class="gs-nav"><a href="#runs">Runs</a><a href="#scores">Scores</a>'
        '<a href="#disagreements">Disagreements</a></nav></header><main>',
        _runs_section(cmp), _charts_section(cmp), _scores_section(cmp), _disagreements_section(cmp),
        "</main>",
    ])
    atomic_write(path, render_page(f"groundscope comparison · {labels}", body).encode("utf-8"))
    return path


def _runs_section(cmp: Comparison) -> str:
    rows = []
    for side in cmp.runs:
        report = side.data.run_dir / "report.html"
        link = (f'<a href="{escape(report.resolve().as_uri())}">report.html</a>'
                if report.exists() else "—")
        cells = [side.label, side.data.model, str(side.data.run_dir),
                 ", ".join(r.pretty_name for r in side.data.reports)]
        rows.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + f"<td>{link}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("Run", "Model", "Run directory", "Datasets", "Report"))
    return (f'<section id="runs"><h2>Runs</h2><p class="gs-note">{cmp.runs[0].label} is the '
            "baseline: every delta is a later run minus it.</p>"
            f'<table class="gs-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table></section>")


def _charts_section(cmp: Comparison) -> str:
    out = ['<section id="charts"><h2>Primary metric by subset</h2><div class="gs-charts">']
    for ds, metric in cmp.primary.items():
        if metric is None:
            continue
        bars = []
        for r in (r for r in cmp.rows if r.dataset == ds and r.metric == metric):
            for k, side in enumerate(cmp.runs):
                rep = side.data.report(ds)
                row = rep.row(metric, r.subset) if rep else None
                bars.append(Bar(f"{r.subset} {side.label}", r.scores[k],
                                row.ci_low if row else None, row.ci_high if row else None,
                                r.nums[k], emphasis=r.subset == OVERALL, cls=f"gs-run{k % 4}"))
        pretty = next((r.pretty_name for r in cmp.rows if r.dataset == ds), ds)
        out.append(bar_chart(f"{pretty} · {metric_label(metric)}", bars))
    out.append("</div></section>")
    return "\n".join(out)


def _delta_cell(delta: float | None, p: float | None) -> str:
    cls = "num"
    if delta is not None and p is not None and p < 0.05:
        cls += " gs-delta-up" if delta > 0 else " gs-delta-down"
    return f'<td class="{cls}">{escape(format_delta(delta))}</td>'


def _scores_section(cmp: Comparison) -> str:
    heads = ["Dataset", "Metric", "Subset", "Num", *(s.label for s in cmp.runs)]
    for s in cmp.runs[1:]:
        heads += [f"Δ {s.label}", f"p {s.label}", f"paired {s.label}"]
    rows = []
    for r in cmp.rows:
        cells = [f"<td>{escape(c)}</td>" for c in (r.pretty_name, metric_label(r.metric), r.subset)]
        cells.append(f'<td class="num">{escape(" / ".join(map(str, r.nums)))}</td>')
        cells += [f'<td class="num">{escape(format_score(v))}</td>' for v in r.scores]
        for k in range(1, len(cmp.runs)):
            cells.append(_delta_cell(r.deltas[k], r.p_values[k]))
            cells.append(f'<td class="num">{escape(format_p(r.p_values[k]))}</td>')
            cells.append(f'<td class="num">{r.paired[k]}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    note = ("<p class=\"gs-note\">Δ = run minus baseline, in percentage points. p = two-sided "
            "paired sign-flip permutation test on per-sample scores matched by sample id "
            "(exact for few differing samples, else 10,000 seeded random flips); "
            "<i>paired</i> = samples scored in both runs; coloured when p &lt; 0.05.</p>")
    return (f'<section id="scores"><h2>Scores</h2>{note}<table class="gs-table gs-metrics">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


def _answer(outcome: str, value: float | None, text: dict[str, Any] | None) -> str:
    badge = f'<span class="gs-badge gs-badge-{escape(outcome)}">{escape(outcome)}</span>'
    score = f" {escape(format_score(value))}" if value is not None else ""
    answer = "" if text is None else (text.get("prediction") or text.get("error_kind") or "")
    if len(answer) > EXCERPT_CHARS:
        answer = answer[:EXCERPT_CHARS] + "…"
    return f'<td>{badge}{score}<div class="gs-text">{escape(answer)}</div></td>'


def _disagreements_section(cmp: Comparison) -> str:
    total = sum(cmp.matched.values())
    out = ['<section id="disagreements"><h2>Disagreements</h2>',
           f'<p class="gs-note">{len(cmp.disagreements)} of {total} samples present in every run '
           "pass the primary metric in one run and fail it in another.</p>"]
    if not cmp.disagreements:
        out.append("</section>")
        return "\n".join(out)
    rows = []
    for d in cmp.disagreements[:MAX_DISAGREEMENTS]:
        first = next((t for t in d.texts if t), {})
        refs = " | ".join(str(x) for x in first.get("refs", []))
        where = d.subset if len(cmp.primary) == 1 else f"{d.dataset} / {d.subset}"
        cells = [f"<td>{escape(where)}</td>", f"<td><code>{escape(d.sample_id)}</code></td>",
                 f'<td class="gs-text">{escape(str(first.get("question", ""))[:EXCERPT_CHARS])}</td>',
                 f'<td class="gs-text">{escape(refs[:EXCERPT_CHARS])}</td>']
        cells += [_answer(o, v, t) for o, v, t in zip(d.outcomes, d.values, d.texts, strict=True)]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    heads = ["Subset", "Sample", "Question", "Reference", *(s.label for s in cmp.runs)]
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    out.append(f'<table class="gs-table gs-disagree"><thead><tr>{head}</tr></thead>'
               f"<tbody>{''.join(rows)}</tbody></table>")
    if len(cmp.disagreements) > MAX_DISAGREEMENTS:
        out.append(f"<p>… and {len(cmp.disagreements) - MAX_DISAGREEMENTS} more not shown.</p>")
    out.append("</section>")
    return "\n".join(out)

