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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import orjson
from pydantic import ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from groundscope.errors import StoreError
from groundscope.jsonl import dumps_line, read_jsonl_numbered
from groundscope.types import MAX_TOKEN_COUNT, AnswerKind, PredictionStatus, ScoreStatus
from groundscope.usage import RowUsage

__all__ = ["KEYS", "Kind", "check_row", "encode_row", "read_rows", "read_rows_numbered"]

Id = StrictStr | StrictInt
Number = Annotated[float, Field(strict=False)]
Seconds = Annotated[float, Field(strict=False, ge=0, allow_inf_nan=False)]  # "Infinity": no
TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_TOKEN_COUNT)]  # as types.Usage holds them
Kind = Literal["prediction", "review", "skipped"]
_loose = with_config(ConfigDict(extra="allow"))  # a row is a dict: TypedDicts, checked fast


@_loose
class PartRow(TypedDict):
    """A message part: ``{"type": "text", "text"}`` or ``{"type": <modality>, "media"}``."""

    type: StrictStr
    text: NotRequired[StrictStr | None]
    media: NotRequired[StrictStr | None]


@_loose
class MessageRow(TypedDict):
    role: StrictStr
    content: StrictStr | list[PartRow] | None


@_loose
class SampleRow(TypedDict):
    """A prediction's ``sample``: what scoring needs, media by description."""

    origin: StrictStr
    question: NotRequired[StrictStr]
    target: NotRequired[list[StrictStr]]
    answer_kind: NotRequired[AnswerKind]
    choices: NotRequired[list[StrictStr]]
    metadata: NotRequired[dict[str, Any]]
    messages: list[MessageRow]


@_loose
class PredictionRow(TypedDict):
    """One finished request (``rowcodec.prediction_row``)."""

    sample_id: Id
    repeat: NotRequired[StrictInt]
    dataset: StrictStr
    subset: StrictStr
    status: PredictionStatus
    request_hash: NotRequired[StrictStr]
    prediction: NotRequired[StrictStr | None]
    attempts: NotRequired[StrictInt]
    latency_s: NotRequired[Seconds]
    usage: NotRequired[dict[Literal["prompt_tokens", "completion_tokens", "total_tokens",
                                    "reasoning_tokens", "cached_tokens"], TokenCount] | None]
    sample: SampleRow


@_loose
class ReviewRow(TypedDict):
    """One scorer's verdict on one prediction (``rowcodec.review_row``)."""

    sample_id: Id
    repeat: NotRequired[StrictInt]
    scorer: StrictStr
    status: ScoreStatus
    values: NotRequired[dict[str, Number]]
    weights: NotRequired[dict[str, Number]]
    detail: NotRequired[dict[str, Any] | None]
    usage: NotRequired[RowUsage | None]  # judge calls: {step: {model: {"billed", "cached"}}}


@_loose
class SkippedRow(TypedDict):
    """One bad record of a dataset."""

    dataset: StrictStr
    subset: StrictStr
    problem: StrictStr


_MODELS: dict[str, TypeAdapter[Any]] = {
    "prediction": TypeAdapter(PredictionRow), "review": TypeAdapter(ReviewRow),
    "skipped": TypeAdapter(SkippedRow)}
KEYS: dict[Kind, tuple[str, ...]] = {"prediction": ("sample_id", "repeat"),
                                     "review": ("sample_id", "repeat", "scorer"),
                                     "skipped": ("dataset", "subset", "problem")}


def check_row(kind: Kind, row: Mapping[str, Any], path: Path, lineno: int | None) -> None:
    """``StoreError`` ``path:lineno: field: problem`` unless ``row`` fits its kind's model
    (no ``lineno``: a row about to be written to ``path``)."""
    try:
        _MODELS[kind].validate_python(row)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or kind
        raise StoreError(f"{_where(path, lineno)}: {field}: {err['msg']}") from None
    for name in ("values", "weights"):
        numbers = row.get(name)
        if not numbers:  # checked a dict above; a plain loop: this is on the per-sample path
            continue
        for v in numbers.values():
            if (type(v) is not float and type(v) is not int) or not math.isfinite(v):
                raise StoreError(f"{_where(path, lineno)}: {name}: every value must be a finite "
                                 "number")


def _where(path: Path, lineno: int | None) -> str:
    return f"{path}:{lineno}" if lineno is not None else f"{path}: refusing to write a row it could not read"


def encode_row(kind: Kind, row: Mapping[str, Any], path: Path) -> bytes:
    """The JSONL line of ``row``, checked as read back (see the module docstring)."""
    line = dumps_line(row)
    check_row(kind, orjson.loads(line), path, None)
    return line


def read_rows(path: Path, kind: Kind) -> Iterator[dict[str, Any]]:
    """The rows of ``path`` (see the module docstring), one at a time."""
    for _, row in read_rows_numbered(path, kind):
        yield row


def read_rows_numbered(path: Path, kind: Kind) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of ``path``, checked as :func:`read_rows` checks them."""
    for lineno, row in read_jsonl_numbered(path):
        check_row(kind, row, path, lineno)
        yield lineno, row


def read_rows_picked(path: Path, kind: Kind,
                     picked: Callable[[dict[str, Any]], bool]) -> Iterator[dict[str, Any]]:
    """The rows of ``path`` that ``picked`` takes, each checked as :func:`read_rows` checks
    them; the others are parsed (bounded, JSON objects) but not checked, so ``picked`` must
    expect any JSON object. For a reader that wants a few rows of a large file: the page's
    first 1,000 samples' reviews in a file of 10,000 samples' (two thirds of the reading
    cost was the check)."""
    for lineno, row in read_jsonl_numbered(path):
        if picked(row):
            check_row(kind, row, path, lineno)
            yield row
