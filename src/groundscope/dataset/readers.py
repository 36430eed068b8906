"""Dataset readers: a JSONL / TSV / CSV / parquet file -> a lazy stream of (Origin, record).

Every reader streams: nothing but the current record (or parquet record batch) is held.
A record that cannot be parsed is yielded as a ``RecordError`` in its place (file, line,
field when known, problem), so the loader can report it and go on: a bad byte is one bad
record, never the end of the run. A file that cannot be read at all raises
``DatasetError``; :func:`check_readable` finds those before a run sends any request.

- JSONL: one JSON object per line; blank lines are skipped; ``line`` is the physical line.
- TSV / CSV: a header row, then one record per row; cells are strings and an empty cell is
  an absent key; ``line`` is the physical line where the row starts (the header is line 1;
  a quoted cell may span lines). Lines end with ``\\n``, ``\\r\\n`` or ``\\r``; a UTF-8 BOM
  is dropped. A row with bytes that are not UTF-8, a NUL, more cells than the header has
  columns, or that the csv module cannot parse is a bad record; missing cells are absent.
  A quoted cell may span at most :data:`MAX_ROW_LINES` physical lines: a row whose quote is
  still open after that many lines, or at the end of the file, is one bad record for its
  first line ("an unclosed quote at line L swallowed lines L..M"), and reading resumes at
  line L+1, so one stray ``"`` costs one row, never the rest of the file.
- parquet: one record per row (``line`` is the 1-based row number); binary columns stay
  ``bytes`` and HF media features arrive as ``{"bytes", "path"}`` dicts; nulls are absent.
  A value Python cannot represent (a date out of range, say) makes its row a bad record
  naming the column; a row group that cannot be decoded is one bad record for its rows.

Every record is bounded: a JSONL line or TSV / CSV row longer than ``max_record_bytes``
(``TaskConfig.max_record_bytes``, default 64 MiB) is a bad record, skipped without being
held in memory.
"""

from __future__ import annotations

import csv
import re
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from groundscope.dataset.rowcount import count_rows
from groundscope.defaults import DEFAULT_MAX_RECORD_BYTES
from groundscope.errors import DatasetError, RecordError
from groundscope.types import Origin

__all__ = ["SUPPORTED_EXTENSIONS", "check_readable", "count_records",
           "iter_records"]

SUPPORTED_EXTENSIONS = (".jsonl", ".csv", ".tsv", ".parquet")
MAX_ROW_LINES = 100  # physical lines one TSV / CSV row (a quoted cell) may span

Item = tuple[Origin, dict[str, Any] | RecordError]

_PARQUET_BATCH_ROWS = 256
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n?|\n")
_UNSAFE_CELL = re.compile("[\x00\udc80-\udcff]")  # NUL, or a byte that was not UTF-8


def iter_records(path: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[Item]:
    """Stream the records of one dataset file, picking the reader by extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _iter_jsonl(path, max_record_bytes)
    if suffix in (".tsv", ".csv"):
        return _iter_delimited(path, "\t" if suffix == ".tsv" else ",", max_record_bytes)
    if suffix == ".parquet":
        return _iter_parquet(path)
    raise DatasetError(
        f"{path}: unsupported dataset file type {suffix or '(none)'!r}; "
        f"expected one of {', '.join(SUPPORTED_EXTENSIONS)}"
    )


def count_records(path: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                  exact: bool = True) -> int:
    """The number of records ``iter_records`` yields (bad ones included), cheaply.

    parquet reads the footer only; JSONL counts non-blank lines; TSV / CSV re-parse the rows
    without building records, or with ``exact=False`` count them from the bytes
    (``rowcount.count_rows``: no cell is decoded; the progress display's estimate).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet_file(path).metadata.num_rows
    if suffix == ".jsonl":
        with _open_binary(path) as handle:
            return sum(1 for raw in _lines(handle, max_record_bytes, split_cr=False)
                       if raw is None or raw.strip())
    if suffix in (".tsv", ".csv") and not exact:
        with _open_binary(path) as handle:
            return count_rows(handle, max_record_bytes, MAX_ROW_LINES)
    if suffix in (".tsv", ".csv"):
        return sum(1 for _ in iter_records(path, max_record_bytes=max_record_bytes))
    iter_records(path)  # raises the unsupported-type error
    return 0


def check_readable(path: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
    """Raise ``DatasetError`` (one line) if ``path`` cannot be read at all: it cannot be
    opened, a TSV / CSV header is not a readable row, a parquet footer is corrupt."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        _parquet_file(path)
    elif suffix in (".tsv", ".csv"):
        with _open_binary(path) as handle:
            _header(_Rows(handle, max_record_bytes), path, "\t" if suffix == ".tsv" else ",")
    else:
        iter_records(path)  # the unsupported-type error
        _open_binary(path).close()


def _open_binary(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open dataset file: {exc.strerror or exc}") from None


def _lines(handle: IO[bytes], limit: int, *, split_cr: bool) -> Iterator[bytes | None]:
    """Each physical line of a binary stream with its end, or None in place of a line
    longer than ``limit`` bytes (read past, never held). Lines end at ``\\n``, and with
    ``split_cr`` at ``\\r\\n`` or a lone ``\\r`` too. A leading UTF-8 BOM is dropped."""
    pending: list[bytes] = []
    size = 0
    carry = b""
    first = True
    while True:
        chunk = carry + handle.read(_CHUNK)
        carry = b""
        if first:
            chunk, first = chunk.removeprefix(_BOM), False
        if split_cr and chunk.endswith(b"\r"):  # is it "\r\n"? look one byte ahead
            carry = handle.read(1)
            if carry == b"\n":
                chunk, carry = chunk + carry, b""
        if not chunk:
            if size:
                yield None if size > limit else b"".join(pending)
            return
        start = 0
        ends = (m.end() for m in _EOL.finditer(chunk)) if split_cr else _newlines(chunk)
        for end in ends:
            size += end - start
            yield None if size > limit else b"".join([*pending, chunk[start:end]])
            pending, size, start = [], 0, end
        size += len(chunk) - start
        if size <= limit:
            pending.append(chunk[start:])
        else:
            pending = []


def _newlines(chunk: bytes) -> Iterator[int]:
    """The end (one past the ``\\n``) of each line ending in ``chunk``."""
    pos = chunk.find(b"\n")
    while pos >= 0:
        yield pos + 1
        pos = chunk.find(b"\n", pos + 1)


def _too_long(limit: int) -> str:
    return f"longer than {limit:,} bytes (max_record_bytes)"


def _iter_jsonl(path: Path, limit: int) -> Iterator[Item]:
    with _open_binary(path) as handle:
        for number, raw in enumerate(_lines(handle, limit, split_cr=False), start=1):
            if raw is None:
                yield Origin(path, number), RecordError(path, number, "<json>",
                                                        f"line {_too_long(limit)}")
            elif raw.strip():
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


class _TooLong(Exception):
    """A TSV / CSV row went past ``max_record_bytes``."""


class _Swallowed(Exception):
    """A TSV / CSV row went past :data:`MAX_ROW_LINES` physical lines (an unclosed quote)."""


class _Rows:
    """The physical lines of a TSV / CSV file as text, for ``csv.reader``, counting lines.

    Bytes that are not UTF-8 are kept as lone surrogates (``surrogateescape``) so that the
    csv module reads on and the row is reported as a whole; :meth:`start` marks where a row
    begins, and a row past ``limit`` bytes raises ``_TooLong`` (the reader carries on with
    the next line).
    """

    def __init__(self, handle: IO[bytes], limit: int) -> None:
        self._lines = _lines(handle, limit, split_cr=True)
        self.limit = limit
        self.line = 0  # physical lines handed out
        self.ended = False  # the file ended inside the current row (an open quote)
        self._size = 0
        self._row: list[str] = []  # the current row's lines (at most MAX_ROW_LINES)
        self._replay: deque[str] = deque()

    def start(self) -> int:
        """Begin a row; its first line number."""
        self._size = 0
        self._row = []
        self.ended = False
        return self.line + 1

    def resume_after(self, start: int) -> None:
        """Hand out again the lines after ``start`` (the first line of the current row)."""
        self._replay.extendleft(reversed(self._row[1:]))
        self.line = start

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> str:
        if self._replay:
            text = self._replay.popleft()
            raw_size = len(text.encode("utf-8", "surrogateescape"))
        else:
            try:
                raw = next(self._lines)
            except StopIteration:
                self.ended = True
                raise
            raw_size = self.limit + 1 if raw is None else len(raw)
            text = "" if raw is None else raw.decode("utf-8", "surrogateescape")
        self.line += 1
        self._size += raw_size
        if self._size > self.limit:
            self._row = []
            raise _TooLong
        self._row.append(text)
        if len(self._row) > MAX_ROW_LINES:
            raise _Swallowed
        return text


def _header(rows: _Rows, path: Path, delimiter: str) -> list[str] | None:
    """The column names (None for an empty file); ``DatasetError`` if unreadable."""
    reader = csv.reader(rows, delimiter=delimiter)
    try:
        header = next(reader, None)
    except (_TooLong, csv.Error) as exc:
        problem = _too_long(rows.limit) if isinstance(exc, _TooLong) else str(exc)
        raise DatasetError(f"{path}:1: header row unreadable: {problem}") from None
    if header is None:
        return None
    bad = _bad_cell(header)
    if bad is not None:
        raise DatasetError(f"{path}:1: header row: column {bad[0] + 1}: {bad[1]}")
    return [name.strip() for name in header]


def _bad_cell(cells: list[str]) -> tuple[int, str] | None:
    """(index, problem) of the first cell holding a NUL or a byte that was not UTF-8."""
    for i, cell in enumerate(cells):
        found = None if cell.isascii() and "\x00" not in cell else _UNSAFE_CELL.search(cell)
        if found is not None:
            ch = found.group()
            if ch == "\x00":
                return i, "a NUL byte"
            byte = ord(ch) - 0xDC00
            return i, f"not valid UTF-8 (byte 0x{byte:02x} at character {found.start() + 1})"
    return None


def _iter_delimited(path: Path, delimiter: str, limit: int) -> Iterator[Item]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # rows are bounded by max_record_bytes
    with _open_binary(path) as handle:
        rows = _Rows(handle, limit)
        names = _header(rows, path, delimiter)
        if names is None:
            return
        reader = csv.reader(rows, delimiter=delimiter)
        while True:
            start = rows.start()
            try:
                cells = next(reader, None)
            except _TooLong:
                yield Origin(path, start), RecordError(path, start, "<row>", f"row {_too_long(limit)}")
                continue
            except csv.Error as exc:
                yield Origin(path, start), RecordError(path, start, "<row>", f"unreadable row ({exc})")
                continue
            except _Swallowed:
                cells = None
            if (cells is None and not rows.ended) or (rows.ended and rows.line > start):
                # an open quote ran past MAX_ROW_LINES lines or to the end of the file
                problem = (f"an unclosed quote at line {start} swallowed lines {start}..{rows.line}"
                           f"{' (the end of the file)' if rows.ended else ''}; the row is "
                           f"skipped and reading resumes at line {start + 1}")
                yield Origin(path, start), RecordError(path, start, "<row>", problem)
                rows.resume_after(start)
                reader = csv.reader(rows, delimiter=delimiter)
                continue
            if cells is None:
                return
            if any(cell.strip() for cell in cells):  # else a blank line
                yield Origin(path, start), _delimited_record(cells, names, path, start)


def _delimited_record(cells: list[str], names: list[str], path: Path, line: int
                      ) -> dict[str, Any] | RecordError:
    if len(cells) > len(names):
        problem = f"row has {len(cells)} cells but the header has {len(names)} columns"
        return RecordError(path, line, "<row>", problem)
    bad = _bad_cell(cells)
    if bad is not None:
        return RecordError(path, line, names[bad[0]] or f"<column {bad[0] + 1}>", bad[1])
    return {name: cell for name, cell in zip(names, cells, strict=False) if cell != ""}


def _parquet_file(path: Path) -> Any:
    import pyarrow.parquet as pq  # lazy: heavy, and only parquet datasets need it

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError)
        raise DatasetError(f"{path}: cannot read parquet file: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"


# What pyarrow raises for undecodable pages (OSError / ArrowInvalid, a ValueError /
# ArrowException) and Python for values it cannot hold (OverflowError: a date past 9999).
_ARROW_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, OverflowError, TypeError,
                                              KeyError, NotImplementedError)


def _iter_parquet(path: Path) -> Iterator[Item]:
    import pyarrow as pa

    errors = (*_ARROW_ERRORS, pa.ArrowException)
    parquet = _parquet_file(path)
    number = 0
    for group in range(parquet.metadata.num_row_groups):
        end = number + parquet.metadata.row_group(group).num_rows
        try:
            for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[group]):
                for item in _batch_records(batch, path, number, errors):
                    number += 1
                    yield item
        except errors as exc:  # the rest of the row group cannot be decoded
            first = number + 1
            problem = f"rows {first}-{end} cannot be read ({_one_line(exc)})"
            yield Origin(path, first), RecordError(path, first, "<row group>", problem)
        number = end


def _batch_records(batch: Any, path: Path, before: int, errors: tuple[type[Exception], ...]
                   ) -> Iterator[Item]:
    """The rows of one record batch; a value Python cannot hold fails its row only."""
    try:
        rows = batch.to_pylist()
    except errors:
        rows = None
    for i in range(batch.num_rows):
        line = before + i + 1
        row = rows[i] if rows is not None else _row_or_error(batch, i, path, line, errors)
        if isinstance(row, RecordError):
            yield Origin(path, line), row
        else:
            yield Origin(path, line), {k: v for k, v in row.items() if v is not None}


def _row_or_error(batch: Any, i: int, path: Path, line: int, errors: tuple[type[Exception], ...]
                  ) -> dict[str, Any] | RecordError:
    row = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            row[name] = column[i].as_py()
        except errors as exc:
            return RecordError(path, line, name, f"value cannot be read ({_one_line(exc)})")
    return row
