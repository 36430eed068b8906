"""Work on a finished run directory without calling the evaluated model.

``rescore_run`` scores the saved predictions again (new scorers, a fixed scorer, a judge
added later) and rewrites ``reviews/`` and ``reports/``; ``rebuild_report`` only
re-aggregates the saved reviews into the JSON reports, the table and the HTML page.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from groundscope.config import TaskConfig, load_config
from groundscope.errors import one_error
from groundscope.jsonl import read_jsonl
from groundscope.media import media_roots_in_force
from groundscope.metrics import MetricAccumulator, category_of
from groundscope.report.evalscope import evalscope_report
from groundscope.report.grounding import add_grounding_stats
from groundscope.report.judge import add_judge_stats
from groundscope.report.model import DatasetReport, MetricRow, Report, Summary
from groundscope.rundir import read_run_config
from groundscope.scoring import (
    Scorer,
    ScoringContext,
    build_scorers,
    metric_names,
    primary_metric,
    score_safely,
    scorer_keys,
)
from groundscope.scoring.groups import GROUP_REQUEST_HASH, GroupStage
from groundscope.scoring.judge import mock_judged
from groundscope.store import (
    MEDIA_ROOTS_KEY,
    RunStore,
    prediction_from_json,
    sample_from_json,
    saved_media_roots,
    score_from_json,
)
from groundscope.types import PredictionStatus


def load_run_config(run_dir: Path, judge: Mapping[str, Any] | None = None) -> TaskConfig:
    """The run's saved config, with secrets dropped (and a judge config, if given, put in)."""
    data = read_run_config(run_dir)
    data.pop("schema_version", None)
    data.pop("format", None)
    data.pop(MEDIA_ROOTS_KEY, None)  # not a config key: see _process_run
    data["api_key"] = None  # the evaluated model is never called again
    if judge is not None:
        data["judge"] = dict(judge)
    elif isinstance(data.get("judge"), dict):
        grounding = data["judge"].get("grounding") or {}
        blocks = [("judge", data["judge"].get("models", [])),
                  ("judge.grounding", grounding.get("models", []))]
        for where, models in blocks:
            for i, m in enumerate(models):
                m["api_key"] = _saved_key(m.get("api_key"), f"{where}.models[{i}].api_key")
    data["use_cache"] = None
    return load_config(data)


def _saved_key(value: Any, where: str) -> str | None:
    """A judge key as saved: a ``$NAME`` reference stays (expanded on load) if the variable
    is set here; a hidden key (``***``) or an unset variable gives none."""
    if not isinstance(value, str) or value == "***":
        return None
    name = value.strip().lstrip("$").strip("{}")
    if value.strip().startswith("$") and name not in os.environ:
        logging.getLogger("groundscope").info(
            "%s: %s is not set here; judge requests (if any) go without a key", where, value)
        return None
    return value


def _dataset_meta(name: str) -> tuple[str, str, tuple[str, ...]]:
    from groundscope.dataset import FORMATS

    fmt = FORMATS[name]
    return fmt.pretty_name, fmt.primary_metric, tuple(fmt.default_metrics)


def _skipped_counts(run_dir: Path) -> dict[str, int]:
    path = run_dir / "skipped.jsonl"
    counts: dict[str, int] = {}
    if path.exists():
        for row in read_jsonl(path):
            counts[row["dataset"]] = counts.get(row["dataset"], 0) + 1
    return counts


def _summary(rows: list[dict[str, Any]], skipped: int) -> Summary:
    s = Summary(skipped=skipped)
    for row in rows:
        s.requested += 1
        if row["status"] == PredictionStatus.OK.value:
            s.succeeded += 1
        else:
            s.errored += 1
            kind = row.get("error_kind") or "error"
            s.errors_by_kind[kind] = s.errors_by_kind.get(kind, 0) + 1
    return s


def rescore_run(run_dir: str | Path, *, judge: Mapping[str, Any] | None = None) -> Report:
    """Score every saved prediction again and rewrite the reviews and reports."""
    return asyncio.run(_process_run(Path(run_dir), judge, rescore=True))


def rebuild_report(run_dir: str | Path) -> Report:
    """Re-aggregate saved reviews into reports (no scorer runs, no request is sent)."""
    return asyncio.run(_process_run(Path(run_dir), None, rescore=False))


async def _process_run(run_dir: Path, judge: Mapping[str, Any] | None, *, rescore: bool) -> Report:
    cfg = load_run_config(run_dir, judge)
    config = read_run_config(run_dir)
    with media_roots_in_force(saved_media_roots(config)):  # the run's, never this cwd
        return await _process_run_in_roots(run_dir, cfg, rescore=rescore)


async def _process_run_in_roots(run_dir: Path, cfg: TaskConfig, *, rescore: bool) -> Report:
    store = RunStore(run_dir, cfg.model_name, legacy_model=cfg.model_id or cfg.model).lock()
    store.resume_hint = (f"the saved reviews are unchanged: free some space, then run "
                         f"groundscope {'score' if rescore else 'report'} {run_dir} again")
    skipped = _skipped_counts(run_dir)
    ctx = ScoringContext(run_dir=run_dir, judge=cfg.judge, seed=cfg.seed,
                         judge_concurrency=cfg.judge_concurrency or cfg.eval_batch_size,
                         timeout=cfg.timeout, max_retries=cfg.max_retries,
                         max_response_bytes=cfg.max_response_bytes)
    try:
        try:
            if rescore and mock_judged(cfg.judge):  # the run's own simulator is gone
                from groundscope.simulator import start_judge_simulator

                server = await start_judge_simulator(cfg.simulator)
                ctx.on_close(server.astop)
                ctx.mock_url = server.base_url
            reports = [await _process_dataset(cfg, store, name, skipped.get(name, 0), rescore, ctx)
                       for name in cfg.datasets]
        finally:
            store.discard_staged()  # what a failed re-scoring wrote aside; the old reviews stay
            await ctx.aclose()
            store.close()
        try:  # the JSON reports are written; a rendering failure must not undo them
            from groundscope.report.html import write_html

            write_html(run_dir)
        except Exception as exc:
            logging.getLogger("groundscope").error("could not write report.html: %s: %s",
                                                   type(exc).__name__, exc)
    finally:
        store.unlock()
    return Report(run_dir=str(run_dir), model=cfg.model_name, datasets=reports)


async def _process_dataset(cfg: TaskConfig, store: RunStore, name: str, skipped: int,
                           rescore: bool, ctx: ScoringContext) -> DatasetReport:
    pretty, primary, defaults = _dataset_meta(name)
    args = cfg.dataset_args.get(name)
    scorers = build_scorers(metric_names(defaults, args.metric_list if args else None, cfg.judge),
                            ctx)
    primary = primary_metric(primary, scorers)
    acc = MetricAccumulator()
    groups = GroupStage(scorers)
    rows_all: list[dict[str, Any]] = []
    stale = 0
    unscored: dict[str, dict[str, int]] = {}
    for dataset, subset in store.saved_subsets():
        if dataset != name:
            continue
        rows = store.load_predictions(name, subset)
        rows_all += rows.values()
        if rescore:  # written aside: the saved reviews stay until every score is in
            store.stage_reviews(name, subset)
            await _rescore_subset(store, name, subset, rows.values(), scorers, acc,
                                  ctx.judge_concurrency, groups)
            continue
        left_out, missing = _aggregate_subset(store, name, subset, rows, scorers, acc)
        stale += left_out
        if missing:
            unscored[subset] = missing
    if stale:
        logging.getLogger("groundscope").info(
            "%s: %d saved scores left out (a metric no longer configured, or a sample asked "
            "again since)", name, stale)
    for subset, score, group_keys in await groups.finish():  # re-scored groups (rescore only)
        store.append_score(name, subset, score, GROUP_REQUEST_HASH)
        acc.add(subset, score, group_keys)
    store.commit_reviews()
    summary = _summary(rows_all, skipped)
    _note_unscored(summary, store, name, unscored)
    rep = DatasetReport(
        model=cfg.model_name, dataset=name, pretty_name=pretty, primary_metric=primary,
        subsets=acc.subsets(), summary=summary,
        metrics=[MetricRow.from_result(r, c) for c, r in acc.rows(seed=cfg.seed)])
    rep = add_judge_stats(rep, cfg.judge, store)
    rep = add_grounding_stats(rep, cfg.judge, store)
    store.write_report(name, rep.model_dump(mode="json"), evalscope_report(rep))
    return rep


def _aggregate_subset(store: RunStore, name: str, subset: str,
                      rows: Mapping[tuple[str, int], dict[str, Any]], scorers: list[Scorer],
                      acc: MetricAccumulator) -> tuple[int, dict[str, int]]:
    """Add a subset's current saved scores to ``acc``; ``(stale scores left out, {"of":
    predictions, "unscored": predictions missing a score of some configured scorer})``."""
    keys = scorer_keys(scorers)
    stale = 0
    have: set[tuple[str, int, str]] = set()
    for review in store.load_reviews(name, subset).values():
        row = rows.get((review.get("sample_id"), review.get("repeat")))
        if not _current(review, row, keys):
            stale += 1
            continue
        score = score_from_json(review)
        have.add((score.sample_id, score.repeat, score.scorer))
        category = category_of(row["sample"]["metadata"]) if row else None
        acc.add(subset, score, keys[score.scorer], category)
    missing = sum(1 for sid, repeat in rows
                  if any((sid, repeat, s.name) not in have for s in scorers))
    return stale, ({"of": len(rows), "unscored": missing} if missing else {})


def _note_unscored(summary: Summary, store: RunStore, name: str,
                   unscored: Mapping[str, Mapping[str, int]]) -> None:
    """Say, per subset, how many saved predictions have no score (e.g. a re-scoring by an
    older version was killed): a report over fewer samples must not pass unnoticed."""
    for subset, n in unscored.items():
        summary.unscored[subset] = n["unscored"]
        summary.warnings.append(
            f"{name}/{subset}: {n['unscored']} of {n['of']} predictions have no score; "
            f"run groundscope score {store.run_dir}")


def _current(review: Mapping[str, Any], row: Mapping[str, Any] | None,
             keys: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether a saved score counts in the report, as it would in the run: its scorer is
    configured now, and it scored the saved prediction (same request hash; a group score
    belongs to no single prediction)."""
    if review.get("scorer") not in keys:
        return False
    digest = review.get("request_hash")
    if digest == GROUP_REQUEST_HASH:
        return True
    return row is not None and digest == row.get("request_hash")


async def _rescore_subset(store: RunStore, name: str, subset: str, rows: Iterable[dict[str, Any]],
                          scorers: list[Scorer], acc: MetricAccumulator, concurrency: int,
                          groups: GroupStage) -> None:
    """Score saved predictions again, ``concurrency`` samples at a time (judge calls); member
    rows of group scorers go to ``groups``, scored when the dataset is done."""
    slots = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, Any]) -> None:
        sample = sample_from_json(row, name, subset)
        pred = prediction_from_json(row)
        async with slots:
            for scorer in scorers:
                score = await score_safely(scorer, sample, pred)
                store.append_score(name, subset, score, pred.request_hash)
                acc.add(subset, score, scorer.keys, category_of(sample.metadata))
                groups.collect(subset, score)

    try:  # a failure cancels the others: nothing is appended once the re-scoring is dropped
        async with asyncio.TaskGroup() as tg:
            for row in rows:
                tg.create_task(one(row))
    except BaseExceptionGroup as group:
        first = one_error(group)
        if first is None:
            raise
        raise first from None
