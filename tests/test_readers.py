"""groundscope.dataset.readers: JSONL / TSV / CSV / parquet -> (Origin, record | RecordError)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundscope.dataset.readers import count_records, iter_records
from groundscope.errors import DatasetError, RecordError
from groundscope.types import Origin
from media_fixtures import image_bytes, write_delimited, write_jsonl, write_parquet


def lines_of(path: Path) -> list[int]:
    return [origin.line for origin, _ in iter_records(path)]


# --- JSONL ---------------------------------------------------------------------------------


def test_jsonl_skips_blank_lines_and_keeps_real_line_numbers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"a": 1}, "", "   ", {"a": 2}, "\t", {"a": 3}])
    items = list(iter_records(path))
    assert [(o.line, r) for o, r in items] == [(1, {"a": 1}), (4, {"a": 2}), (6, {"a": 3})]
    assert all(o.path == path for o, _ in items)


def test_jsonl_bad_lines_become_record_errors_in_place(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"a": 1}, "[1, 2]", "{not json", '"text"', {"a": 5}])
    items = list(iter_records(path))
    assert [o.line for o, _ in items] == [1, 2, 3, 4, 5]
    errors = [r for _, r in items if isinstance(r, RecordError)]
    assert str(errors[0]) == f"{path}:2: <json>: expected a JSON object, got array"
    assert str(errors[1]).startswith(f"{path}:3: <json>: invalid JSON")
    assert str(errors[2]) == f"{path}:4: <json>: expected a JSON object, got str"
    assert items[-1][1] == {"a": 5}


def test_jsonl_utf8_bom_and_unicode(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + '{"q": "你好"}\n'.encode())
    assert list(iter_records(path)) == [(Origin(path, 1), {"q": "你好"})]


def test_readers_are_lazy(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"a": i} for i in range(3)])
    stream = iter_records(path)
    assert isinstance(stream, Iterator)
    first = next(stream)
    assert first[1] == {"a": 0}
    # a record appended after reading started is still seen: nothing was read ahead eagerly
    with path.open("a") as handle:
        handle.write('{"a": 99}\n')
    assert [r for _, r in stream][-1] == {"a": 99}


# --- TSV / CSV -----------------------------------------------------------------------------


def test_tsv_header_is_line_one_and_empty_cells_are_absent(tmp_path: Path) -> None:
    path = write_delimited(
        tmp_path / "d.tsv",
        ["messages", "answer", "image_1"],
        [['[{"role": "user", "content": "hi <image 1>"}]', "Dog", "a.jpg"], ["[]", "", ""]],
    )
    items = list(iter_records(path))
    assert items[0] == (
        Origin(path, 2),
        {"messages": '[{"role": "user", "content": "hi <image 1>"}]', "answer": "Dog", "image_1": "a.jpg"},
    )
    assert items[1] == (Origin(path, 3), {"messages": "[]"})


def test_csv_quoted_multiline_cells_report_the_physical_start_line(tmp_path: Path) -> None:
    path = write_delimited(
        tmp_path / "d.csv",
        ["question", "answer"],
        [["line one\nline two", "A"], ["plain, with comma", "B"], ["x", "C"]],
        delimiter=",",
    )
    items = list(iter_records(path))
    assert [o.line for o, _ in items] == [2, 4, 5]
    assert items[0][1] == {"question": "line one\nline two", "answer": "A"}
    assert items[1][1] == {"question": "plain, with comma", "answer": "B"}


def test_tsv_blank_rows_skipped_and_extra_cells_are_bad_records(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_text("a\tb\n1\t2\n\n\t\n3\t4\t5\n6\n", encoding="utf-8")
    items = list(iter_records(path))
    assert [o.line for o, _ in items] == [2, 5, 6]
    assert items[0][1] == {"a": "1", "b": "2"}
    bad = items[1][1]
    assert isinstance(bad, RecordError)
    assert str(bad) == f"{path}:5: <row>: row has 3 cells but the header has 2 columns"
    assert items[2][1] == {"a": "6"}  # a short row: missing cells are absent


def test_tsv_bom_header_and_cells_stay_strings(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_bytes("\ufeffid\tanswer\n7\t42\n".encode())
    assert list(iter_records(path)) == [(Origin(path, 2), {"id": "7", "answer": "42"})]


def test_tsv_huge_base64_cell(tmp_path: Path) -> None:
    big = "A" * 300_000
    path = write_delimited(tmp_path / "d.tsv", ["image"], [[big]])
    assert next(iter_records(path))[1] == {"image": big}


def test_tsv_invalid_utf8_is_one_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_bytes(b"a\tb\n\xff\xfe\t1\nok\t2\n")
    (_, bad), (_, good) = iter_records(path)
    assert str(bad) == f"{path}:2: a: not valid UTF-8 (byte 0xff at character 1)"
    assert good == {"a": "ok", "b": "2"}


def test_empty_files(tmp_path: Path) -> None:
    for name in ("e.tsv", "e.csv", "e.jsonl"):
        (tmp_path / name).write_text("")
        assert list(iter_records(tmp_path / name)) == []
        assert count_records(tmp_path / name) == 0


# --- parquet -------------------------------------------------------------------------------


def test_parquet_rows_media_structs_and_nulls(tmp_path: Path) -> None:
    import pyarrow as pa

    png = image_bytes("PNG")
    media_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("question", pa.string()),
            ("image_1", media_type),
            ("raw", pa.binary()),
            ("images", pa.list_(media_type)),
            ("answer", pa.string()),
        ]
    )
    rows = [
        {"question": "q1", "image_1": {"bytes": png, "path": "a.png"}, "raw": png,
         "images": [{"bytes": None, "path": "b.png"}], "answer": "A"},
        {"question": "q2", "image_1": None, "raw": None, "images": None, "answer": None},
    ]  # fmt: skip
    path = write_parquet(tmp_path / "d.parquet", rows, schema)
    items = list(iter_records(path))
    assert items[0] == (Origin(path, 1), rows[0])
    assert isinstance(items[0][1]["raw"], bytes)
    assert items[0][1]["image_1"] == {"bytes": png, "path": "a.png"}
    assert items[1] == (Origin(path, 2), {"question": "q2"})  # nulls are absent keys


def test_parquet_streams_batches_with_continuous_row_numbers(tmp_path: Path) -> None:
    rows = [{"id": i} for i in range(600)]
    path = write_parquet(tmp_path / "many.parquet", rows)
    items = list(iter_records(path))
    assert [o.line for o, _ in items] == list(range(1, 601))
    assert items[-1][1] == {"id": 599}
    assert count_records(path) == 600


def test_pyarrow_is_imported_lazily() -> None:
    code = "import sys, groundscope.dataset, groundscope.dataset.readers; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unreadable_parquet_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match="cannot read parquet"):
        list(iter_records(path))


# --- dispatch and counting -----------------------------------------------------------------


def test_unsupported_extension_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_text("{}")
    with pytest.raises(DatasetError, match=r"unsupported dataset file type '\.json'"):
        iter_records(tmp_path / "d.json")
    with pytest.raises(DatasetError, match="cannot open"):
        list(iter_records(tmp_path / "missing.jsonl"))


def test_count_records_matches_iteration(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "d.jsonl", [{"a": 1}, "", "[1]", {"a": 2}])
    tsv = write_delimited(tmp_path / "d.tsv", ["q"], [["x\ny"], ["z"]])
    for path in (jsonl, tsv):
        assert count_records(path) == len(list(iter_records(path)))
    assert count_records(jsonl) == 3
