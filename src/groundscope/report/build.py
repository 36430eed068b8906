"""The one report builder of ``eval``, ``score`` and ``report``: a dataset's aggregates and
execution summary, with the judge and grounding figures read back from its reviews, become
its ``DatasetReport``, written to ``reports/<model>/<dataset>.groundscope.json`` with its
EvalScope-schema twin ``<dataset>.json`` beside it (``report/evalscope.py``); ``report.html``
last."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from groundscope.report.evalscope import evalscope_report
from groundscope.report.grounding import add_grounding_stats
from groundscope.report.model import DatasetReport, MetricRow
from groundscope.summary import read_rate_limits

if TYPE_CHECKING:
    from groundscope.config import JudgeConfig
    from groundscope.metrics import MetricAccumulator
    from groundscope.pricing import Price
    from groundscope.store import RunStore
    from groundscope.summary import Summary

log = logging.getLogger("groundscope")


class DatasetTotals(Protocol):
    """What a dataset's report is made of (``plan.DatasetRun``)."""

    name: str
    pretty_name: str
    primary_metric: str
    subsets: list[str]
    summary: Summary
    acc: MetricAccumulator
    scored: Mapping[str, set[tuple[str, int]]] | None


def build_dataset_report(store: RunStore, run: DatasetTotals, *, model: str, seed: int,
                         judge: JudgeConfig | None,
                         pricing: Mapping[str, Price] | None = None) -> DatasetReport:
    """The dataset's report (subsets in their planned order, else as scored), written in
    both formats; its usage priced at ``pricing``. ``score`` / ``report`` take the rate-limit
    figures the eval saved."""
    run.summary.usage.price(pricing or {})
    if not run.summary.rate_limits:
        run.summary.rate_limits = read_rate_limits(store.run_dir)
    rep = DatasetReport(
        model=model, dataset=run.name, pretty_name=run.pretty_name,
        primary_metric=run.primary_metric, subsets=run.acc.subsets() or run.subsets,
        summary=run.summary,
        metrics=[MetricRow.from_result(r, c) for c, r in run.acc.rows(seed=seed)],
    )
    if judge is not None:  # the judge's modules only where a judge is configured
        from groundscope.report.judge import add_judge_stats

        rep = add_judge_stats(rep, judge, store, only=run.scored)
    rep = add_grounding_stats(rep, judge, store, only=run.scored)
    store.write_report(run.name, rep.model_dump(mode="json"), evalscope_report(rep))
    return rep


def write_page(run_dir: Path, *, end_of_run: bool = False) -> Path | None:
    """report.html, written last: a rendering failure is logged, never costs the other
    outputs (None). ``end_of_run``: within the budget the end of ``eval`` affords."""
    try:
        from groundscope.report.embed import END_OF_RUN_BUDGET, END_OF_RUN_SAMPLES, REPORT_SAMPLES
        from groundscope.report.html import write_html

        if end_of_run:
            return write_html(run_dir, media_budget=END_OF_RUN_BUDGET, max_samples=END_OF_RUN_SAMPLES)
        return write_html(run_dir, max_samples=REPORT_SAMPLES)
    except Exception as exc:
        log.error("could not write report.html: %s: %s", type(exc).__name__, exc)
        return None
