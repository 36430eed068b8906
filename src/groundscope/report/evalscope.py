"""The report file in EvalScope's schema: ``reports/<model>/<dataset>.json``.

Scripts written for EvalScope read this file, so it has the shape of EvalScope's v1
``Report`` (EvalScope v1.10.0, ``evalscope/report/report.py``): ``name``
(``<model>@<dataset>``), ``dataset_name``, ``dataset_pretty_name``, ``dataset_description``,
``model_name``, ``score`` (the first metric's), ``metrics`` -> ``categories`` -> ``subsets``,
``analysis``, ``perf_metrics``, ``num``. Metric names are EvalScope's (``mean_Rouge-L-R``,
``mean_acc``: ``compat.report_metric_name``); every subset sits in the category
``["default"]``, as EvalScope's general datasets do. The one extra key is one EvalScope's
newer reader (schema 2, which migrates v1 files and refuses unknown keys) knows:
``execution_summary`` (requested / succeeded / errored / incomplete; here also ``skipped``,
the bad records, which that reader ignores). That reader picks the primary metric from the
benchmark's metadata, so no primary metric is named here.

Scores are rounded to 4 decimals, and a category's and a metric's ``score`` / ``macro_score``
are computed from the rounded subset scores exactly as EvalScope's validators recompute them
(sample-weighted and plain means), so loading the file with EvalScope's ``Report`` changes no
number. The primary metric comes first, so ``score`` is the primary metric's under every
EvalScope reader. Left out, as EvalScope has no place for them: subsets whose metric has no
usable score, the OVERALL rows (EvalScope derives them), category rows within a subset,
confidence intervals and the judge / grounding figures; all of these are in groundscope's own
report, ``<dataset>.groundscope.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundscope.compat import report_metric_name
from groundscope.metrics import OVERALL
from groundscope.report.model import DatasetReport, MetricRow

__all__ = ["evalscope_report"]

_DIGITS = 4  # EvalScope's normalize_score
_CATEGORY = ["default"]  # EvalScope's category of a subset no category_map names


def _micro(items: Sequence[dict[str, Any]]) -> float:
    total = sum(i["num"] for i in items)
    return round(sum(i["score"] * i["num"] for i in items) / total, _DIGITS) if total else 0.0


def _macro(items: Sequence[dict[str, Any]]) -> float:
    return round(sum(i["score"] for i in items) / len(items), _DIGITS) if items else 0.0


def _metric(key: str, rows: Sequence[MetricRow]) -> dict[str, Any]:
    subsets = [{"name": r.subset, "score": round(float(r.score or 0.0), _DIGITS), "num": r.num,
                "is_aggregate": False} for r in rows]
    category = {"name": _CATEGORY, "num": sum(s["num"] for s in subsets),
                "score": _micro(subsets), "macro_score": _macro(subsets), "subsets": subsets}
    return {"name": report_metric_name(key), "num": category["num"], "score": _micro([category]),
            "macro_score": _macro([category]), "categories": [category]}


def evalscope_report(rep: DatasetReport) -> dict[str, Any]:
    """``rep`` as EvalScope's report JSON (see the module docstring)."""
    by_metric: dict[str, list[MetricRow]] = {}
    for row in rep.metrics:
        if row.category is None and row.subset != OVERALL and row.score is not None:
            by_metric.setdefault(row.metric, []).append(row)
    keys = sorted(by_metric, key=lambda k: k != rep.primary_metric)  # stable: primary first
    metrics = [_metric(k, by_metric[k]) for k in keys]
    s = rep.summary
    out: dict[str, Any] = {
        "name": f"{rep.model}@{rep.dataset}",
        "dataset_name": rep.dataset,
        "dataset_pretty_name": rep.pretty_name,
        "dataset_description": "",
        "model_name": rep.model,
    }
    if metrics:  # no metric: no score (EvalScope's newer reader says None, never 0)
        out["score"] = metrics[0]["score"]
    out |= {
        "metrics": metrics,
        "analysis": "N/A",
        "perf_metrics": None,
    }
    out["execution_summary"] = {
        "requested": s.requested, "succeeded": s.succeeded, "errored": s.errored,
        "incomplete": s.succeeded < s.requested or s.skipped > 0, "skipped": s.skipped,
        "subsets": {},
    }
    first = metrics[0]["categories"] if metrics else []
    out["num"] = sum(sub["num"] for c in first for sub in c["subsets"])
    return out
