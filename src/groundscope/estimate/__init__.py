"""What a run will cost, before any request: ``groundscope eval ... --dry-run`` and
:func:`estimate`.

The datasets are planned and read exactly as a run reads them (``plan.plan_dataset``,
``plan.iter_samples``: formats, subsets, media checked inside the run's media roots, the
pixel cap, ``limit`` and ``shuffle``; a bad record or a duplicate id is counted, as the run
skips it; ``strict`` makes the first bad record the error it is in a run). Nothing is sent
and nothing is written.

Requests to the evaluated model are exact: samples x ``repeats`` (transport retries of 429s
and 5xx not counted). Judge requests are upper bounds per step (``estimate/steps.py``),
first attempts, with repair turns as a separate bound. Tokens follow the rules of
``estimate/tokens.py``; the completion bound is the requests' cap (``max_tokens`` ...).
A cost is given where ``TaskConfig.pricing`` prices the model id (``pricing.Price.cost``):
prompt tokens plus the completion bound, or the prompt alone (marked) when no cap is sent.
A resumed run (``use_cache``) sends fewer: the estimate assumes nothing is reused.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundscope import media
from groundscope.config import TaskConfig, load_config
from groundscope.errors import RecordError
from groundscope.estimate.model import DatasetCount, Estimate
from groundscope.estimate.render import estimate_json, render_estimate
from groundscope.estimate.steps import StepRow, Steps
from groundscope.estimate.tokens import TokenCounter
from groundscope.plan import DatasetRun, iter_samples, plan_dataset, run_media_roots
from groundscope.scoring import ScoringContext
from groundscope.store import check_subset_files

SHOWN_PROBLEMS = 5  # bad records shown per dataset (the run lists them all in skipped.jsonl)

__all__ = ["DatasetCount", "Estimate", "StepRow", "dry_run_text", "estimate", "estimate_json",
           "render_estimate"]


def estimate(source: TaskConfig | Mapping[str, Any] | str | Path) -> Estimate:
    """Estimate a run of ``source`` (a config, a dict or a config file): no request is sent
    and nothing is written; the media roots and pixel cap a run would put in force apply
    only inside this call."""
    cfg = load_config(source)
    return contextvars.copy_context().run(_estimate, cfg)


def _estimate(cfg: TaskConfig) -> Estimate:
    ctx = ScoringContext.from_config(cfg)
    runs = [plan_dataset(cfg, name, ctx) for name in cfg.datasets]
    check_subset_files((run.name, subset) for run in runs for subset in run.subsets)
    media.set_media_roots(run_media_roots(cfg))
    media.set_max_pixels(cfg.max_image_pixels)
    counter = TokenCounter(settings=cfg.media_settings())
    steps = Steps(cfg, counter)
    counts = [_read(cfg, run, steps) for run in runs]
    return Estimate(cfg.model, counts, steps.rows(), counter.tally, dict(cfg.pricing))


def _read(cfg: TaskConfig, run: DatasetRun, steps: Steps) -> DatasetCount:
    """Read one dataset as the runner does (``Runner._items``) and count what it would send."""
    count = DatasetCount(run.name, cfg.repeats)
    records: set[tuple[str, int]] = set()
    seen: dict[str, str] = {}
    current = None
    scorers = steps.for_dataset(run.scorers)
    for subset, loaded in iter_samples(cfg, run, strict=cfg.strict):
        if subset != current:  # ids are unique per subset
            current, seen = subset, {}
        if isinstance(loaded, RecordError):
            records.add((str(loaded.path), loaded.line))
            count.bad_records += 1
            _note(count, str(loaded))
            continue
        records.add((str(loaded.origin.path), loaded.origin.line))
        first = seen.setdefault(loaded.id, str(loaded.origin))
        if first != str(loaded.origin):
            count.duplicate_ids += 1
            _note(count, f"{loaded.origin}: id: duplicate sample id {loaded.id!r} (first at {first})")
            continue
        count.samples += 1
        steps.sample(subset, loaded, scorers)
    steps.finish_groups(scorers)
    count.records = len(records)
    return count


def _note(count: DatasetCount, problem: str) -> None:
    if len(count.problems) < SHOWN_PROBLEMS:
        count.problems.append(problem)


def dry_run_text(cfg: TaskConfig, *, as_json: bool = False) -> str:
    """What ``--dry-run`` prints: the resolved config (secrets hidden) as JSON, then the
    estimate's tables; with ``as_json``, one JSON object ``{"config", "estimate"}``. Text is
    shown through ``terminal.visible`` (JSON leaves bidi and C1 controls raw)."""
    import json

    from groundscope.terminal import visible

    est = estimate(cfg)
    shown = {"config": cfg.redacted(), "estimate": estimate_json(est)} if as_json \
        else cfg.redacted()
    lines = json.dumps(shown, indent=2, ensure_ascii=False).split("\n")
    if not as_json:
        lines += ["", *render_estimate(est).split("\n")]
    return "\n".join(map(visible, lines))
