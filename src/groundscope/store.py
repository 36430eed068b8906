"""The run directory: append-only predictions and reviews, the resume index.

Layout (schema version 1)::

    <run_dir>/
      config.json                               the task config, redacted (config.redacted())
      predictions/<model>/<dataset>_<subset>.jsonl   one line per finished request
      reviews/<model>/<dataset>_<subset>.jsonl       one line per (sample, scorer)
      reports/<model>/<dataset>.json                  the versioned dataset report
      skipped.jsonl                             bad records: file, line, field, problem
      report.html                               (report/html.py)
      logs/eval_log.log

Every line is written and flushed as soon as it is known, so a crash loses at most the
line being written; a torn last line is dropped when the file is read back. A resumed run
matches saved predictions by ``(sample_id, repeat)`` *and* the request hash, so a changed
prompt, model or generation config is requested again, never silently reused. When a run
ends, files holding superseded lines are compacted so every sample appears exactly once.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import weakref
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from groundscope.errors import StoreError
from groundscope.runlock import lock_dir, unlock_dir
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

SCHEMA_VERSION = 1
_UNSAFE = re.compile(r"[^\w.\-]+")


def safe_name(name: str) -> str:
    """A file-system-safe version of a model / dataset / subset name."""
    return _UNSAFE.sub("_", name).strip("._") or "_"


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=str) + b"\n"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Read a JSONL file written by the store; a torn (unterminated) last line is skipped."""
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # torn tail from a crash mid-write
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise StoreError(f"{path}: corrupt line: {exc}") from None


def repair_tail(path: Path) -> None:
    """Cut a torn last line (no newline) so appended lines start clean."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = path.read_bytes()
        fh.truncate(data.rfind(b"\n") + 1)


# ---------------------------------------------------------------- (de)serialisation


def message_to_json(msg: Message) -> dict[str, Any]:
    """A message for outputs: media by description, never by payload."""
    if isinstance(msg.content, str):
        return {"role": msg.role, "content": msg.content}
    parts: list[dict[str, Any]] = []
    for p in msg.content:
        if isinstance(p, MediaPart):
            parts.append({"type": p.media.kind.value, "media": p.media.display()})
        else:
            parts.append({"type": "text", "text": p.text})
    return {"role": msg.role, "content": parts}


def sample_to_json(sample: Sample) -> dict[str, Any]:
    return {
        "origin": str(sample.origin),
        "question": sample.question,
        "target": list(sample.target),
        "answer_kind": sample.answer_kind.value,
        "choices": list(sample.choices),
        "metadata": dict(sample.metadata),
        "messages": [message_to_json(m) for m in sample.messages],
    }


def _message_from_json(row: Mapping[str, Any], base_dir: Path | None = None) -> Message:
    content = row["content"]
    if isinstance(content, str):
        return Message(row["role"], content)
    parts: list[ContentPart] = []
    for part in content:
        if part["type"] == "text":
            parts.append(TextPart(part["text"]))
        else:  # media kept by description: a path re-resolves against the dataset's folder
            parts.append(MediaPart(MediaRef(Modality(part["type"]), part["media"],
                                            base_dir=base_dir)))
    return Message(row["role"], tuple(parts))


def sample_from_json(row: Mapping[str, Any], dataset: str, subset: str) -> Sample:
    """The scoring view of a saved sample: media by description (local paths stay loadable,
    relative to the dataset file; inline media are a content hash only)."""
    data = row["sample"]
    path, _, line = data["origin"].rpartition(":")
    return Sample(
        id=str(row["sample_id"]), dataset=dataset, subset=subset,
        messages=tuple(_message_from_json(m, Path(path).parent) for m in data["messages"]),
        origin=Origin(Path(path), int(line) if line.isdigit() else 0),
        target=tuple(data["target"]), answer_kind=AnswerKind(data["answer_kind"]),
        choices=tuple(data["choices"]), question=data["question"], metadata=data["metadata"],
    )


def prediction_to_json(p: Prediction) -> dict[str, Any]:
    c = p.completion
    return {
        "request_hash": p.request_hash,
        "status": p.status.value,
        "prediction": c.text if c else None,
        "reasoning": c.reasoning if c else None,
        "model": c.model if c else None,
        "finish_reason": c.finish_reason if c else None,
        "usage": (
            {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens,
             "total_tokens": c.usage.total_tokens} if c else None
        ),
        "error": p.error,
        "error_kind": p.error_kind,
        "attempts": p.attempts,
        "latency_s": round(p.latency_s, 6),
    }


def prediction_from_json(row: Mapping[str, Any]) -> Prediction:
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


def score_to_json(s: Score) -> dict[str, Any]:
    row = {"scorer": s.scorer, "status": s.status.value, "values": dict(s.values),
           "extracted": s.extracted, "detail": dict(s.detail)}
    if s.weights:  # only ratio (micro) metrics carry weights; other rows stay as they were
        row["weights"] = dict(s.weights)
    return row


def score_from_json(row: Mapping[str, Any]) -> Score:
    return Score(
        sample_id=str(row["sample_id"]), scorer=row["scorer"], status=ScoreStatus(row["status"]),
        values={k: float(v) for k, v in (row.get("values") or {}).items()},
        extracted=row.get("extracted"), detail=row.get("detail") or {},
        repeat=int(row.get("repeat", 0)),
        weights={k: float(v) for k, v in (row.get("weights") or {}).items()},
    )


# ---------------------------------------------------------------- the store


@dataclass
class _Shard:
    """One append-only JSONL file and the keys already written to it.

    Only the keys' hashes are kept, 8 bytes a line: a key written twice (found on close)
    marks the file for compaction; a rare hash collision only costs a needless compaction.
    """

    path: Path
    key_fields: tuple[str, ...]
    handle: IO[bytes] | None = None
    keys: array[int] = field(default_factory=lambda: array("q"))

    def append(self, row: Mapping[str, Any]) -> None:
        if self.handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            repair_tail(self.path)
            self.handle = self.path.open("ab")
        if self.key_fields:
            self.keys.append(hash(tuple(row[f] for f in self.key_fields)))
        self.handle.write(_dumps(row))
        self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            self.handle = None
        if len(set(self.keys)) < len(self.keys):  # a key written again: keep its last line
            self._compact()

    def _compact(self) -> None:
        latest: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in read_jsonl(self.path):
            key = tuple(row[f] for f in self.key_fields)
            latest.pop(key, None)  # keep the order of the last write
            latest[key] = row
        tmp = self.path.with_suffix(".jsonl.tmp")
        with tmp.open("wb") as fh:
            for row in latest.values():
                fh.write(_dumps(row))
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(self.path)
        self.keys = array("q", sorted(set(self.keys)))


class RunStore:
    """Owns one run directory. Not thread-safe: used from the runner's event loop only.

    ``create`` and ``open`` take an exclusive lock on the directory (``flock`` on
    ``.groundscope.lock``, which holds the owner's pid) until :meth:`unlock`, so two
    processes never append to one run at once; the system drops the lock of a process that
    dies, so a crash leaves nothing to clean up.
    """

    def __init__(self, run_dir: Path, model_name: str) -> None:
        self.run_dir = run_dir
        self.model_dir = safe_name(model_name)
        self._shards: dict[Path, _Shard] = {}
        self._paths: dict[tuple[str, str, str], Path] = {}
        self._unlock: Callable[[], None] | None = None

    def lock(self) -> RunStore:
        """Take the directory's lock (StoreError when another process holds it). Stores of
        one process share it: it is released when the last of them unlocks."""
        if self._unlock is None and lock_dir(self.run_dir):
            self._unlock = weakref.finalize(self, unlock_dir, self.run_dir)  # also if dropped
        return self

    def unlock(self) -> None:
        """Release this store's hold on the directory's lock (idempotent)."""
        release, self._unlock = self._unlock, None
        if release is not None:
            release()

    # -- opening

    @classmethod
    def create(cls, work_dir: str | Path, model_name: str, *, no_timestamp: bool = False) -> RunStore:
        root = Path(work_dir)
        if no_timestamp:
            run_dir = root
        else:
            stamp = _dt.datetime.now().strftime("%Y%m%d_%H%M%S")
            run_dir = root / stamp
            n = 1
            while run_dir.exists():
                n += 1
                run_dir = root / f"{stamp}_{n}"
        run_dir.mkdir(parents=True, exist_ok=True)
        return cls(run_dir, model_name).lock()

    @classmethod
    def open(cls, run_dir: str | Path, model_name: str) -> RunStore:
        path = Path(run_dir)
        if not path.is_dir():
            raise StoreError(f"use_cache: run directory not found: {path}")
        return cls(path, model_name).lock()

    # -- paths

    def _subset_file(self, kind: str, dataset: str, subset: str) -> Path:
        path = self._paths.get((kind, dataset, subset))
        if path is None:  # built once: this is on the per-sample path
            name = f"{safe_name(dataset)}_{safe_name(subset)}.jsonl"
            path = self._paths[(kind, dataset, subset)] = self.run_dir / kind / self.model_dir / name
        return path

    def predictions_file(self, dataset: str, subset: str) -> Path:
        return self._subset_file("predictions", dataset, subset)

    def reviews_file(self, dataset: str, subset: str) -> Path:
        return self._subset_file("reviews", dataset, subset)

    def report_file(self, dataset: str) -> Path:
        return self.run_dir / "reports" / self.model_dir / f"{safe_name(dataset)}.json"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "logs" / "eval_log.log"

    # -- writing

    def write_config(self, redacted: Mapping[str, Any]) -> None:
        data = {"schema_version": SCHEMA_VERSION, **redacted}
        (self.run_dir / "config.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))

    def _shard(self, path: Path, key_fields: tuple[str, ...]) -> _Shard:
        shard = self._shards.get(path)
        if shard is None:
            shard = self._shards[path] = _Shard(path, key_fields)
            if path.exists():
                for row in read_jsonl(path):
                    shard.keys.append(hash(tuple(row[f] for f in key_fields)))
        return shard

    def append_prediction(self, dataset: str, subset: str, sample: Sample, pred: Prediction) -> None:
        row = {"sample_id": sample.id, "repeat": pred.repeat, "dataset": dataset, "subset": subset,
               **prediction_to_json(pred), "sample": sample_to_json(sample)}
        self._shard(self.predictions_file(dataset, subset), ("sample_id", "repeat")).append(row)

    def append_score(self, dataset: str, subset: str, score: Score, request_hash: str) -> None:
        row = {"sample_id": score.sample_id, "repeat": score.repeat, "dataset": dataset,
               "subset": subset, "request_hash": request_hash, **score_to_json(score)}
        self._shard(self.reviews_file(dataset, subset), ("sample_id", "repeat", "scorer")).append(row)

    def append_skipped(self, dataset: str, subset: str, problem: str) -> None:
        """One bad record; keyed, so a resumed run that meets it again does not count it twice."""
        row = {"dataset": dataset, "subset": subset, "problem": problem}
        self._shard(self.run_dir / "skipped.jsonl", ("dataset", "subset", "problem")).append(row)

    def write_report(self, dataset: str, report: Mapping[str, Any]) -> Path:
        path = self.report_file(dataset)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2, default=str))
        return path

    def close(self) -> None:
        for shard in self._shards.values():
            shard.close()

    # -- reading back (resume, re-score, re-report)

    def load_predictions(self, dataset: str, subset: str) -> dict[tuple[str, int], dict[str, Any]]:
        """Saved prediction rows by (sample_id, repeat); later lines win."""
        path = self.predictions_file(dataset, subset)
        if not path.exists():
            return {}
        return {(str(r["sample_id"]), int(r["repeat"])): r for r in read_jsonl(path)}

    def load_reviews(self, dataset: str, subset: str) -> dict[tuple[str, int, str], dict[str, Any]]:
        path = self.reviews_file(dataset, subset)
        if not path.exists():
            return {}
        return {(str(r["sample_id"]), int(r["repeat"]), r["scorer"]): r for r in read_jsonl(path)}

    def saved_subsets(self) -> list[tuple[str, str]]:
        """(dataset, subset) pairs that have a predictions file, from their rows."""
        found: list[tuple[str, str]] = []
        folder = self.run_dir / "predictions" / self.model_dir
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            for row in read_jsonl(path):
                found.append((row["dataset"], row["subset"]))
                break
        return found
