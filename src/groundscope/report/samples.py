"""The per-sample data of the HTML report: one compact JSON record per (sample, repeat).

The page embeds every record in one JSON blob and renders it page by page in the browser,
so the Python side only shapes data: messages with media replaced by indexes into a
``MediaTable``, the prediction, the references, each scorer's status / values / extracted
answer / detail, and the outcome under the primary metric (see ``rundata``). Long texts are
cut at ``TEXT_MAX`` characters as the rows are read (``RunData.samples(text_max=...)``) so
one runaway answer cannot bloat the page, nor the memory that builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundscope.media import media_roots
from groundscope.report.embed import MediaTable
from groundscope.report.rundata import OUTCOMES, RunData, SampleRow
from groundscope.report.table import metric_label
from groundscope.rowcodec import origin_dir

TEXT_MAX = 20_000


def _compact(value: Any) -> Any:
    """Detail values with floats rounded (JSON-able as they come; texts were cut as read)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, Mapping):
        return {str(k): _compact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_compact(v) for v in value]
    return value


def _messages(messages: list[dict[str, Any]], media: MediaTable, base: Path | None) -> list[Any]:
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            parts: list[dict[str, Any]] = [{"t": "text", "x": content}]
        else:
            parts = []
            for part in content or []:
                if part.get("type") == "text":
                    parts.append({"t": "text", "x": part.get("text", "")})
                else:
                    kind = str(part.get("type"))
                    parts.append({"t": kind, "m": media.ref(kind, str(part.get("media")), base)})
        out.append({"role": msg.get("role", "user"), "parts": parts})
    return out


def _scores(reviews: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in reviews:
        score = {"scorer": r.get("scorer"), "status": r.get("status"),
                 "values": {k: round(float(v), 4) for k, v in (r.get("values") or {}).items()}}
        if r.get("extracted") is not None:
            score["extracted"] = r["extracted"]
        if r.get("detail"):
            score["detail"] = _compact(r["detail"])
        out.append(score)
    return out


FLAGS = ("hallucinated", "judge_failed")


def _contradicted(detail: Any) -> bool:
    """Whether a review's detail holds a contradicted claim: the grounding scorer's count
    (``contradicted``), or a claim list with a ``contradicted`` verdict."""
    if not isinstance(detail, Mapping):
        return False
    count = detail.get("contradicted")
    if isinstance(count, int | float) and not isinstance(count, bool) and count > 0:
        return True
    claims = detail.get("claims")
    return isinstance(claims, list) and any(
        isinstance(c, Mapping) and str(c.get("verdict", "")).lower() == "contradicted"
        for c in claims[:10_000])


def sample_flags(reviews: list[dict[str, Any]]) -> list[str]:
    """What the sample browser filters by beside the outcome: ``hallucinated`` (a claim of
    the answer is contradicted, whatever the primary score says) and ``judge_failed`` (a
    judge broke its contract on one of the sample's scorers)."""
    flags = []
    if any(_contradicted(r.get("detail")) or (r.get("values") or {}).get("hallucinated_answers")
           for r in reviews):
        flags.append("hallucinated")
    if any(r.get("status") == "judge_failed" for r in reviews):
        flags.append("judge_failed")
    return flags


def sample_record(row: SampleRow, primary: str | None, media: MediaTable,
                  where: tuple[int, int], bases: dict[str, Path | None]) -> dict[str, Any]:
    """The JSON record of one (sample, repeat); ``where`` = (dataset index, subset index);
    ``bases``: the media base folder of each origin file met so far (filled in here: one
    ``realpath`` per dataset file, not per sample). ``row`` as :func:`collect` reads it:
    its texts cut at ``TEXT_MAX``."""
    pred = row.prediction
    sample = pred.get("sample") or {}
    origin = str(sample.get("origin", ""))
    origin_file = origin.rpartition(":")[0]
    if origin_file not in bases:
        bases[origin_file] = origin_dir(origin, media_roots())
    outcome, value = row.outcome(primary)
    rec: dict[str, Any] = {
        "id": row.sample_id, "repeat": row.repeat, "ds": where[0], "sub": where[1],
        "origin": origin, "outcome": outcome, "pv": None if value is None else round(value, 4),
        "status": pred.get("status"), "latency": pred.get("latency_s"),
        "attempts": pred.get("attempts"), "question": sample.get("question", ""),
        "messages": _messages(sample.get("messages") or [], media, bases[origin_file]),
        "prediction": pred.get("prediction"), "refs": list(sample.get("target") or []),
        "scores": _scores(row.reviews), "flags": sample_flags(row.reviews),
    }
    optional = {"reasoning": pred.get("reasoning"), "error": pred.get("error"),
                "error_kind": pred.get("error_kind"), "choices": sample.get("choices") or None,
                "metadata": _compact(sample.get("metadata")) or None}
    rec.update({k: v for k, v in optional.items() if v})
    return rec


def collect(run: RunData, media: MediaTable, limit: int | None = None) -> dict[str, Any]:
    """Every sample record (the first ``limit``) plus the index tables the page needs."""
    datasets: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    records: list[dict[str, Any]] = []
    latencies: dict[str, list[float]] = {}
    values: dict[str, dict[str, list[float]]] = {}
    bases: dict[str, Path | None] = {}
    for row in run.samples(limit, text_max=TEXT_MAX):
        if row.dataset not in index:
            index[row.dataset] = len(datasets)
            rep = run.report(row.dataset)
            primary = run.primary_metric(row.dataset)
            datasets.append({"name": row.dataset, "pretty": rep.pretty_name if rep else row.dataset,
                             "primary": primary, "primary_label": metric_label(primary or ""),
                             "subsets": []})
        ds = datasets[index[row.dataset]]
        if row.subset not in ds["subsets"]:
            ds["subsets"].append(row.subset)
        where = (index[row.dataset], ds["subsets"].index(row.subset))
        records.append(sample_record(row, ds["primary"], media, where, bases))
        latencies.setdefault(row.dataset, []).append(float(row.prediction.get("latency_s") or 0.0))
        for key, v in row.values().items():
            values.setdefault(row.dataset, {}).setdefault(key, []).append(v)
    counts = {o: sum(1 for r in records if r["outcome"] == o) for o in OUTCOMES}
    counts.update({f: sum(1 for r in records if f in r["flags"]) for f in FLAGS})
    return {"datasets": datasets, "samples": records, "counts": counts,
            "latencies": latencies, "values": values}
