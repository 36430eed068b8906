"""A run directory's rows: one pydantic model per file kind, the one schema of a saved row.

=============  ==========================================  ==================================
kind           file                                        model, key
=============  ==========================================  ==================================
``prediction`` ``predictions/<model>/<dataset>_<subset>``   :class:`PredictionRow`,
                                                           ``(sample_id, repeat)``
``review``     ``reviews/<model>/<dataset>_<subset>``       :class:`ReviewRow`,
                                                           ``(sample_id, repeat, scorer)``
``skipped``    ``skipped.jsonl``                           :class:`SkippedRow`,
                                                           ``(dataset, subset, problem)``
=============  ==========================================  ==================================

Read: :func:`read_rows` yields a file's rows after :func:`check_row` (the kind's model, and
finite ``values`` / ``weights``); a row that does not fit is one ``StoreError`` line
``file:line: field: problem`` (never a traceback further on). Extra keys are kept, unchecked
and unused (a row copied by ``merge`` is written as it was read).

Written: :func:`encode_row` turns a row into its JSONL line and passes the decoded line
through the same :func:`check_row` the reader uses, so a row groundscope writes is by
construction one it reads back (DESIGN rule 17); a row that would not be is a
``StoreError`` before anything is written. Rows are built from the value types
(``types.py``) and turned back into them by ``rowcodec.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from groundscope.errors import StoreError
from groundscope.jsonl import dumps_line, read_jsonl_numbered
from groundscope.types import MAX_TOKEN_COUNT, AnswerKind, PredictionStatus, ScoreStatus
from groundscope.usage import RowUsage

__all__ = ["KEYS", "Kind", "check_row", "encode_row", "read_rows", "read_rows_numbered"]

_LOOSE = ConfigDict(extra="allow")
Id = StrictStr | StrictInt
Number = Annotated[float, Field(strict=False)]
TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_TOKEN_COUNT)]  # as types.Usage holds them
Kind = Literal["prediction", "review", "skipped"]


class PartRow(BaseModel):
    """A message part: ``{"type": "text", "text"}`` or ``{"type": <modality>, "media"}``."""

    model_config = _LOOSE
    type: StrictStr
    text: StrictStr | None = None
    media: StrictStr | None = None


class MessageRow(BaseModel):
    model_config = _LOOSE
    role: StrictStr
    content: StrictStr | list[PartRow] | None


class SampleRow(BaseModel):
    """A prediction's ``sample``: what scoring needs, media by description."""

    model_config = _LOOSE
    origin: StrictStr
    question: StrictStr = ""
    target: list[StrictStr] = []
    answer_kind: AnswerKind = AnswerKind.FREE
    choices: list[StrictStr] = []
    metadata: dict[str, Any] = {}
    messages: list[MessageRow]


class _Keyed(BaseModel):
    model_config = _LOOSE
    sample_id: Id
    repeat: StrictInt = 0


class PredictionRow(_Keyed):
    """One finished request (``rowcodec.prediction_row``)."""

    dataset: StrictStr
    subset: StrictStr
    status: PredictionStatus
    request_hash: StrictStr = ""
    prediction: StrictStr | None = None
    attempts: StrictInt = 1
    latency_s: Number = 0.0
    usage: dict[Literal["prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens",
                        "cached_tokens"], TokenCount] | None = None
    sample: SampleRow


class ReviewRow(_Keyed):
    """One scorer's verdict on one prediction (``rowcodec.review_row``)."""

    scorer: StrictStr
    status: ScoreStatus
    values: dict[str, Number] = {}
    weights: dict[str, Number] = {}
    detail: dict[str, Any] | None = None
    usage: RowUsage | None = None  # judge calls: {step: {model: {"billed", "cached"}}}


class SkippedRow(BaseModel):
    """One bad record of a dataset."""

    model_config = _LOOSE
    dataset: StrictStr
    subset: StrictStr
    problem: StrictStr


_MODELS: dict[str, type[BaseModel]] = {"prediction": PredictionRow, "review": ReviewRow,
                                       "skipped": SkippedRow}
KEYS: dict[Kind, tuple[str, ...]] = {"prediction": ("sample_id", "repeat"),
                                     "review": ("sample_id", "repeat", "scorer"),
                                     "skipped": ("dataset", "subset", "problem")}


def check_row(kind: Kind, row: Mapping[str, Any], where: str) -> None:
    """``StoreError`` ``where: field: problem`` unless ``row`` fits its kind's model."""
    try:
        _MODELS[kind].model_validate(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or kind
        raise StoreError(f"{where}: {field}: {err['msg']}") from None
    for name in ("values", "weights"):
        if isinstance(row.get(name), dict) and not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in row[name].values()):
            raise StoreError(f"{where}: {name}: every value must be a finite number")


def encode_row(kind: Kind, row: Mapping[str, Any], path: Path) -> bytes:
    """The JSONL line of ``row``, checked as read back (see the module docstring)."""
    line = dumps_line(row)
    check_row(kind, orjson.loads(line), f"{path}: refusing to write a row it could not read")
    return line


def read_rows(path: Path, kind: Kind) -> Iterator[dict[str, Any]]:
    """The rows of ``path`` (see the module docstring), one at a time."""
    for _, row in read_rows_numbered(path, kind):
        yield row


def read_rows_numbered(path: Path, kind: Kind) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of ``path``, checked as :func:`read_rows` checks them."""
    for lineno, row in read_jsonl_numbered(path):
        check_row(kind, row, f"{path}:{lineno}")
        yield lineno, row
