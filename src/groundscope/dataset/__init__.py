"""Dataset formats: the registry, the per-subset context, and the lazy sample loader.

A format is data (``DatasetFormat``) around one pure function
``record_to_sample(record, origin, ctx) -> Sample``, optionally preceded by a pure
``expand(record, origin) -> [record, ...]`` (General-VQA: a record with ``paraphrases`` becomes
one record per question on the same media). ``load_samples`` finds each subset's
file, streams its records, applies ``limit`` before any record is converted (so no medium of
a skipped record is ever looked at) and yields samples or the ``RecordError`` of a bad record.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from groundscope.dataset import legacy, mcq, vqa
from groundscope.dataset.discover import find_subset_file, list_subsets
from groundscope.dataset.readers import DEFAULT_MAX_RECORD_BYTES, count_records, iter_records
from groundscope.errors import ConfigError, DatasetError, MediaError, RecordError
from groundscope.types import Origin, Sample

__all__ = ["FORMATS", "DatasetFormat", "FormatContext", "get_format", "load_samples"]


@dataclass(frozen=True)
class FormatContext:
    """What a format function needs besides the record: one per (dataset, subset).

    ``base_dir`` is the dataset file's directory (relative media paths resolve against it
    first). ``warned`` is shared by the contexts of one load so that a warning about one
    missing medium of one file is logged once; it takes no part in equality.
    ``human_label_field`` is the record column holding a human correct/incorrect label
    (``judge.human_label_field``); formats keep it as ``metadata["human_label"]``.
    """

    dataset: str
    subset: str
    base_dir: Path | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    shuffle_choices: bool = False
    seed: int | None = None
    human_label_field: str = "human_label"
    warned: set[tuple[str, str]] = field(default_factory=set, compare=False, repr=False)


RecordToSample = Callable[[dict[str, Any], Origin, FormatContext], Sample]
ExpandRecord = Callable[[dict[str, Any], Origin], list[dict[str, Any]]]


@dataclass(frozen=True)
class DatasetFormat:
    """A dataset format: its names, split, default metrics and record converter.

    ``expand`` (optional) turns one record into the records it stands for, before conversion.
    """

    name: str
    pretty_name: str
    split: str
    default_metrics: tuple[str, ...]
    primary_metric: str
    record_to_sample: RecordToSample
    expand: ExpandRecord | None = None


FORMATS: dict[str, DatasetFormat] = {
    "general_vqa": DatasetFormat(
        name="general_vqa",
        pretty_name="General-VQA",
        split="test",
        default_metrics=("BLEU", "Rouge"),
        primary_metric="rouge-l-r",
        record_to_sample=vqa.record_to_sample,
        expand=vqa.expand_paraphrases,
    ),
    "general_vmcq": DatasetFormat(
        name="general_vmcq",
        pretty_name="General-VMCQ",
        split="val",
        default_metrics=("acc",),
        primary_metric="accuracy",
        record_to_sample=mcq.record_to_sample,
    ),
    # VLMEvalKit TSV layouts (dataset/legacy.py). VLMEvalKit has no splits; "test" (as for
    # General-VQA) lets ``custom_mcq_test.tsv`` and ``custom_mcq.tsv`` both name subset custom_mcq.
    "legacy_mcq": DatasetFormat(
        name="legacy_mcq",
        pretty_name="Legacy-MCQ",
        split="test",
        default_metrics=("acc",),
        primary_metric="accuracy",
        record_to_sample=legacy.mcq_record_to_sample,
    ),
    "legacy_vqa": DatasetFormat(
        name="legacy_vqa",
        pretty_name="Legacy-VQA",
        split="test",
        default_metrics=("exact_match",),
        primary_metric="exact_match",
        record_to_sample=legacy.vqa_record_to_sample,
    ),
}


def get_format(name: str) -> DatasetFormat:
    """The registered format ``name``; an unknown name is a ConfigError with a suggestion."""
    try:
        return FORMATS[name]
    except KeyError:
        close = difflib.get_close_matches(name, FORMATS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(sorted(FORMATS))
        raise ConfigError(f"unknown dataset format {name!r} (known: {known}){hint}") from None


def load_samples(
    name: str,
    local_path: Path | str,
    subsets: Sequence[str] | None = None,
    *,
    limit: int | float | None = None,
    ctx_kwargs: Mapping[str, Any] | None = None,
    strict: bool = False,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> Iterator[tuple[str, Sample | RecordError]]:
    """Lazily yield ``(subset, sample or RecordError)`` for every subset of a dataset.

    ``subsets`` defaults to every subset found under ``local_path``. ``limit``: an int N
    keeps the first N records of each subset (0 or None: all, as in EvalScope); a float in
    (0, 1] keeps ``floor(fraction * count)``. Bad records count toward the limit.
    ``strict=True`` raises the first ``RecordError`` instead of yielding it.
    ``ctx_kwargs`` fill ``FormatContext`` (``system_prompt``, ``prompt_template``,
    ``shuffle_choices``, ``seed``). A record longer than ``max_record_bytes`` is a bad record.
    """
    fmt = get_format(name)
    _check_limit(limit)
    local_path = Path(local_path)
    names = list(subsets) if subsets else list_subsets(local_path, fmt.split)
    if not names:
        raise DatasetError(f"no dataset files (.jsonl/.csv/.tsv/.parquet) in {local_path}")
    warned: set[tuple[str, str]] = set()
    for subset in names:
        path = find_subset_file(local_path, subset, fmt.split)
        ctx = _context(name, subset, path, ctx_kwargs, warned)
        limit_n = _resolve_limit(limit, path, max_record_bytes)
        for item in _subset_items(fmt, path, ctx, limit_n, max_record_bytes):
            if strict and isinstance(item, RecordError):
                raise item
            yield subset, item


def _context(
    name: str,
    subset: str,
    path: Path,
    ctx_kwargs: Mapping[str, Any] | None,
    warned: set[tuple[str, str]],
) -> FormatContext:
    extra = dict(ctx_kwargs or {})
    reserved = {"dataset", "subset", "base_dir", "warned"} & extra.keys()
    try:
        if reserved:
            raise TypeError(f"reserved keys {sorted(reserved)}")
        return FormatContext(name, subset, path.parent, warned=warned, **extra)
    except TypeError as exc:
        raise ConfigError(f"{name}: bad dataset options: {exc}") from None


def _check_limit(limit: int | float | None) -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise ConfigError(f"limit must be an int or a float fraction, got {limit!r}")
    if isinstance(limit, int) and limit < 0:
        raise ConfigError(f"limit must be >= 0, got {limit}")
    if isinstance(limit, float) and not (math.isfinite(limit) and 0.0 < limit <= 1.0):
        raise ConfigError(f"a fractional limit must be in (0, 1], got {limit}")


def _resolve_limit(limit: int | float | None, path: Path, max_record_bytes: int) -> int | None:
    if not limit:
        return None
    if isinstance(limit, float):
        return int(count_records(path, max_record_bytes=max_record_bytes) * limit)
    return limit


def _subset_items(
    fmt: DatasetFormat, path: Path, ctx: FormatContext, limit: int | None, max_record_bytes: int
) -> Iterator[Sample | RecordError]:
    for origin, record in islice(iter_records(path, max_record_bytes=max_record_bytes), limit):
        if isinstance(record, RecordError):
            yield record
            continue
        try:  # a record that expands is converted whole before any of its samples is yielded
            records = fmt.expand(record, origin) if fmt.expand else [record]
            yield from [fmt.record_to_sample(r, origin, ctx) for r in records]
        except RecordError as exc:
            yield exc
        except MediaError as exc:  # a format should convert these; never lose the origin
            yield RecordError(origin.path, origin.line, "<media>", str(exc))
