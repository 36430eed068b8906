"""Dataset readers: a JSONL / TSV / CSV / parquet file -> a lazy stream of (Origin, record).

Every reader streams: nothing but the current line (or parquet record batch) is held.
A record that cannot be parsed at all is yielded as a ``RecordError`` in its place, so the
loader can report it and go on; an unreadable file raises ``DatasetError``.

- JSONL: one JSON object per line; blank lines are skipped; ``line`` is the physical line.
- TSV / CSV: a header row, then one record per row; cells are strings and an empty cell is
  an absent key; ``line`` is the physical line where the row starts (the header is line 1).
- parquet: one record per row (``line`` is the 1-based row number); binary columns stay
  ``bytes`` and HF media features arrive as ``{"bytes", "path"}`` dicts; nulls are absent.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from groundscope.errors import DatasetError, RecordError
from groundscope.types import Origin

__all__ = ["SUPPORTED_EXTENSIONS", "count_records", "iter_records"]

SUPPORTED_EXTENSIONS = (".jsonl", ".csv", ".tsv", ".parquet")

Item = tuple[Origin, dict[str, Any] | RecordError]

_PARQUET_BATCH_ROWS = 256


def iter_records(path: Path) -> Iterator[Item]:
    """Stream the records of one dataset file, picking the reader by extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _iter_jsonl(path)
    if suffix in (".tsv", ".csv"):
        return _iter_delimited(path, "\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        return _iter_parquet(path)
    raise DatasetError(
        f"{path}: unsupported dataset file type {suffix or '(none)'!r}; "
        f"expected one of {', '.join(SUPPORTED_EXTENSIONS)}"
    )


def count_records(path: Path) -> int:
    """The number of records ``iter_records`` yields (bad ones included), cheaply.

    parquet reads the footer only; JSONL counts non-blank lines; TSV / CSV re-parse the rows
    without building records.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet_file(path).metadata.num_rows
    if suffix == ".jsonl":
        with _open_binary(path) as handle:
            return sum(1 for raw in handle if raw.strip())
    if suffix in (".tsv", ".csv"):
        return sum(1 for _ in iter_records(path))
    iter_records(path)  # raises the unsupported-type error
    return 0


def _open_binary(path: Path) -> Any:
    try:
        return path.open("rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open dataset file: {exc.strerror or exc}") from None


def _iter_jsonl(path: Path) -> Iterator[Item]:
    with _open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 BOM written by some Windows tools
            if not raw.strip():
                continue
            yield Origin(path, number), _parse_json_line(raw, path, number)


def _parse_json_line(raw: bytes, path: Path, number: int) -> dict[str, Any] | RecordError:
    try:
        value = orjson.loads(raw.rstrip())  # positions then count within the line
    except orjson.JSONDecodeError as exc:
        return RecordError(path, number, "<json>", f"invalid JSON: {exc}")
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        return RecordError(path, number, "<json>", f"expected a JSON object, got {kind}")
    return value


def _iter_delimited(path: Path, delimiter: str) -> Iterator[Item]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # base64 media cells exceed 128 KiB
    try:
        handle = path.open("r", encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open dataset file: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle, delimiter=delimiter)
        try:
            yield from _delimited_rows(reader, path)
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}:{reader.line_num + 1}: not valid UTF-8 ({exc})") from None
        except csv.Error as exc:
            raise DatasetError(f"{path}:{reader.line_num}: unreadable row ({exc})") from None


def _delimited_rows(reader: Any, path: Path) -> Iterator[Item]:
    header = next(reader, None)
    if header is None:
        return
    names = [name.strip() for name in header]
    end = reader.line_num
    for cells in reader:
        start, end = end + 1, reader.line_num
        if not any(cell.strip() for cell in cells):
            continue  # a blank line
        origin = Origin(path, start)
        if len(cells) > len(names):
            problem = f"row has {len(cells)} cells but the header has {len(names)} columns"
            yield origin, RecordError(path, start, "<row>", problem)
            continue
        yield origin, {name: cell for name, cell in zip(names, cells, strict=False) if cell != ""}


def _parquet_file(path: Path) -> Any:
    import pyarrow.parquet as pq  # lazy: heavy, and only parquet datasets need it

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError)
        raise DatasetError(f"{path}: cannot read parquet file: {exc}") from None


def _iter_parquet(path: Path) -> Iterator[Item]:
    parquet = _parquet_file(path)
    number = 0
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
        for row in batch.to_pylist():
            number += 1
            yield Origin(path, number), {k: v for k, v in row.items() if v is not None}
