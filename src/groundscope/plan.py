"""What a run will do, decided before any request: each dataset's format, subsets and
scorers (``plan_dataset``), and the stream of its samples (``iter_samples``)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundscope.config import DatasetArgs, TaskConfig
from groundscope.errors import ConfigError, RecordError
from groundscope.metrics import MetricAccumulator
from groundscope.report.model import Summary
from groundscope.scoring import Scorer, ScoringContext, build_scorers, metric_names, primary_metric
from groundscope.scoring.groups import GroupStage
from groundscope.types import Sample


@dataclass
class DatasetRun:
    """Per-dataset state of one run."""

    name: str
    pretty_name: str
    primary_metric: str
    args: DatasetArgs
    scorers: list[Scorer]
    subsets: list[str]
    summary: Summary = field(default_factory=Summary)
    acc: MetricAccumulator = field(default_factory=MetricAccumulator)
    groups: GroupStage = field(default_factory=lambda: GroupStage(()))
    cache: dict[str, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)
    review_cache: dict[str, dict[tuple[str, int, str], dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of work: a sample of a dataset's subset, asked for the ``repeat``-th time."""

    run: DatasetRun
    subset: str
    sample: Sample
    repeat: int


def plan_dataset(cfg: TaskConfig, name: str, ctx: ScoringContext | None = None) -> DatasetRun:
    """Resolve a dataset's format, path, subsets and scorers; each subset file must be
    readable (a TSV / CSV header, a parquet footer), but no record is read."""
    from groundscope.dataset import FORMATS
    from groundscope.dataset.discover import find_subset_file, list_subsets
    from groundscope.dataset.readers import check_readable

    fmt = FORMATS[name]
    args = cfg.dataset_args.get(name, DatasetArgs())
    if not args.local_path:
        raise ConfigError(
            f"dataset_args.{name}.local_path: required (a directory or a file); "
            "groundscope never downloads datasets"
        )
    subsets = args.subset_list or list_subsets(Path(args.local_path), fmt.split)
    for subset in subsets:  # a missing or unreadable file is an error now, not mid-run
        path = find_subset_file(Path(args.local_path), subset, fmt.split)
        check_readable(path, max_record_bytes=cfg.max_record_bytes)
    names = metric_names(fmt.default_metrics, args.metric_list, cfg.judge)
    scorers = build_scorers(names, ctx)
    return DatasetRun(name=name, pretty_name=fmt.pretty_name,
                       primary_metric=primary_metric(fmt.primary_metric, scorers),
                       args=args, scorers=scorers, subsets=subsets,
                       acc=MetricAccumulator(subsets), groups=GroupStage(scorers))


def iter_samples(
    cfg: TaskConfig, run: DatasetRun, *, strict: bool
) -> Iterator[tuple[str, Sample | RecordError]]:
    """The dataset's samples (or bad records), subset by subset, limit and shuffle applied."""
    from groundscope.dataset import load_samples

    args = run.args
    ctx = {"system_prompt": args.system_prompt, "prompt_template": args.prompt_template,
           "shuffle_choices": args.shuffle_choices, "seed": cfg.seed,
           "human_label_field": cfg.judge.human_label_field if cfg.judge else "human_label"}
    for subset in run.subsets:
        stream = load_samples(run.name, Path(args.local_path or ""), [subset],
                              limit=None if args.shuffle else cfg.limit, ctx_kwargs=ctx,
                              strict=strict, max_record_bytes=cfg.max_record_bytes)
        if not args.shuffle:
            yield from stream
            continue
        items = list(stream)
        random.Random(cfg.seed).shuffle(items)
        good = [it for it in items if not isinstance(it[1], RecordError)]
        bad = [it for it in items if isinstance(it[1], RecordError)]
        n = _resolve_limit(cfg.limit, len(good))
        yield from bad
        yield from good[:n]


def _resolve_limit(limit: int | float | None, size: int) -> int:
    if limit is None:
        return size
    if isinstance(limit, float):
        return int(size * limit)
    return min(limit, size)
