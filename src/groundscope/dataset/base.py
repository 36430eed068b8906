"""What every dataset format shares: the per-subset ``FormatContext`` and the format
function types. Below the formats and the registry (``dataset/__init__.py``), so neither
imports the other's module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundscope.errors import RecordError
from groundscope.types import Origin, Sample

__all__ = ["ExpandRecord", "FormatContext", "RecordToSample", "record_error"]


@dataclass(frozen=True)
class FormatContext:
    """What a format function needs besides the record: one per (dataset, subset).

    ``base_dir`` is the dataset file's directory (relative media paths resolve against it
    first; it is an allowed media root).
    ``human_label_field`` is the record column holding a human correct/incorrect label
    (``judge.human_label_field``); formats keep it as ``metadata["human_label"]``.
    ``answer_field`` (``--eval-type answers`` without an answers file): the record field
    holding the answer, kept as ``Sample.answer``; a record without one is bad.
    ``max_media`` (``TaskConfig.max_media_per_record``): a record supplying more media is
    bad, found before any of them is looked at.
    """

    dataset: str
    subset: str
    base_dir: Path | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    shuffle_choices: bool = False
    seed: int | None = None
    human_label_field: str = "human_label"
    max_media: int = 64
    answer_field: str | None = None  # --eval-type answers: the record's answer (``prediction``)


RecordToSample = Callable[[dict[str, Any], Origin, FormatContext], Sample]
ExpandRecord = Callable[[dict[str, Any], Origin], list[dict[str, Any]]]


def record_error(origin: Origin, field: str, problem: str) -> RecordError:
    """The error of one bad record, shown as ``file:line: field: problem``."""
    return RecordError(origin.path, origin.line, field, problem)
