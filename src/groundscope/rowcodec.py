"""The value types (``types.py``) as a run directory's rows (``rows.py``), and back.

``prediction_row`` / ``review_row`` / ``skipped_row`` build the row of each file kind that
``RunStore`` writes (through ``rows.encode_row``: checked by the model that reads it);
``prediction_from_json`` / ``score_from_json`` / ``sample_from_json`` turn a checked row
back into the value types. Media are kept by description (``media.describe``), never by
payload; a saved sample's local media re-resolve against its dataset's folder only when
that folder lies inside the run's honoured media roots (:func:`origin_dir`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from groundscope.fileio import within
from groundscope.media import describe
from groundscope.types import (
    AnswerKind,
    Completion,
    ContentPart,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Prediction,
    PredictionStatus,
    Sample,
    Score,
    ScoreStatus,
    TextPart,
    Usage,
)


def origin_dir(origin: Any, roots: Iterable[str]) -> Path | None:
    """The folder of a saved sample's ``origin`` (``path:line``), a base for its relative
    media paths, only when it lies inside one of ``roots`` (the honoured recorded roots):
    a predictions line never widens what may be read."""
    if not isinstance(origin, str):
        return None
    path, _, _line = origin.rpartition(":")
    if not path:
        return None
    # a relative origin (a relative ``local_path``) is the run's working directory's, as a
    # relative medium is: read from the same directory, it is found again
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    if any(within(folder, os.path.realpath(r)) for r in roots):
        return Path(folder)
    return None


# ---------------------------------------------------------------- to rows


def message_to_json(msg: Message) -> dict[str, Any]:
    """A message for outputs: media by description, never by payload; tool-calling keys
    (``name``, ``tool_calls``, ``tool_call_id``) as sent."""
    if isinstance(msg.content, str):
        return {"role": msg.role, "content": msg.content, **msg.tool_fields()}
    parts: list[dict[str, Any]] = []
    for p in msg.content:
        if isinstance(p, MediaPart):
            parts.append({"type": p.media.kind.value, "media": describe(p.media)})
        else:
            parts.append({"type": "text", "text": p.text})
    return {"role": msg.role, "content": parts, **msg.tool_fields()}


def sample_to_json(sample: Sample) -> dict[str, Any]:
    """A prediction row's ``sample`` (``rows.SampleRow``)."""
    return {
        "origin": str(sample.origin),
        "question": sample.question,
        "target": list(sample.target),
        "answer_kind": sample.answer_kind.value,
        "choices": list(sample.choices),
        "metadata": dict(sample.metadata),
        "messages": [message_to_json(m) for m in sample.messages],
    }


def prediction_to_json(p: Prediction) -> dict[str, Any]:
    """A prediction row's outcome fields (no key, no sample)."""
    c = p.completion
    return {
        "request_hash": p.request_hash,
        "status": p.status.value,
        "prediction": c.text if c else None,
        "reasoning": c.reasoning if c else None,
        "model": c.model if c else None,
        "finish_reason": c.finish_reason if c else None,
        "usage": _usage_json(c.usage) if c else None,
        "error": p.error,
        "error_kind": p.error_kind,
        "attempts": p.attempts,
        "latency_s": round(p.latency_s, 6),
    }


def _usage_json(u: Usage) -> dict[str, int]:
    out = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
           "total_tokens": u.total_tokens}
    if u.reasoning_tokens:  # the details only when the API reported them
        out["reasoning_tokens"] = u.reasoning_tokens
    if u.cached_tokens:
        out["cached_tokens"] = u.cached_tokens
    return out


def score_to_json(s: Score) -> dict[str, Any]:
    """A review row's verdict fields (no key)."""
    row = {"scorer": s.scorer, "status": s.status.value, "values": dict(s.values),
           "extracted": s.extracted, "detail": dict(s.detail)}
    if s.weights:  # only ratio (micro) metrics carry weights; other rows stay as they were
        row["weights"] = dict(s.weights)
    if s.usage:  # judge calls (usage.py); rows of scorers that ask no judge stay as they were
        row["usage"] = dict(s.usage)
    return row


def prediction_row(dataset: str, subset: str, sample: Sample, pred: Prediction) -> dict[str, Any]:
    """The predictions file's row (``rows.PredictionRow``) of ``pred``."""
    return {"sample_id": sample.id, "repeat": pred.repeat, "dataset": dataset, "subset": subset,
            **prediction_to_json(pred), "sample": sample_to_json(sample)}


def review_row(dataset: str, subset: str, score: Score, request_hash: str) -> dict[str, Any]:
    """The reviews file's row (``rows.ReviewRow``) of ``score``."""
    return {"sample_id": score.sample_id, "repeat": score.repeat, "dataset": dataset,
            "subset": subset, "request_hash": request_hash, **score_to_json(score)}


def skipped_row(dataset: str, subset: str, problem: str) -> dict[str, Any]:
    """skipped.jsonl's row (``rows.SkippedRow``)."""
    return {"dataset": dataset, "subset": subset, "problem": problem}


# ---------------------------------------------------------------- from (checked) rows


def _message_from_json(row: Mapping[str, Any], base_dir: Path | None = None) -> Message:
    content = row["content"]
    tools = {"name": row.get("name"), "tool_call_id": row.get("tool_call_id"),
             "tool_calls": tuple(row.get("tool_calls") or ())}
    if isinstance(content, str):
        return Message(row["role"], content, **tools)
    parts: list[ContentPart] = []
    for part in content:
        if part["type"] == "text":
            parts.append(TextPart(part["text"]))
        else:  # media kept by description: a path re-resolves against the dataset's folder
            parts.append(MediaPart(MediaRef(Modality(part["type"]), part["media"],
                                            base_dir=base_dir)))
    return Message(row["role"], tuple(parts), **tools)


def sample_from_json(row: Mapping[str, Any], dataset: str, subset: str,
                     roots: Iterable[str] = ()) -> Sample:
    """The scoring view of a saved sample: media by description (local paths stay loadable,
    relative to the dataset file when its folder is inside ``roots``, the run's honoured
    media roots; inline media are a content hash only)."""
    data = row["sample"]
    path, _, line = data["origin"].rpartition(":")
    base = origin_dir(data["origin"], roots)
    return Sample(
        id=str(row["sample_id"]), dataset=dataset, subset=subset,
        messages=tuple(_message_from_json(m, base) for m in data["messages"]),
        origin=Origin(Path(path), int(line) if line.isdigit() else 0),
        target=tuple(data["target"]), answer_kind=AnswerKind(data["answer_kind"]),
        choices=tuple(data["choices"]), question=data["question"], metadata=data["metadata"],
    )


def prediction_from_json(row: Mapping[str, Any]) -> Prediction:
    """The ``Prediction`` of a checked prediction row."""
    completion = None
    if row.get("prediction") is not None:
        usage = row.get("usage") or {}
        completion = Completion(
            text=row["prediction"], model=row.get("model") or "",
            finish_reason=row.get("finish_reason"), reasoning=row.get("reasoning"),
            usage=Usage(**{k: int(v) for k, v in usage.items()}),
        )
    return Prediction(
        sample_id=str(row["sample_id"]), request_hash=row["request_hash"],
        status=PredictionStatus(row["status"]), completion=completion, error=row.get("error"),
        error_kind=row.get("error_kind"), attempts=int(row.get("attempts", 1)),
        latency_s=float(row.get("latency_s", 0.0)), repeat=int(row.get("repeat", 0)),
    )


def score_from_json(row: Mapping[str, Any]) -> Score:
    """The ``Score`` of a checked review row."""
    return Score(
        sample_id=str(row["sample_id"]), scorer=row["scorer"], status=ScoreStatus(row["status"]),
        values={k: float(v) for k, v in (row.get("values") or {}).items()},
        extracted=row.get("extracted"), detail=row.get("detail") or {},
        repeat=int(row.get("repeat", 0)),
        weights={k: float(v) for k, v in (row.get("weights") or {}).items()},
        usage=row.get("usage") or {},
    )
