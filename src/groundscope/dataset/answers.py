"""Answers files (``--answers FILE``): answers made elsewhere, joined to a dataset by sample id.

The file is untrusted input, read by the dataset readers (``readers.iter_records``: records
framed and capped at ``max_record_bytes``; a bad line is ``file:line: field: problem``), and
at most :data:`MAX_ANSWERS` answers. Its format is recognised from its name and first record:

=================  ==========================================================================
format             what is read
=================  ==========================================================================
groundscope        ``.jsonl`` lines ``{"id", "prediction"}`` (+ optional ``subset``,
                   ``repeat``); a run directory of one model (or its ``predictions/``
                   files): rows
                   ``sample_id`` / ``repeat`` / ``subset`` / ``prediction`` with status ``ok``
evalscope          a run directory or ``predictions/<model>/<benchmark>_<subset>.jsonl``
                   (``ModelResult`` rows: ``index``, ``model_output.choices[0].message``
                   content) or ``reviews/...jsonl`` (``ReviewResult``: ``index``,
                   ``sample_score.score.prediction``)
vlmevalkit         ``.xlsx`` / ``.tsv`` / ``.csv`` with columns ``index`` and ``prediction``
                   (VLMEvalKit's ``{model}_{dataset}.xlsx``: the benchmark's TSV plus the
                   ``prediction`` column)
lmms-eval          ``samples_*.jsonl`` of ``--log_samples``: ``doc_id`` and ``filtered_resps``
                   (else ``resps``), the first response of a nested list
=================  ==========================================================================

A record without an answer (absent, null, blank) is a bad record: counted and named, never
an empty answer. An id given twice (same subset and repeat) is a bad record too. A line may
carry human grounding labels (``human_hallucinated``, ``human_claims``: ``dataset/labels.py``,
checked as in a dataset record); they stand for the record's own, for that answer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from groundscope.dataset.base import record_error
from groundscope.dataset.labels import grounding_labels
from groundscope.dataset.readers import iter_records
from groundscope.defaults import DEFAULT_MAX_RECORD_BYTES
from groundscope.errors import DatasetError, RecordError
from groundscope.summary import Summary
from groundscope.types import Origin, Sample

__all__ = ["MAX_ANSWERS", "AnswerBook", "read_answers"]

log = logging.getLogger("groundscope")

MAX_ANSWERS = 10_000_000  # answers in one file (the dataset readers' record bound)
MAX_FILES = 10_000  # prediction files of a run directory
SHOWN_IDS = 5  # ids named in a warning before "+N more"

Key = tuple[str | None, str, int]  # (subset or None: any, sample id, repeat)


@dataclass
class AnswerBook:
    """The answers of one file by (subset, id, repeat); which were used; the bad records."""

    source: str
    format: str
    answers: dict[Key, str] = field(default_factory=dict)
    bad: list[RecordError] = field(default_factory=list)
    used: set[Key] = field(default_factory=set)
    labels: dict[Key, dict[str, Any]] = field(default_factory=dict)  # human grounding labels

    def labels_of(self, sample: Sample, repeat: int) -> dict[str, Any]:
        """The human grounding labels given with ``sample``'s ``repeat`` answer (may be none)."""
        for key in ((sample.subset, sample.id, repeat), (None, sample.id, repeat)):
            if key in self.answers:
                return self.labels.get(key, {})
        return {}

    def lookup(self, sample: Sample, repeat: int) -> str | None:
        """The answer of ``sample``'s ``repeat``: its subset's, else one given without subset."""
        for key in ((sample.subset, sample.id, repeat), (None, sample.id, repeat)):
            answer = self.answers.get(key)
            if answer is not None:
                self.used.add(key)
                return answer
        return None

    def require(self, sample: Sample, repeats: int) -> None:
        """``--strict``: a sample without an answer is fatal."""
        for repeat in range(repeats):
            if self.lookup(sample, repeat) is None:
                raise record_error(sample.origin, "id", f"{sample.id!r} has no answer in {self.source}")

    def require_all_used(self) -> None:
        """``--strict``: an answer naming no sample is fatal."""
        extra = self.unused()
        if extra:
            raise DatasetError(f"{self.source}: {len(extra)} answers name no sample of the "
                               f"dataset: {name_ids(extra)}")
        self.used.clear()

    def unused(self) -> list[str]:
        """Ids of the answers no graded sample took (not in the dataset, or beyond --limit)."""
        return [_show(k) for k in self.answers if k not in self.used]


def _show(key: Key) -> str:
    subset, sid, repeat = key
    where = f"{subset}/" if subset else ""
    return f"{where}{sid}" + (f"#r{repeat}" if repeat else "")


def name_ids(ids: list[str]) -> str:
    """The first few ids and a count: ``a, b, c (+12 more)``."""
    shown = ", ".join(repr(i) for i in ids[:SHOWN_IDS])
    return shown + (f" (+{len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else "")


def read_answers(path: Path | str, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> AnswerBook:
    """Read an answers file or a run directory (see the module docstring)."""
    path = Path(path)
    if path.is_dir():
        files = _run_prediction_files(path)
    elif path.is_file():
        files = [path]
    else:
        raise DatasetError(f"{path}: answers file not found")
    book = AnswerBook(str(path), "")
    kinds = []
    for file in files:
        if file.suffix.lower() == ".xlsx":
            kind, records = "vlmevalkit", _iter_xlsx(file, max_record_bytes)
        else:
            stream = iter_records(file, max_record_bytes=max_record_bytes)
            first = next(stream, None)
            kind, records = _recognise(file, first), _chain(first, stream)
        kinds.append(kind)
        _fill(book, records, kind)
    book.format = ", ".join(sorted(set(kinds))) + (" run directory" if path.is_dir() else "")
    return book


def open_answers(path: str, max_record_bytes: int, *, strict: bool) -> AnswerBook:
    """The answers file of a run (``strict``: a bad line is fatal)."""
    book = read_answers(path, max_record_bytes=max_record_bytes)
    if strict and book.bad:
        raise book.bad[0]
    return book


def log_answers(book: AnswerBook) -> None:
    """The one line saying which format the file was read as, then its bad lines."""
    log.info("answers: %s read as %s (%d answers)", book.source, book.format, len(book.answers))
    for bad in book.bad:
        log.warning("skipped bad answer: %s", bad)


class _Run(Protocol):  # plan.DatasetRun, seen from here
    name: str
    summary: Summary


def note_join(book: AnswerBook, runs: Sequence[_Run], missing: Mapping[str, list[str]]) -> None:
    """After grading: the samples without an answer and the answers naming no graded sample,
    each named (first few ids and a count) in the log and the summary's warnings."""
    lines = [(run, f"{len(missing[run.name])} samples have no answer in {book.source}: "
                   f"{name_ids(missing[run.name])}; skipped") for run in runs if missing.get(run.name)]
    extra = book.unused()
    if extra and runs:
        lines.append((runs[0], f"{len(extra)} answers in {book.source} name no graded sample: "
                               f"{name_ids(extra)}; not scored"))
    if book.bad and runs:
        lines.append((runs[0], f"{len(book.bad)} bad lines in {book.source}: skipped"))
    for run, line in lines:
        log.warning("%s", line)
        run.summary.warnings.append(line)


def _run_prediction_files(path: Path) -> list[Path]:
    """A groundscope or EvalScope run directory's predictions: ``predictions/<model>/*.jsonl``."""
    folder = path / "predictions" if (path / "predictions").is_dir() else path
    files = sorted(folder.glob("*/*.jsonl")) or sorted(folder.glob("*.jsonl"))
    if not files:
        raise DatasetError(f"{path}: no predictions/<model>/*.jsonl in this run directory")
    if len(files) > MAX_FILES:
        raise DatasetError(f"{path}: more than {MAX_FILES} prediction files")
    return files


Item = tuple[Origin, dict[str, Any] | RecordError]


def _chain(first: Item | None, rest: Iterator[Item]) -> Iterator[Item]:
    if first is not None:
        yield first
    yield from rest


def _recognise(path: Path, first: Item | None) -> str:
    if first is None or isinstance(first[1], RecordError):
        if first is not None:
            raise first[1]
        raise DatasetError(f"{path}: empty answers file")
    record = first[1]
    if "doc_id" in record and ("filtered_resps" in record or "resps" in record):
        return "lmms-eval"
    if "sample_id" in record and "prediction" in record and "request_hash" in record:
        return "groundscope-run"
    if "index" in record and "model_output" in record:
        return "evalscope-predictions"
    if "index" in record and "sample_score" in record:
        return "evalscope-reviews"
    if "index" in record and "prediction" in record:
        return "vlmevalkit"
    if "id" in record and "prediction" in record:
        return "groundscope"
    raise DatasetError(f"{path}:{first[0].line}: answers file of no known format (keys "
                       f"{sorted(record)[:8]}); expected id + prediction (groundscope), index + "
                       "model_output / sample_score (EvalScope), index + prediction (VLMEvalKit) or "
                       "doc_id + filtered_resps (lmms-eval)")


def _fill(book: AnswerBook, records: Iterator[Item], kind: str) -> None:
    for origin, record in records:
        if isinstance(record, RecordError):
            book.bad.append(record)
            continue
        try:
            key, answer = _ANSWER_OF[kind](record, origin)
            labels = grounding_labels(record, origin) if isinstance(record, Mapping) else {}
        except RecordError as exc:
            book.bad.append(exc)
            continue
        if key is None:  # a run's errored request: no answer, not a bad line
            continue
        if key in book.answers:
            book.bad.append(record_error(origin, "id", f"{_show(key)!r} answered twice"))
            continue
        if len(book.answers) >= MAX_ANSWERS:
            raise DatasetError(f"{origin}: more than {MAX_ANSWERS} answers")
        book.answers[key] = answer
        if labels:
            book.labels[key] = labels


def _text(value: Any, origin: Origin, name: str) -> str:
    if isinstance(value, list):  # lmms-eval: a doc's responses, nested per request; the first
        for _ in range(4):
            if not isinstance(value, list) or not value:
                break
            value = value[0]
    if isinstance(value, bool) or not isinstance(value, str | int | float) or str(value).strip() == "":
        raise record_error(origin, name, "no answer (absent, empty or not text)")
    return str(value)


def _ident(value: Any, origin: Origin, name: str) -> str:
    if isinstance(value, float) and value.is_integer():  # a spreadsheet's integer column
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise record_error(origin, name, "missing or not a string / integer id")
    return str(value).strip()


def _repeat(record: Mapping[str, Any], origin: Origin) -> int:
    value = record.get("repeat", 0)
    if value in (None, ""):
        return 0
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise record_error(origin, "repeat", f"{value!r} is not an integer") from None
    if not 0 <= number < 1000:
        raise record_error(origin, "repeat", f"{number} is not in 0..999")
    return number


def _subset(record: Mapping[str, Any]) -> str | None:
    value = record.get("subset")
    return None if value in (None, "") else str(value)


def _groundscope(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    key = (_subset(record), _ident(record.get("id"), origin, "id"), _repeat(record, origin))
    return key, _text(record.get("prediction"), origin, "prediction")


def _groundscope_run(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    key = (_subset(record), _ident(record.get("sample_id"), origin, "sample_id"), _repeat(record, origin))
    if record.get("status") != "ok":
        return None, ""
    return key, _text(record.get("prediction"), origin, "prediction")


def _vlmevalkit(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    key = (None, _ident(record.get("index"), origin, "index"), 0)
    return key, _text(record.get("prediction"), origin, "prediction")


def _lmms_eval(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    key = (None, _ident(record.get("doc_id"), origin, "doc_id"), 0)
    name = "filtered_resps" if record.get("filtered_resps") not in (None, []) else "resps"
    return key, _text(record.get(name), origin, name)


def _message_text(message: Any, origin: Origin, name: str) -> str:
    """An EvalScope assistant message's text: its string content, or its text parts joined."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "".join(t for t in texts if isinstance(t, str))
    return _text(content, origin, name)


def _evalscope_predictions(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    """EvalScope's ``ModelResult`` row: ``index``, ``model_output.choices[0].message``."""
    key = (None, _ident(record.get("index"), origin, "index"), 0)
    output = record.get("model_output")
    choices = output.get("choices") if isinstance(output, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise record_error(origin, "model_output.choices", "no answer (no choice)")
    return key, _message_text(choices[0].get("message"), origin, "model_output.choices[0].message")


def _evalscope_reviews(record: Mapping[str, Any], origin: Origin) -> tuple[Key | None, str]:
    """EvalScope's ``ReviewResult`` row: ``index``, ``sample_score.score.prediction``."""
    key = (None, _ident(record.get("index"), origin, "index"), 0)
    sample_score = record.get("sample_score")
    score = sample_score.get("score") if isinstance(sample_score, dict) else None
    answer = score.get("prediction") if isinstance(score, dict) else None
    return key, _text(answer, origin, "sample_score.score.prediction")


_ANSWER_OF = {"evalscope-predictions": _evalscope_predictions, "evalscope-reviews": _evalscope_reviews,
              "groundscope": _groundscope, "groundscope-run": _groundscope_run,
              "vlmevalkit": _vlmevalkit, "lmms-eval": _lmms_eval}


def _iter_xlsx(path: Path, max_record_bytes: int) -> Iterator[Item]:
    """The rows of an .xlsx's first sheet as records (openpyxl, read-only, values only)."""
    try:
        import openpyxl  # optional: groundscope[xlsx]
    except ImportError:
        raise DatasetError(f"{path}: reading .xlsx needs openpyxl: pip install 'groundscope[xlsx]'") from None
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # a hostile or broken workbook: one line
        raise DatasetError(f"{path}: not a readable .xlsx: {type(exc).__name__}") from None
    try:
        rows = book.worksheets[0].iter_rows(values_only=True)
        header = [str(h) if h is not None else "" for h in next(rows, ())]
        for number, row in enumerate(rows, 2):
            origin = Origin(path, number)
            if number > MAX_ANSWERS + 1:
                raise DatasetError(f"{origin}: more than {MAX_ANSWERS} answers")
            values = {h: v for h, v in zip(header, row, strict=False) if h}
            if sum(len(str(v)) for v in values.values()) > max_record_bytes:
                yield origin, record_error(origin, "<row>", f"longer than {max_record_bytes} bytes")
                continue
            yield origin, values
    finally:
        book.close()
