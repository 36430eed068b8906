"""Work on a finished run directory without calling the evaluated model.

``rescore_run`` scores the saved predictions again (new scorers, a fixed scorer, a judge
added later) on ``eval``'s sample path (``pipeline.evaluate_sample`` without a client) and
rewrites ``reviews/`` and ``reports/``; ``rebuild_report`` only re-aggregates the saved
reviews. Both build the reports as ``eval`` does (``report/build.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from groundscope.config import TaskConfig, load_config
from groundscope.errors import one_error
from groundscope.media import (
    chosen_media_roots,
    media_roots,
    media_roots_in_force,
    set_max_pixels,
    set_media_settings,
)
from groundscope.metrics import category_of
from groundscope.pipeline import Hooks, Saved, evaluate_sample, finish_groups, record_score
from groundscope.plan import DatasetRun, check_endpoints, plan_scoring
from groundscope.redaction import Redactor
from groundscope.report.build import build_dataset_report, write_page
from groundscope.report.model import DatasetReport, Report, Summary
from groundscope.rowcodec import prediction_from_json, sample_from_json, score_from_json
from groundscope.rows import read_rows
from groundscope.rundir import check_not_merging, read_run_config, task_fields
from groundscope.scoring import ScoringContext, scorer_keys
from groundscope.scoring.groups import GROUP_REQUEST_HASH
from groundscope.scoring.judge import mock_judged
from groundscope.store import (
    MEDIA_ROOTS_KEY,
    SCHEMA_VERSION,
    RunStore,
    latest_rows,
    saved_media_roots,
)
from groundscope.types import PredictionStatus
from groundscope.usage import MODEL_STEP


def load_run_config(run_dir: Path, judge: Mapping[str, Any] | None = None,
                    key_env: Iterable[str] | None = None) -> TaskConfig:
    """The run's saved config, with secrets dropped (and a judge config, if given, put in).

    A run directory is untrusted input: a saved judge key ``$NAME`` is expanded only when
    the user named ``NAME`` in ``key_env`` (``score --judge-key-env NAME``); ``None`` (no
    judge will be asked: ``report``) drops every key without a word."""
    quiet = key_env is None
    allowed = frozenset(key_env or ())
    data = task_fields(read_run_config(run_dir))
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
                m["api_key"] = None if quiet else _saved_key(
                    m.get("api_key"), f"{where}.models[{i}].api_key", allowed)
    data["use_cache"] = None
    return load_config(data)


def _saved_key(value: Any, where: str, allowed: frozenset[str]) -> str | None:
    """A judge key as saved: a ``$NAME`` reference stays (expanded on load) if the user
    allowed ``NAME`` and the variable is set here; anything else (a hidden key ``***``, a
    literal, a name not allowed, an unset variable) gives none."""
    if not isinstance(value, str) or not value.strip().startswith("$"):
        return None
    name = value.strip().lstrip("$").strip("{}")
    log = logging.getLogger("groundscope")
    if name not in allowed:
        log.warning("%s: the run names %s; judge requests go without a key "
                    "(pass --judge-key-env %s to send it)", where, value, name)
        return None
    if name not in os.environ:
        log.info("%s: %s is not set here; judge requests (if any) go without a key", where, value)
        return None
    return value


def _skipped_counts(run_dir: Path) -> dict[str, int]:
    path = run_dir / "skipped.jsonl"
    counts: dict[str, int] = {}
    if path.exists():
        for row in read_rows(path, "skipped"):
            counts[row["dataset"]] = counts.get(row["dataset"], 0) + 1
    return counts


def rescore_run(run_dir: str | Path, *, judge: Mapping[str, Any] | None = None,
                key_env: Iterable[str] = ()) -> Report:
    """Score every saved prediction again and rewrite the reviews and reports; a saved
    judge key ``$NAME`` is expanded only for a name in ``key_env``."""
    check_not_merging(Path(run_dir))
    return asyncio.run(_process_run(Path(run_dir), judge, rescore=True, key_env=key_env))


def rebuild_report(run_dir: str | Path, *, notes: Sequence[str] = (),
                   merging: bool = False) -> Report:
    """Re-aggregate saved reviews into reports (no scorer runs, no request is sent);
    ``notes``: lines added to every dataset's summary warnings (a partial merge). A merge
    not finished is refused (``rundir.check_not_merging``), unless ``merging``: the merge
    writing it builds its reports before writing its completion marker."""
    if not merging:
        check_not_merging(Path(run_dir))
    return asyncio.run(_process_run(Path(run_dir), None, rescore=False, notes=notes,
                                    merging=merging))


async def _process_run(run_dir: Path, judge: Mapping[str, Any] | None, *, rescore: bool,
                       key_env: Iterable[str] | None = None, notes: Sequence[str] = (),
                       merging: bool = False) -> Report:
    cfg = load_run_config(run_dir, judge, key_env)
    if rescore:  # a judge that cannot be reached: one line now, not a failure per sample
        check_endpoints(cfg, model=False)
    config = read_run_config(run_dir)
    set_max_pixels(cfg.max_image_pixels)  # the judges see the media as the run's model did
    set_media_settings(cfg.media_settings())
    # the run's honoured roots and --media-root given now, never this cwd
    with media_roots_in_force((*saved_media_roots(config, run_dir), *chosen_media_roots())):
        return await _process_run_in_roots(run_dir, cfg, rescore=rescore, notes=notes,
                                           merging=merging,
                                           schema_1=config.get("schema_version") == 1,
                                           config=config if judge is not None else None)


async def _process_run_in_roots(run_dir: Path, cfg: TaskConfig, *, rescore: bool,
                                notes: Sequence[str] = (), merging: bool = False,
                                schema_1: bool = False,
                                config: Mapping[str, Any] | None = None) -> Report:
    """``config``: the run's saved config.json, given when ``score --judge`` scores with a
    judge of its own: as soon as the first of its reviews replace the saved ones, the run
    names that judge (its key as the reference given, ``$NAME``, or not at all), so a later
    ``report`` or ``score`` builds the judged report, not the run's first metrics with every
    prediction unscored."""
    store = RunStore(run_dir, cfg.model_name, legacy_model=cfg.model_id or cfg.model).lock()
    store.resume_hint = (f"the saved reviews are unchanged: free some space, then run "
                         f"groundscope {'score' if rescore else 'report'} {run_dir} again")
    committed: list[str] = []

    def reviews_replaced(dataset: str) -> None:
        """``dataset``'s new reviews replaced its saved ones: say so in any later error,
        and (``score --judge``) name the judge now, before anything else is written."""
        committed.append(dataset)
        again = f"groundscope score {run_dir}" + (" --judge JSON" if config is not None else "")
        store.resume_hint = (f"the reviews of {', '.join(committed)} are the new ones: free "
                             f"some space, then run {again} again (judge replies are cached: "
                             "none is asked twice)")
        if config is not None and len(committed) == 1:
            version = config.get("schema_version")  # an untrusted file: 1 or 2, else ours
            store.write_config({**task_fields(config), "judge": cfg.redacted()["judge"]},
                               schema_version=version if version in (1, 2)
                               and type(version) is int else SCHEMA_VERSION)
    # a finished run has its report; a run of schema 1 had it at EvalScope's <dataset>.json
    unfinished = [name for name in cfg.datasets if not store.report_file(name).is_file()
                  and not (schema_1 and store.evalscope_report_file(name).is_file())]
    if unfinished and not merging:  # an interrupted eval: resumable
        logging.getLogger("groundscope").warning(
            "%s: the run did not finish (no report of %s yet): this covers only the "
            "predictions saved so far; finish it with groundscope eval ... --use-cache %s",
            run_dir, unfinished[0], run_dir)
    skipped = _skipped_counts(run_dir)
    ctx = ScoringContext.from_config(cfg, run_dir)
    redact = Redactor(cfg.secrets()).redact  # error texts saved in reviews, as in eval
    try:
        try:
            if rescore and mock_judged(cfg.judge):  # the run's own simulator is gone
                from groundscope.simulator import start_judge_simulator

                server = await start_judge_simulator(cfg.simulator)
                ctx.on_close(server.astop)
                ctx.mock_url = server.base_url
            reports = [await _process_dataset(cfg, store, _planned(cfg, name, ctx, notes),
                                              skipped.get(name, 0), ctx, redact, rescore=rescore,
                                              replaced=reviews_replaced)
                       for name in cfg.datasets]
        finally:
            store.discard_staged()  # what a failed re-scoring wrote aside; the old reviews stay
            await ctx.aclose()
            store.close()
        # the JSON reports are written; a rendering failure must not undo them. A merge's
        # page is an end-of-run page (bounded: memory does not grow with the rows); report
        # rebuilds it with more samples (report/embed.py: REPORT_SAMPLES)
        page = write_page(run_dir, end_of_run=merging)
    finally:
        store.unlock()
    return Report(run_dir=str(run_dir), model=cfg.model_name, datasets=reports,
                  page=None if page is None else str(page))


def _planned(cfg: TaskConfig, name: str, ctx: ScoringContext, notes: Sequence[str]) -> DatasetRun:
    """The dataset's scorers and aggregates, its subsets in the order ``eval`` planned them
    (``subset_list``; a listed folder's are sorted by name, as the accumulator sorts)."""
    args = cfg.dataset_args.get(name)
    run = plan_scoring(cfg, name, ctx, (args.subset_list if args else None) or ())
    run.summary.warnings.extend(notes)
    return run


async def _process_dataset(cfg: TaskConfig, store: RunStore, run: DatasetRun, skipped: int,
                           ctx: ScoringContext, redact: Callable[[str], str], *,
                           rescore: bool,
                           replaced: Callable[[str], None] | None = None) -> DatasetReport:
    """One dataset's saved predictions scored again (``rescore``) or their saved scores
    aggregated, and its reports; ``replaced(name)`` once re-scored reviews replace the
    saved ones."""
    name = run.name
    run.summary.skipped = skipped
    stale = 0
    unscored: dict[str, dict[str, int]] = {}
    for dataset, subset in store.saved_subsets():
        if dataset != name:
            continue
        if rescore:  # written aside: the saved reviews stay until every score is in
            store.stage_reviews(name, subset)
            path = store.predictions_file(name, subset)
            rows = (row for _, row in (latest_rows(path, "prediction") if path.exists() else ()))
            await _rescore_subset(store, run, subset, _counted(cfg, run, rows),
                                  ctx.judge_concurrency, redact)
            continue
        left_out, missing = _aggregate_subset(store, run, subset, _streamed(cfg, store, run, subset))
        stale += left_out
        if missing:
            unscored[subset] = missing
    if stale:
        logging.getLogger("groundscope").info(
            "%s: %d saved scores left out (a metric no longer configured, or a sample asked "
            "again since)", name, stale)
    await finish_groups(store, run)  # re-scored groups (rescore only)
    store.commit_reviews(None if replaced is None else partial(replaced, name))
    _note_unscored(run.summary, store, name, unscored)
    return build_dataset_report(store, run, model=cfg.model_name, seed=cfg.seed, judge=cfg.judge,
                                pricing=cfg.pricing)


def _count(cfg: TaskConfig, run: DatasetRun, row: Mapping[str, Any]) -> None:
    """A saved prediction into the summary: its outcome and, as recorded, its usage."""
    run.summary.count(row["status"] == PredictionStatus.OK.value, row.get("error_kind"))
    completion = prediction_from_json(row).completion
    if completion is not None:  # as recorded: the report eval wrote, written again
        run.summary.usage.add(MODEL_STEP, cfg.model, completion.usage, billed=True)


def _counted(cfg: TaskConfig, run: DatasetRun,
             rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``rows``, each counted into the summary (:func:`_count`) as it is read."""
    for row in rows:
        _count(cfg, run, row)
        yield row


def _streamed(cfg: TaskConfig, store: RunStore, run: DatasetRun,
              subset: str) -> dict[int, tuple[int, str | None]]:
    """A subset's saved predictions, counted into the summary as they are read (streamed,
    ``store.latest_rows``); kept, by a hash of ``(sample, repeat)``: a hash of the request
    hash, and the category (a few numbers per prediction, never the rows)."""
    kept: dict[int, tuple[int, str | None]] = {}
    path = store.predictions_file(run.name, subset)
    for _, row in latest_rows(path, "prediction") if path.exists() else ():
        _count(cfg, run, row)
        kept[hash((str(row["sample_id"]), int(row.get("repeat", 0))))] = (
            hash(row["request_hash"]), category_of(row["sample"]["metadata"]))
    return kept


def _aggregate_subset(store: RunStore, run: DatasetRun, subset: str,
                      rows: Mapping[int, tuple[int, str | None]]
                      ) -> tuple[int, dict[str, int]]:
    """Add a subset's current saved scores (streamed) to ``run.acc``; ``(stale scores left
    out, {"of": predictions, "unscored": predictions missing a score of some configured
    scorer})``. ``rows``: each saved prediction's (hashed) request hash and category."""
    keys = scorer_keys(run.scorers)
    stale = 0
    have: dict[int, int] = {}  # configured scores per prediction (one line each)
    path = store.reviews_file(run.name, subset)
    for _, review in latest_rows(path, "review") if path.exists() else ():
        key = hash((review.get("sample_id"), review.get("repeat")))
        row = rows.get(key)
        if not _current(review, row[0] if row else None, keys):
            stale += 1
            continue
        score = score_from_json(review)
        have[key] = have.get(key, 0) + 1
        run.acc.add(subset, score, keys[score.scorer], row[1] if row else None)
        if score.usage:
            run.summary.usage.add_calls(score.usage)
    missing = sum(1 for key in rows if have.get(key, 0) < len(run.scorers))
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


def _current(review: Mapping[str, Any], request_hash: int | None,
             keys: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether a saved score counts in the report, as it would in the run: its scorer is
    configured now, and it scored the saved prediction (same request hash; a group score
    belongs to no single prediction)."""
    if review.get("scorer") not in keys:
        return False
    digest = review.get("request_hash")
    if digest == GROUP_REQUEST_HASH:
        return True
    return request_hash is not None and isinstance(digest, str) and hash(digest) == request_hash


async def _rescore_subset(store: RunStore, run: DatasetRun, subset: str,
                          rows: Iterable[dict[str, Any]], concurrency: int,
                          redact: Callable[[str], str]) -> None:
    """Score saved predictions again on ``eval``'s sample path (``pipeline``),
    ``concurrency`` samples at a time (judge calls); member rows of group scorers go to the
    dataset's group stage, scored when the dataset is done. ``rows`` are read as slots
    free up (at most twice ``concurrency`` are held), so memory does not grow with the
    run's size."""
    slots = asyncio.Semaphore(concurrency)
    live = asyncio.Semaphore(2 * concurrency)

    async def one(row: dict[str, Any]) -> None:
        try:
            sample = sample_from_json(row, run.name, subset, media_roots())
            hooks = Hooks(score_slot=slots, on_score=partial(record_score, store, run, sample))
            await evaluate_sample(sample, int(row.get("repeat", 0)), run.scorers, client=None,
                                  saved=Saved(row), redact=redact, hooks=hooks)
        finally:
            live.release()

    try:  # a failure cancels the others: nothing is appended once the re-scoring is dropped
        async with asyncio.TaskGroup() as tg:
            for row in rows:
                await live.acquire()
                tg.create_task(one(row))
    except BaseExceptionGroup as group:
        first = one_error(group)
        if first is None:
            raise
        raise first from None
