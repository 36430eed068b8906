"""Dataset formats: the registry and the lazy sample loader (the per-subset context: ``base.py``).

A format is data (``DatasetFormat``) around one pure function
``record_to_sample(record, origin, ctx) -> Sample``, optionally preceded by a pure
``expand(record, origin) -> [record, ...]`` (General-VQA: a record with ``paraphrases`` becomes
one record per question on the same media). ``load_samples`` finds each subset's
file, streams its records, applies ``limit`` before any record is converted (so no medium of
a skipped record is ever looked at) and yields samples or the ``RecordError`` of a bad record.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from groundscope.bounds import check_limit, limit_count
from groundscope.dataset import legacy, mcq, vqa
from groundscope.dataset.base import ExpandRecord, FormatContext, RecordToSample, record_error
from groundscope.dataset.discover import find_subset_file, list_subsets
from groundscope.dataset.readers import count_records, iter_records
from groundscope.defaults import DEFAULT_MAX_RECORD_BYTES
from groundscope.errors import ConfigError, DatasetError, MediaError, RecordError
from groundscope.types import Origin, Sample

__all__ = ["FORMATS", "DatasetFormat", "FormatContext", "get_format", "load_samples"]


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

    ``subsets`` defaults to every subset found under ``local_path``. ``limit`` keeps the
    first records of each subset by the one rule of ``bounds.check_limit`` /
    ``bounds.limit_count`` (None: all; N: the first N; a fraction f in (0, 1):
    ``floor(f * count)``, at least one). Bad records count toward the limit, and a record
    with paraphrases counts once.
    ``strict=True`` raises the first ``RecordError`` instead of yielding it.
    ``ctx_kwargs`` fill ``FormatContext`` (``system_prompt``, ``prompt_template``,
    ``shuffle_choices``, ``seed``). A record longer than ``max_record_bytes`` is a bad record.
    """
    fmt = get_format(name)
    try:
        limit = check_limit(limit)
    except ValueError as exc:
        raise ConfigError(f"limit: {exc}") from None
    local_path = Path(local_path)
    names = list(subsets) if subsets else list_subsets(local_path, fmt.split)
    if not names:
        raise DatasetError(f"no dataset files (.jsonl/.csv/.tsv/.parquet) in {local_path}")
    for subset in names:
        path = find_subset_file(local_path, subset, fmt.split)
        ctx = _context(name, subset, path, ctx_kwargs)
        limit_n = _resolve_limit(limit, path, max_record_bytes)
        for item in _subset_items(fmt, path, ctx, limit_n, max_record_bytes):
            if strict and isinstance(item, RecordError):
                raise item
            yield subset, item


def with_answers(samples: list[Sample], record: Mapping[str, Any], origin: Origin,
                 name: str) -> list[Sample]:
    """``samples`` (one record's) carrying the record's answers: field ``name`` holds a string,
    or for a record with paraphrases a list of one answer per phrasing (the question first).
    No answer (absent, null, blank) is a bad record, never an empty answer."""
    value = record.get(name)
    values = value if isinstance(value, list) else [value]
    if len(samples) > 1 and not isinstance(value, list):
        raise record_error(origin, name, f"a record with {len(samples)} phrasings needs a list "
                                         f"of {len(samples)} answers, the question's first")
    if len(values) != len(samples):
        raise record_error(origin, name, f"{len(values)} answers for {len(samples)} phrasings")
    out = []
    for sample, answer in zip(samples, values, strict=True):
        if isinstance(answer, bool) or not isinstance(answer, str | int | float) or str(answer).strip() == "":
            raise record_error(origin, name, "no answer (absent, empty or not text)")
        out.append(replace(sample, answer=str(answer)))
    return out


def _context(
    name: str,
    subset: str,
    path: Path,
    ctx_kwargs: Mapping[str, Any] | None,
) -> FormatContext:
    extra = dict(ctx_kwargs or {})
    reserved = {"dataset", "subset", "base_dir"} & extra.keys()
    try:
        if reserved:
            raise TypeError(f"reserved keys {sorted(reserved)}")
        return FormatContext(name, subset, path.parent, **extra)
    except TypeError as exc:
        raise ConfigError(f"{name}: bad dataset options: {exc}") from None


def _resolve_limit(limit: int | float | None, path: Path, max_record_bytes: int) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, float):
        return limit_count(limit, count_records(path, max_record_bytes=max_record_bytes))
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
            samples = [fmt.record_to_sample(r, origin, ctx) for r in records]
            if ctx.answer_field:
                samples = with_answers(samples, record, origin, ctx.answer_field)
            yield from samples
        except RecordError as exc:
            yield exc
        except MediaError as exc:  # a format should convert these; never lose the origin
            yield record_error(origin, "<media>", str(exc))
