"""A run directory's saved rows, checked where they are read (a run directory is untrusted).

``read_rows(path, kind)`` yields the rows of a predictions (``"prediction"``) or reviews
(``"review"``) JSONL file after checking, with pydantic, every field groundscope reads from
them; a row that does not fit is one ``StoreError`` line ``file:line: field: problem``
(never a traceback further on). Extra keys are kept, unchecked and unused.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from groundscope.errors import StoreError
from groundscope.jsonl import read_jsonl_numbered
from groundscope.types import MAX_TOKEN_COUNT, AnswerKind, PredictionStatus, ScoreStatus
from groundscope.usage import RowUsage

__all__ = ["read_rows", "read_rows_numbered"]

_LOOSE = ConfigDict(extra="allow")
Id = StrictStr | StrictInt
Number = Annotated[float, Field(strict=False)]
TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_TOKEN_COUNT)]  # as types.Usage holds them


class _Part(BaseModel):
    model_config = _LOOSE
    type: StrictStr
    text: StrictStr | None = None
    media: StrictStr | None = None


class _Message(BaseModel):
    model_config = _LOOSE
    role: StrictStr
    content: StrictStr | list[_Part] | None


class _Sample(BaseModel):
    model_config = _LOOSE
    origin: StrictStr
    question: StrictStr = ""
    target: list[StrictStr] = []
    answer_kind: AnswerKind = AnswerKind.FREE
    choices: list[StrictStr] = []
    metadata: dict[str, Any] = {}
    messages: list[_Message]


class _Keyed(BaseModel):
    model_config = _LOOSE
    sample_id: Id
    repeat: StrictInt = 0


class _Prediction(_Keyed):
    dataset: StrictStr
    subset: StrictStr
    status: PredictionStatus
    request_hash: StrictStr = ""
    prediction: StrictStr | None = None
    attempts: StrictInt = 1
    latency_s: Number = 0.0
    usage: dict[Literal["prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens",
                        "cached_tokens"], TokenCount] | None = None
    sample: _Sample


class _Review(_Keyed):
    scorer: StrictStr
    status: ScoreStatus
    values: dict[str, Number] = {}
    weights: dict[str, Number] = {}
    detail: dict[str, Any] | None = None
    usage: RowUsage | None = None  # judge calls: {step: {model: {"billed", "cached"}}}


class _Skipped(BaseModel):
    model_config = _LOOSE
    dataset: StrictStr
    subset: StrictStr
    problem: StrictStr


_MODELS: dict[str, type[BaseModel]] = {"prediction": _Prediction, "review": _Review,
                                       "skipped": _Skipped}
Kind = Literal["prediction", "review", "skipped"]


def read_rows(path: Path, kind: Kind) -> Iterator[dict[str, Any]]:
    """The rows of ``path`` (see the module docstring)."""
    for _, row in read_rows_numbered(path, kind):
        yield row


def read_rows_numbered(path: Path, kind: Kind) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` of ``path``, checked as :func:`read_rows` checks them."""
    model = _MODELS[kind]
    for lineno, row in read_jsonl_numbered(path):
        try:
            model.model_validate(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or kind
            raise StoreError(f"{path}:{lineno}: {field}: {err['msg']}") from None
        for name in ("values", "weights"):
            if isinstance(row.get(name), dict) and not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                    for v in row[name].values()):
                raise StoreError(f"{path}:{lineno}: {name}: every value must be a finite number")
        yield lineno, row
