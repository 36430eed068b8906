"""Hostile General-VQA dataset files for tests/test_untrusted_parse.py (issue 12, item 8).

``write_corpus(root)`` writes each case into its own directory under ``root`` and returns
``{case: (directory, expected bad records)}``; an expected bad record is
``(file name, physical line, field, a phrase of the problem)``. Run as a script to write
the corpus into a directory and look at it: ``python make_corpus.py /tmp/corpus``.

Cases:

- ``tsv``: a BOM; ``\\r\\n``, ``\\n`` and lone ``\\r`` line ends; a quoted cell spanning two
  lines; bytes that are not UTF-8 in ``messages`` and in ``answer`` (one inside a quoted
  cell that spans three lines: the record's first line is reported); a NUL; a row with
  more cells than the header; a row longer than ``MAX_RECORD_BYTES``; a short row.
- ``csv``: the same rows, comma-separated and quoted as a CSV writer would.
- ``parquet_values``: values Python cannot hold (a timestamp and a duration past
  ``datetime``'s range) and columns of unexpected types (int, decimal, map, struct).
- ``parquet_group``: two row groups, the second one's pages overwritten with garbage.
- ``parquet_footer``: a parquet file cut short (its footer is gone).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MAX_RECORD_BYTES = 4096  # the runs over this corpus pass --max-record-bytes 4096

Expected = list[tuple[str, int, str, str]]


def _messages(question: str) -> str:
    return json.dumps([{"role": "user", "content": question}])


def _rows(sep: str) -> tuple[bytes, Expected]:
    """The rows of the TSV / CSV cases (``sep`` is the delimiter) and the bad records."""

    def cell(text: str) -> str:  # quoted only where it must be (a quote mid-cell is literal)
        if sep in text or "\n" in text or text.startswith('"'):
            return '"' + text.replace('"', '""') + '"'
        return text

    def row(*cells: str) -> bytes:
        return sep.join(cell(c) for c in cells).encode()

    q = _messages
    lines = [
        b"\xef\xbb\xbf" + row("messages", "answer") + b"\r\n",      # 1 BOM, CRLF
        row(q("Question 2?"), "Two") + b"\r\n",                       # 2 good
        row(q("Question 3?"), "three\nlines") + b"\n",                # 3-4 good, spans 2 lines
        row(q("Question 5?"), "Five").replace(b"5", b"5\xff") + b"\n",  # 5 bad UTF-8: messages
        row(q("Question 6?"), "Six") + b"\r",                         # 6 good, lone CR
        row(q("Question 7?"), "Se\x00ven") + b"\n",                   # 7 NUL in answer
        row(q("Question 8?"), "Eight", "extra") + b"\n",              # 8 too many cells
        row(q("Question 9?"), "x" * (2 * MAX_RECORD_BYTES)) + b"\n",  # 9 too long
        row(q("Question 10?"), "Ten") + b"\n",                        # 10 good
        row(q("Question 11?"), "El") + b"\xc3\x28\n",                 # 11 bad UTF-8: answer
        row('[{"role": "user", "content": "Question 12?\nstill\nquestion 12"}]', "Twelve")
        .replace(b"still", b"st\xe9ll") + b"\n",                     # 12-14 bad UTF-8, spans 3
        row(q("Question 15?")) + b"\n",                               # 15 short row: no answer
        row(q("Question 16?"), "Sixteen") + b"\n",                    # 16 good
    ]
    name = "rows.tsv" if sep == "\t" else "rows.csv"
    bad = [(name, 5, "messages", "not valid UTF-8"), (name, 7, "answer", "a NUL byte"),
           (name, 8, "<row>", "row has 3 cells but the header has 2 columns"),
           (name, 9, "<row>", "max_record_bytes"), (name, 11, "answer", "not valid UTF-8"),
           (name, 12, "messages", "not valid UTF-8")]
    return b"".join(lines), bad


def _parquet_values(path: Path) -> Expected:
    import datetime
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    big = 2**62  # microseconds (seconds for the duration): past what datetime can hold
    table = pa.table({
        "messages": pa.array([_messages(f"Question {i}?") for i in range(1, 7)]),
        "answer": pa.array(["One", "Two", "Three", "Four", "Five", "Six"]),
        "when": pa.array([0, big, 0, 0, 0, 0], type=pa.timestamp("us")),
        "took": pa.array([0, 0, big, 0, 0, 0], type=pa.duration("s")),
        "price": pa.array([Decimal("1.5")] * 6, type=pa.decimal128(5, 2)),
        "tags": pa.array([[("k", 1)]] * 6, type=pa.map_(pa.string(), pa.int64())),
        "meta": pa.array([{"a": 1, "b": datetime.date(2020, 1, 1)}] * 6),
    })
    pq.write_table(table, path)
    return [(path.name, 2, "when", "value cannot be read"),
            (path.name, 3, "took", "value cannot be read")]


def _parquet_types(path: Path) -> Expected:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"messages": pa.array([7, 8], type=pa.int64()),
                      "answer": pa.array([1.5, 2.5])})
    pq.write_table(table, path)
    return [(path.name, 1, "messages", "expected a non-empty list of messages"),
            (path.name, 2, "messages", "expected a non-empty list of messages")]


def _parquet_group(path: Path) -> Expected:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"messages": [_messages(f"Question {i}?") for i in range(1, 9)],
                      "answer": [f"Answer {i}" for i in range(1, 9)]})
    pq.write_table(table, path, row_group_size=4)
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    raw = bytearray(path.read_bytes())
    start = column.data_page_offset
    raw[start : start + 64] = b"\xff" * 64  # the page header of the second group's first column
    path.write_bytes(bytes(raw))
    return [(path.name, 5, "<row group>", "rows 5-8 cannot be read")]


def write_corpus(root: Path) -> dict[str, tuple[Path, Expected]]:
    """Write every case under ``root`` (see the module docstring)."""
    cases: dict[str, tuple[Path, Expected]] = {}
    for case, sep in (("tsv", "\t"), ("csv", ",")):
        folder = root / case
        folder.mkdir(parents=True, exist_ok=True)
        data, bad = _rows(sep)
        (folder / f"rows.{case}").write_bytes(data)
        cases[case] = (folder, bad)
    folder = root / "parquet_values"
    folder.mkdir(parents=True, exist_ok=True)
    cases["parquet_values"] = (folder, _parquet_values(folder / "values.parquet")
                               + _parquet_types(folder / "types.parquet"))
    folder = root / "parquet_group"
    folder.mkdir(parents=True, exist_ok=True)
    cases["parquet_group"] = (folder, _parquet_group(folder / "groups.parquet"))
    folder = root / "parquet_footer"
    folder.mkdir(parents=True, exist_ok=True)
    _parquet_group(folder / "cut.parquet")
    cut = folder / "cut.parquet"
    cut.write_bytes(cut.read_bytes()[:-12])
    cases["parquet_footer"] = (folder, [])
    return cases


if __name__ == "__main__":
    for name, (where, bad) in write_corpus(Path(sys.argv[1])).items():
        print(name, where, *bad, sep="\n  ")
