"""What a run will do, decided before any request: each dataset's format, subsets and
scorers (``plan_dataset``; ``plan_scoring`` for a saved run), the folders it may read media
from (``run_media_roots``), and the stream of its samples (``iter_samples``; how many
records it will read: ``planned_records``)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundscope.bounds import MAX_SUBSETS, limit_count
from groundscope.client.reach import DEFAULT_TIMEOUT_S, check_reachable
from groundscope.config import DatasetArgs, TaskConfig
from groundscope.errors import ConfigError, RecordError
from groundscope.metrics import MetricAccumulator
from groundscope.scoring import (
    GROUNDING_METRICS,
    Scorer,
    ScoringContext,
    build_scorers,
    metric_names,
    primary_metric,
)
from groundscope.scoring.groups import GroupStage
from groundscope.summary import Summary
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
    # per subset, the (sample id, repeat) this run scored: the judge and grounding figures,
    # read from the saved reviews, count only these (a resume's file may hold samples no
    # longer planned). None: not tracked (``report`` / ``score`` count every saved review).
    scored: dict[str, set[tuple[str, int]]] | None = None


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

    split = FORMATS[name].split
    args = cfg.dataset_args.get(name, DatasetArgs())
    if not args.local_path:
        raise ConfigError(
            f"dataset_args.{name}.local_path: required (a directory or a file); "
            "groundscope never downloads datasets"
        )
    subsets = args.subset_list or list_subsets(Path(args.local_path), split)
    if len(subsets) > MAX_SUBSETS:
        raise ConfigError(f"dataset_args.{name}.local_path: {len(subsets)} subset files, over "
                          f"the limit of {MAX_SUBSETS}; name the ones to run in subset_list")
    for subset in subsets:  # a missing or unreadable file is an error now, not mid-run
        path = find_subset_file(Path(args.local_path), subset, split)
        check_readable(path, max_record_bytes=cfg.max_record_bytes)
    return plan_scoring(cfg, name, ctx, subsets)


def plan_scoring(cfg: TaskConfig, name: str, ctx: ScoringContext | None = None,
                 subsets: Sequence[str] = ()) -> DatasetRun:
    """A dataset's scorers and aggregates, no file read: ``plan_dataset``'s, and what
    ``groundscope score`` / ``report`` score and report a saved run with."""
    from groundscope.dataset import FORMATS

    fmt = FORMATS[name]
    args = cfg.dataset_args.get(name, DatasetArgs())
    scorers = build_scorers(metric_names(fmt.default_metrics, args.metric_list, cfg.judge), ctx)
    return DatasetRun(name=name, pretty_name=fmt.pretty_name,
                      primary_metric=primary_metric(fmt.primary_metric, scorers),
                      args=args, scorers=scorers, subsets=list(subsets),
                      acc=MetricAccumulator(subsets), groups=GroupStage(scorers))


def run_media_roots(cfg: TaskConfig) -> list[str]:
    """The folders a run may read local media from: the working directory, each dataset's
    folder (``local_path``, or the folder of a ``local_path`` file) and ``media_roots``.
    (A medium's own dataset file's folder is always allowed too.) A ``media_roots`` entry
    that is not a directory is a ConfigError."""
    for root in cfg.media_roots:
        if not os.path.isdir(os.path.expanduser(root)):
            raise ConfigError(f"media_roots: not a directory: {root}")
    roots = [os.getcwd()]
    for name in cfg.datasets:
        local = cfg.dataset_args.get(name, DatasetArgs()).local_path
        if local:
            roots.append(local if os.path.isdir(local) else os.path.dirname(local) or ".")
    return [*roots, *cfg.media_roots]


def planned_records(cfg: TaskConfig, run: DatasetRun) -> int:
    """How many records ``iter_samples`` will read of ``run``'s subsets, ``limit`` applied,
    counted without reading a record (``count_records``: parquet's footer, JSONL's lines,
    TSV / CSV rows from the bytes): what the progress display's total starts from."""
    from groundscope.dataset import FORMATS
    from groundscope.dataset.discover import find_subset_file
    from groundscope.dataset.readers import count_records

    folder, split = Path(run.args.local_path or ""), FORMATS[run.name].split
    return sum(limit_count(cfg.limit, count_records(find_subset_file(folder, subset, split),
                                                    max_record_bytes=cfg.max_record_bytes,
                                                    exact=False))
               for subset in run.subsets)


def iter_samples(
    cfg: TaskConfig, run: DatasetRun, *, strict: bool
) -> Iterator[tuple[str, Sample | RecordError]]:
    """The dataset's samples (or bad records), subset by subset, limit and shuffle applied.

    ``limit`` means the same with and without ``shuffle`` (``bounds.limit_count``): a number
    of *records* (a bad one counts, a record with paraphrases counts once). With
    ``shuffle`` the records are put in a seeded random order first, then the limit keeps
    the first of them.
    """
    from groundscope.dataset import load_samples

    args = run.args
    ctx = {"system_prompt": args.system_prompt, "prompt_template": args.prompt_template,
           "shuffle_choices": args.shuffle_choices, "seed": cfg.seed,
           "human_label_field": cfg.judge.human_label_field if cfg.judge else "human_label",
           "max_media": cfg.max_media_per_record,
           # eval_type answers without an answers file: each record's own answer
           "answer_field": "prediction" if cfg.eval_type == "answers" and cfg.answers is None else None}
    for subset in run.subsets:
        stream = load_samples(run.name, Path(args.local_path or ""), [subset],
                              limit=None if args.shuffle else cfg.limit, ctx_kwargs=ctx,
                              strict=strict, max_record_bytes=cfg.max_record_bytes)
        if not args.shuffle:
            yield from stream
            continue
        records: dict[tuple[str, int], list[tuple[str, Sample | RecordError]]] = {}
        for item in stream:  # a record's samples (its paraphrases) stay together
            records.setdefault(_record_of(item[1]), []).append(item)
        order = list(records)
        random.Random(cfg.seed).shuffle(order)
        for key in order[:limit_count(cfg.limit, len(order))]:
            yield from records[key]


def _record_of(item: Sample | RecordError) -> tuple[str, int]:
    if isinstance(item, RecordError):
        return str(item.path), item.line
    return str(item.origin.path), item.origin.line


def _judge_asked(cfg: TaskConfig) -> bool:
    """Whether the run may ask its judge models: not with the ``rule`` strategy and no
    grounding metric (a judge block kept in a config, say, while the rules score)."""
    assert cfg.judge is not None
    listed = {m for args in cfg.dataset_args.values() for m in args.metric_list or ()}
    return (cfg.judge.strategy != "rule" or cfg.judge.grounding is not None
            or bool(listed & set(GROUNDING_METRICS)))


def check_endpoints(cfg: TaskConfig, *, model: bool = True) -> None:
    """Connect once to the model endpoint (unless not ``model``: ``groundscope score``) and
    each judge endpoint, nothing sent (``client/reach.py``): a ConfigError naming the first
    one that cannot be reached, and how."""
    named: list[tuple[str, str]] = []
    if model and cfg.eval_type != "mock" and cfg.api_url:
        named.append(("api_url", cfg.api_url))
    if cfg.judge is not None and _judge_asked(cfg):
        own = cfg.judge.grounding.models if cfg.judge.grounding else []
        named += [(f"judge.models[{i}].api_url", m.api_url) for i, m in enumerate(cfg.judge.models)]
        named += [(f"judge.grounding.models[{i}].api_url", m.api_url) for i, m in enumerate(own)]
    seen: set[str] = set()
    for where, url in named:
        if url != "mock" and url not in seen:
            seen.add(url)
            check_reachable(url, where, timeout=min(cfg.timeout, DEFAULT_TIMEOUT_S))
