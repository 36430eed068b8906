"""``report.html``: one self-contained page per run directory.

``write_html(run_dir)`` reads the run directory (never the dataset, never the network;
media previews only from inside the media roots the run recorded) and writes
``<run_dir>/report.html`` with: the execution summary (with the usage: requests, tokens
and cost per step and model), the metrics table (the terminal
table's labels and score format, plus 95% CI columns), charts (per-subset bars with CI
error bars, score distributions, request latency; the BLEU / ROUGE family in one chart), a
per-sample browser (filters by outcome and by flag: hallucinated, judge_failed; sorting by
score; search, paging; rendered in the browser from one embedded JSON blob) and the
redacted config.
The page opens offline and fetches nothing (see ``report/page.py``).
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from html import escape
from pathlib import Path
from typing import Any

import orjson

from groundscope.fileio import atomic_write
from groundscope.media import chosen_media_roots, media_roots_in_force
from groundscope.metrics import BOOTSTRAP_MAX_N, OVERALL
from groundscope.report.embed import DEFAULT_BUDGET, REPORT_SAMPLES, MediaTable
from groundscope.report.model import DatasetReport
from groundscope.report.page import asset, render_page, table
from groundscope.report.plots import Bar, bar_chart, histogram, percentile
from groundscope.report.rundata import PASS_THRESHOLD, RunData, load_run
from groundscope.report.samples import FLAGS, collect
from groundscope.report.table import cut_notes, format_score, metric_label
from groundscope.usage import Entry, UsageSummary, cost_text, step_rows

log = logging.getLogger("groundscope")
_SKIPPED_SHOWN = 500


def write_html(run_dir: str | Path, *, media_budget: int = DEFAULT_BUDGET,
               max_samples: int | None = None) -> Path:
    """Write ``<run_dir>/report.html`` from the run directory's files and return its path.

    ``max_samples`` caps the samples in the browser, charts and latency plot (the metrics
    table always covers the whole run); the page says so when it cuts.
    """
    started = time.perf_counter()
    run = load_run(run_dir)
    media = MediaTable(budget=media_budget)
    # the run's honoured roots and --media-root given now, not this process's cwd
    with media_roots_in_force((*run.media_roots, *chosen_media_roots())):
        data = collect(run, media, max_samples)
    total = sum(r.summary.requested for r in run.reports)
    data["cut"] = total if max_samples is not None and total > len(data["samples"]) else None
    body = _body(run, data)
    blob = {"datasets": data["datasets"], "samples": data["samples"], "counts": data["counts"],
            "media": media.entries, "blobs": media.blobs, "threshold": PASS_THRESHOLD}
    page = render_page(f"groundscope · {run.model} · {run.run_dir.name}", body, data=blob,
                       script=asset("report.js"))
    path = run.run_dir / "report.html"
    atomic_write(path, page.encode("utf-8"))
    log.debug("wrote %s (%d samples, %.1f MB) in %.2fs", path, len(data["samples"]),
              path.stat().st_size / 1e6, time.perf_counter() - started)
    return path


def _body(run: RunData, data: dict[str, Any]) -> str:
    generated = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    names = ", ".join(r.pretty_name for r in run.reports) or "no dataset report"
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("summary", "Summary"), ("metrics", "Metrics"), ("plots", "Charts"),
        ("samples", "Samples"), ("config", "Config")))
    return "\n".join([
        '<header class="gs-head"><h1>groundscope report</h1>',
        f'<p class="gs-sub"><b>{escape(run.model)}</b> · {escape(names)} · run '
        f'<code>{escape(str(run.run_dir))}</code> · generated {escape(generated)}</p>',
        f'<nav class="gs-nav">{nav}</nav></header><main>',
        _summary_section(run),
        _metrics_section(run),
        _plots_section(run, data),
        _samples_section(data),
        _config_section(run),
        "</main>",
    ])


def _summary_section(run: RunData) -> str:
    out = ['<section id="summary"><h2>Execution summary</h2>']
    for rep in run.reports:
        s = rep.summary
        stats = [("requested", s.requested), ("succeeded", s.succeeded), ("errored", s.errored),
                 ("skipped", s.skipped), ("cached", s.cached), ("changed", s.changed)]
        cards = "".join(f'<div class="gs-stat gs-stat-{k}"><span>{v}</span>{k}</div>'
                        for k, v in stats if k != "changed" or v)
        out.append(f"<h3>{escape(rep.pretty_name)}</h3><div class=\"gs-stats\">{cards}</div>")
        out += [f'<p class="gs-note gs-warning">{escape(w)}</p>' for w in s.warnings]
        if s.errors_by_kind:
            rows = sorted(s.errors_by_kind.items(), key=lambda kv: -kv[1])
            out.append(table(["Error kind", "Samples"], [list(r) for r in rows], numeric={1}))
        out.append(_usage_block(s.usage))
        notes = cut_notes(rep.extra)
        if notes:
            items = "".join(f"<li>{escape(n)}</li>" for n in notes)
            out.append(f'<div class="gs-note gs-bounded"><b>Bounded judge work</b> (see '
                       f"<code>judge.grounding</code>): <ul>{items}</ul></div>")
        if rep.extra:
            out.append(f"<details><summary>More statistics ({escape(', '.join(rep.extra))})"
                       f'</summary><div class="gs-detail">{_value_html(rep.extra)}</div></details>')
    if run.skipped:
        items = "".join(f"<li><code>{escape(str(r.get('problem', r)))}</code></li>"
                        for r in run.skipped[:_SKIPPED_SHOWN])
        more = len(run.skipped) - _SKIPPED_SHOWN
        tail = f"<li>… and {more} more (see skipped.jsonl)</li>" if more > 0 else ""
        out.append(f"<details><summary>{len(run.skipped)} skipped bad record(s)</summary>"
                   f'<ul class="gs-skipped">{items}{tail}</ul></details>')
    if not run.reports:
        out.append("<p>No dataset report was found in this run directory.</p>")
    out.append("</section>")
    return "\n".join(out)


def _usage_block(usage: UsageSummary) -> str:
    """Requests and tokens per step and model (billed; served from a cache apart) and cost."""
    total = usage.total
    if not total.billed.requests and not total.cached.requests:
        return ""
    rows = [[step, model, *_usage_cells(entry)] for step, model, entry in step_rows(usage)]
    rows.append(["total", "", *_usage_cells(total)])
    headers = ["Step", "Model", "Requests", "Prompt tokens", "of them cached", "Completion tokens",
               "of them reasoning", "Cost", "Cached replies (not billed)"]
    note = cost_text(None, usage.unpriced)
    note_html = f'<p class="gs-note">{escape(note)}: its cost is not counted.</p>' if note else ""
    return (f'<div class="gs-usage"><h4>Usage</h4>'
            f'{table(headers, rows, cls="gs-table gs-usage-table", numeric=set(range(2, 9)))}'
            f"{note_html}</div>")


def _usage_cells(entry: Entry) -> list[Any]:
    b = entry.billed
    cost = "–" if entry.cost is None else f"{entry.cost:.4g}"
    return [b.requests, b.prompt_tokens, b.cached_tokens, b.completion_tokens, b.reasoning_tokens,
            cost, entry.cached.requests]


def _value_html(value: Any) -> str:
    """Any JSON value as nested HTML: objects as definition lists, rows of objects as tables."""
    if isinstance(value, dict):
        items = "".join(f"<dt>{escape(str(k))}</dt><dd>{_value_html(v)}</dd>" for k, v in value.items())
        return f"<dl>{items}</dl>"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            cols = list(dict.fromkeys(k for v in value for k in v))
            rows = "".join("<tr>" + "".join(f"<td>{_value_html(v.get(c))}</td>" for c in cols) + "</tr>"
                           for v in value)
            head = "".join(f"<th>{escape(str(c))}</th>" for c in cols)
            return f'<table class="gs-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
        return "<ul>" + "".join(f"<li>{_value_html(v)}</li>" for v in value) + "</ul>"
    if isinstance(value, float):
        return escape(f"{value:.4g}")
    return "—" if value is None else escape(str(value))


def _metrics_section(run: RunData) -> str:
    rows = []
    for rep in run.reports:
        for r in rep.metrics:
            subset = r.subset if r.category is None else f"{r.subset} · {r.category}"
            rows.append([rep.model, rep.pretty_name, metric_label(r.metric), subset, r.num,
                         format_score(r.score), format_score(r.ci_low), format_score(r.ci_high),
                         r.excluded])
    headers = ["Model", "Dataset", "Metric", "Subset", "Num", "Score", "95% CI low",
               "95% CI high", "Excluded"]
    note = ("<p class=\"gs-note\">Scores are means over the samples with a usable score; "
            "<i>Excluded</i> counts samples left out of a mean (request failed, no reference, "
            "judge failure). CIs are 95% intervals of the mean (of the ratio for a ratio "
            f"metric): a percentile bootstrap of 1,000 resamples up to {BOOTSTRAP_MAX_N:,} "
            "samples, the normal approximation (mean ± 1.96 standard errors) above.</p>")
    return (f'<section id="metrics"><h2>Metrics</h2>{note}'
            f'{table(headers, rows, cls="gs-table gs-metrics", numeric={4, 5, 6, 7, 8})}</section>')


def _metric_order(rep: DatasetReport, primary: str | None) -> list[str]:
    keys = list(dict.fromkeys(r.metric for r in rep.metrics))
    if primary in keys:
        keys.remove(primary)
        keys.insert(0, primary)
    return keys


def is_text_metric(key: str) -> bool:
    """BLEU-n and ROUGE-x-y: a family of 13 charted together, not one chart each."""
    return key.startswith(("bleu-", "rouge-"))


def _text_family(rep: DatasetReport, keys: list[str]) -> str:
    """One chart of the BLEU / ROUGE family: a bar per metric, over all subsets (95% CI)."""
    bars = []
    for key in keys:
        rows = [r for r in rep.metrics if r.metric == key and r.category is None]
        row = next((r for r in rows if r.subset == OVERALL), rows[0] if rows else None)
        if row is not None:
            bars.append(Bar(metric_label(key), row.score, row.ci_low, row.ci_high, row.num))
    return bar_chart("BLEU / ROUGE, all subsets", bars, plot_w=220) if bars else ""


def _plots_section(run: RunData, data: dict[str, Any]) -> str:
    out = ['<section id="plots"><h2>Charts</h2>']
    for rep in run.reports:
        primary = run.primary_metric(rep.dataset)
        keys = _metric_order(rep, primary)
        family = [k for k in keys if is_text_metric(k)]
        bars, dists = [_text_family(rep, family)] if len(family) > 1 else [], []
        values = data["values"].get(rep.dataset, {})
        for key in keys:
            if len(family) > 1 and key in family and key != primary:
                continue  # in the family's chart (the primary keeps its own, by subset)
            rows = [r for r in rep.metrics if r.metric == key and r.category is None]
            bars.append(bar_chart(metric_label(key), [
                Bar(r.subset, r.score, r.ci_low, r.ci_high, r.num, emphasis=r.subset == OVERALL)
                for r in rows]))
            if values.get(key):
                dists.append(histogram(metric_label(key), values[key], lo=0.0, hi=1.0, bins=10,
                                       fmt=lambda v: f"{v * 100:.0f}%"))
        out.append(f"<h3>{escape(rep.pretty_name)}: scores by subset (95% CI)</h3>")
        out.append(f'<div class="gs-charts">{"".join(bars)}</div>')
        out.append(f"<h3>{escape(rep.pretty_name)}: score distributions</h3>")
        out.append(f'<div class="gs-charts">{"".join(dists) or "<p>No scored sample.</p>"}</div>')
        out.append(_latency(rep.pretty_name, data["latencies"].get(rep.dataset, [])))
    out.append("</section>")
    return "\n".join(out)


def _latency(name: str, latencies: list[float]) -> str:
    head = f"<h3>{escape(name)}: request latency</h3>"
    if not latencies:
        return head + "<p>No request was recorded.</p>"
    ordered = sorted(map(float, latencies))  # finite, >= 0: rows.py checks latency_s
    p50, p90, p99 = (percentile(ordered, q) for q in (50, 90, 99))
    top = ordered[-1]
    chart = histogram("Latency per request (seconds)", latencies, lo=0.0, hi=max(top, 1e-3),
                      bins=30, fmt=lambda v: f"{v:.3g}s", unit="requests", width=560)
    stats = (f'<p class="gs-note">p50 {p50:.3g}s · p90 {p90:.3g}s · p99 {p99:.3g}s · '
             f"max {top:.3g}s · {len(ordered)} requests (cached ones keep their first latency)</p>")
    return f'{head}<div class="gs-charts">{chart}</div>{stats}'


def _samples_section(data: dict[str, Any]) -> str:
    counts = data["counts"]
    options = "".join(f'<option value="{o}">{o} ({counts[o]})</option>'
                      for o in ("pass", "fail", "errored", "excluded"))
    flags = "".join(f'<option value="{f}">{f} ({counts[f]})</option>' for f in FLAGS)
    return f"""<section id="samples"><h2>Samples</h2>
<p class="gs-note">Outcome under each dataset's primary metric: <i>pass</i> when its value is
at least {PASS_THRESHOLD:g}, <i>fail</i> below, <i>errored</i> when the request failed,
<i>excluded</i> when the sample has no usable primary score. A sample with a contradicted
claim is badged <i>hallucinated</i> whatever its score; <i>judge_failed</i> marks a judge
that broke its contract on one of its scorers. Click a row for its details.</p>
{_cut_note(data)}
<div class="gs-controls">
<label>Outcome <select id="gs-outcome"><option value="">all ({len(data["samples"])})</option>
{options}</select></label>
<label>Flag <select id="gs-flag"><option value="">any</option>{flags}</select></label>
<label>Sort <select id="gs-sort"><option value="">run order</option>
<option value="asc">score, lowest first</option><option value="desc">score, highest first</option>
</select></label>
<label>Subset <select id="gs-subset"><option value="">all</option></select></label>
<label>Search <input id="gs-search" type="search" placeholder="id, question, answer, reference…"></label>
<span id="gs-count" class="gs-count" data-count="0"></span>
</div>
<div id="gs-list" class="gs-list"></div>
<div class="gs-pager"><button id="gs-prev" type="button">‹ Previous</button>
<span id="gs-page"></span><button id="gs-next" type="button">Next ›</button></div>
<noscript><p>The sample browser needs JavaScript.</p></noscript>
</section>"""


def _cut_note(data: dict[str, Any]) -> str:
    if not data.get("cut"):
        return ""
    return (f'<p class="gs-note gs-cut">This page shows the first {len(data["samples"])} of '
            f'{data["cut"]} samples (the charts too; the metrics table covers all). '
            f'<code>groundscope report RUN_DIR</code> rebuilds it with up to {REPORT_SAMPLES:,}.</p>')


def _config_section(run: RunData) -> str:
    text = orjson.dumps(run.config, option=orjson.OPT_INDENT_2).decode("utf-8")
    return (f'<section id="config"><h2>Config</h2><details><summary>The task config '
            f"(secrets replaced by ***)</summary><pre>{escape(text)}</pre></details></section>")
