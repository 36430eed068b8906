"""Hostile dataset files (issue 12, item 8): the corpus of
``tests/untrusted/parse/make_corpus.py`` runs through the CLI; every bad row is one skipped
record naming its physical (first) line and field, and the run finishes with its report.
Texts built to make parsing quadratic (item 12) are in ``test_untrusted_quadratic.py``."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from cli_support import ROOT, run_cli
from groundscope.dataset.readers import count_records, iter_records
from groundscope.errors import RecordError

CORPUS = ROOT / "tests" / "untrusted" / "parse" / "make_corpus.py"


def _corpus_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list]]:
    return _corpus_module().write_corpus(tmp_path_factory.mktemp("corpus"))


def _eval(folder: Path, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = {"general_vqa": {"local_path": str(folder)}}
    return run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                   json.dumps(args), "--work-dir", "out", "--no-progress", *extra, cwd=cwd)


# --- item 8: bad bytes are bad records -----------------------------------------------------


@pytest.mark.parametrize("case", ["tsv", "csv", "parquet_values", "parquet_group"])
def test_bad_bytes_are_skipped_records_with_line_and_field(corpus, case: str, tmp_path: Path
                                                           ) -> None:
    folder, expected = corpus[case]
    proc = _eval(folder, tmp_path, "--max-record-bytes", "4096")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert (run_dir / "report.html").is_file() and list(run_dir.glob("reports/*/*.json"))
    rows = [json.loads(line) for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    got = {}
    for row in rows:  # "file:line: field: problem"
        found = re.fullmatch(r"(.+?):(\d+): (.+?): (.*)", row["problem"])
        assert found is not None, row
        where, line, field, problem = found.groups()
        got[(Path(where).name, int(line), field)] = problem
        assert where == str(folder / Path(where).name)
    assert sorted(got) == sorted((name, line, field) for name, line, field, _ in expected)
    for name, line, field, phrase in expected:
        assert phrase in got[(name, line, field)], got
    n = len(expected)
    assert re.search(rf"skipped {n} bad records?\b", proc.stdout)


def test_good_rows_around_the_bad_ones_are_read_as_written(corpus) -> None:
    folder, _ = corpus["tsv"]
    items = list(iter_records(folder / "rows.tsv", max_record_bytes=4096))
    good = {o.line: r for o, r in items if not isinstance(r, RecordError)}
    assert sorted(good) == [2, 3, 6, 10, 15, 16]  # CRLF, a cell over 2 lines, a lone CR
    assert good[3]["answer"] == "three\nlines" and good[6]["answer"] == "Six"
    assert "answer" not in good[15]  # a short row: the missing cell is absent
    assert count_records(folder / "rows.tsv", max_record_bytes=4096) == len(items) == 12


def test_corrupt_parquet_footer_is_one_line_before_any_request(corpus, tmp_path: Path) -> None:
    folder, _ = corpus["parquet_footer"]
    proc = _eval(folder, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"groundscope: error: {folder / 'cut.parquet'}: cannot read parquet")
    assert not (tmp_path / "out").exists()


def test_unreadable_header_is_one_line_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "h.tsv").write_bytes(b"messages\tans\xffwer\n[]\tx\n")
    proc = _eval(tmp_path / "data", tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == (f"groundscope: error: {tmp_path / 'data' / 'h.tsv'}:1: header row: "
                           "column 2: not valid UTF-8 (byte 0xff at character 4)\n")


def test_a_long_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    """A 16 MB line over a 64 KiB bound is read past in chunks: memory stays ~ the bound."""
    for name, header in (("d.jsonl", b""), ("d.tsv", b"messages\tanswer\n")):
        path = tmp_path / name
        with path.open("wb") as fh:
            fh.write(header + b'{"a": "' + b"x" * (16 << 20) + b'"}\n{"a": 1}\n')
        tracemalloc.start()
        try:
            items = list(iter_records(path, max_record_bytes=64 << 10))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2 << 20, (name, peak)
        first, second = items
        assert isinstance(first[1], RecordError) and "longer than 65,536 bytes" in str(first[1])
        assert first[0].line == (1 if name.endswith("jsonl") else 2)
        assert second[0].line == first[0].line + 1


def test_line_ends_bom_and_quotes_at_the_edges(tmp_path: Path) -> None:
    path = tmp_path / "cr.csv"  # old Mac line ends, a BOM, an unterminated quote at the end
    path.write_bytes(b'\xef\xbb\xbfa,b\r1,2\r\r3,"x\ry"\r4,"open\r')
    items = list(iter_records(path))
    assert [(o.line, r) for o, r in items] == [
        (2, {"a": "1", "b": "2"}), (4, {"a": "3", "b": "x\ry"}), (6, {"a": "4", "b": "open\r"})]
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_bytes(b'{"a": 1}\r\n{"a": "\xff"}\n\x00\n{"a": 2}')
    lines = [(o.line, isinstance(r, RecordError)) for o, r in iter_records(jsonl)]
    assert lines == [(1, False), (2, True), (3, True), (4, False)]


def test_rows_framed_from_bytes_read_as_the_csv_module_reads_text(monkeypatch, tmp_path: Path
                                                                  ) -> None:
    """Random well-formed UTF-8 files with every line end and quoted line breaks, read in
    chunks of 1..5 bytes (so a CRLF or a character falls across chunks): the same records
    and start lines as ``csv.reader`` over the decoded text."""
    import csv
    import io

    from groundscope.dataset import readers

    rng = random.Random(8)
    pieces = ["a", "é", ",", '"', "\n", "\r", "\r\n", " ", '""']
    path = tmp_path / "t.csv"
    for trial in range(3000):
        monkeypatch.setattr(readers, "_CHUNK", 1 + trial % 5)
        text = "h1,h2\n" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader)
        expected, end, last_start = [], reader.line_num, 0
        for cells in reader:
            start, end = end + 1, reader.line_num
            last_start = start
            if any(c.strip() for c in cells) and len(cells) <= len(header):
                expected.append((start, {k: v for k, v in zip(header, cells, strict=False) if v}))
        path.write_bytes(text.encode())
        items = list(iter_records(path))
        got = [(o.line, r) for o, r in items if not isinstance(r, RecordError)]
        swallowed = [o.line for o, r in items if "an unclosed quote" in str(r)]
        if swallowed:  # csv.reader reads a quote open at the end of the file as one cell;
            # groundscope reports that row (the file's last) and reads its lines again
            assert swallowed[0] == last_start, text
            got = [g for g in got if g[0] < last_start]
            expected = [e for e in expected if e[0] < last_start]
        assert got == expected, text
