"""The progress display's total (issue 14, item 4): done/total and an ETA in the plain
lines, the total counted before any record is read (limit and repeats applied, parquet from
its footer, TSV / CSV rows from the bytes), lowered by bad records, grown by paraphrases,
and equal to done when the run ends, resumed runs included."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from groundscope import progress, run_task
from groundscope.dataset.readers import count_records
from media_fixtures import write_parquet
from reliability_support import MODEL, dataset_args, write_dataset

ROOT = Path(__file__).resolve().parents[1]
_LINE = re.compile(r"^(\d+)(?:/(\d+))? samples done .*?(, ETA \S+)?(?: \||$)")


def plain_lines(report: Any) -> list[tuple[int, int | None, bool]]:
    """(done, total, has an ETA) of each plain progress line of the run's log."""
    log_file = Path(report.run_dir) / "logs" / "eval_log.log"
    out = []
    for line in log_file.read_text().splitlines():
        if "samples done" in line:
            m = _LINE.match(line.split("INFO: ", 1)[1])
            assert m, line
            out.append((int(m[1]), int(m[2]) if m[2] else None, bool(m[3])))
    return out


def mock_run(tmp_path: Path, args: dict[str, Any], **kw: Any) -> Any:
    kw = {"model": MODEL, "eval_type": "mock", "datasets": ["general_vqa"],
          "dataset_args": args, "work_dir": str(tmp_path / "out"), "no_timestamp": True,
          "eval_batch_size": 1, **kw}
    return run_task(**kw)


@pytest.fixture(autouse=True)
def every_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PLAIN_EVERY", 1)


@pytest.mark.parametrize(("limit", "total"), [(4, 2 * 4 * 3), (0.5, 2 * 3 * 3)])
def test_plain_lines_show_the_total_with_limit_and_repeats(
        tmp_path: Path, limit: float, total: int) -> None:
    data = write_dataset(tmp_path, per_subset=6)  # two subsets of 6 records
    report = mock_run(tmp_path, dataset_args(data), limit=limit, repeats=3)
    shown = plain_lines(report)
    assert len(shown) == total
    assert shown[0][:2] == (1, total) and shown[0][2]  # known from the first line, with an ETA
    assert all(t == total for _, t, _ in shown)
    assert shown[-1] == (total, total, False)


def write_bad_first(tmp_path: Path, good: int, bad: int) -> dict[str, Any]:
    data = write_dataset(tmp_path, per_subset=good)
    path = data / "alpha.jsonl"
    path.write_text("{not json\n" * bad + path.read_text())
    return {"general_vqa": {"local_path": str(data), "subset_list": ["alpha"]}}


def test_bad_records_lower_the_total(tmp_path: Path) -> None:
    report = mock_run(tmp_path, write_bad_first(tmp_path, good=8, bad=2), ignore_errors=True)
    shown = plain_lines(report)
    assert report["general_vqa"].summary.skipped == 2
    # 10 records counted; the 2 bad ones (read first) took 2 off before the first line
    assert [t for _, t, _ in shown] == [8] * 8
    assert shown[-1][:2] == (8, 8)


def test_paraphrases_grow_the_total_and_the_demo_ends_with_done_equal_to_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the demo's media are under the working directory
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(ROOT / "examples" / "grounding")
    cfg["simulator"]["truth"] = str(ROOT / "examples" / "grounding" / "truth.json")
    report = run_task({**cfg, "work_dir": str(tmp_path), "no_timestamp": True,
                       "eval_batch_size": 1})
    samples = report["general_vqa"].summary.requested
    assert samples == 16  # 13 records: 5 scenes, 8 questions, 2 with paraphrases (+3)
    shown = plain_lines(report)
    assert all(done <= (total or 0) for done, total, _ in shown)
    assert shown[0][1] == 13  # the records counted before any is read
    assert shown[-1][:2] == (16, 16)


def test_a_parquet_datasets_total_comes_from_its_footer(tmp_path: Path) -> None:
    data = tmp_path / "pq"
    rows = [{"id": f"q{i}", "answer": str(i + 1), "messages": json.dumps(
        [{"role": "user", "content": f"What is {i} plus one?"}])} for i in range(7)]
    write_parquet(data / "nums_test.parquet", rows)
    report = mock_run(tmp_path, {"general_vqa": {"local_path": str(data),
                                                 "subset_list": ["nums"]}}, repeats=2)
    shown = plain_lines(report)
    assert [t for _, t, _ in shown] == [14] * 14 and shown[-1][0] == 14


def test_a_resumed_run_counts_the_reused_samples_as_done(tmp_path: Path) -> None:
    data = write_dataset(tmp_path, per_subset=6)
    first = mock_run(tmp_path, dataset_args(data), limit=2)
    before = plain_lines(first)
    assert before[-1][:2] == (4, 4)
    resumed = mock_run(tmp_path, dataset_args(data), use_cache=first.run_dir)
    assert resumed["general_vqa"].summary.cached == 4
    shown = plain_lines(resumed)[len(before):]  # the run's log file, appended to
    assert shown[0][:2] == (1, 12) and shown[-1][:2] == (12, 12)


def test_a_shards_total_is_its_share_of_the_records(tmp_path: Path) -> None:
    data = write_dataset(tmp_path, per_subset=6)  # 12 records, dealt round-robin over 3 shards
    report = mock_run(tmp_path, dataset_args(data), shard="2/3", repeats=2)
    shown = plain_lines(report)
    assert report["general_vqa"].summary.requested == 8
    assert [t for _, t, _ in shown] == [8] * 8 and shown[-1][0] == 8


def test_tsv_rows_counted_from_the_bytes_equal_the_readers_count(tmp_path: Path) -> None:
    cells = ['"two\nlines"', '"a ""quoted"" word"', "plain", '"\r\nbreak"', ""]
    text = "question\tanswer\r\n" + "".join(
        f"{cells[i % len(cells)]}\t{i}\r\n" + ("\n" if i % 4 == 0 else "") for i in range(40))
    path = tmp_path / "rows.tsv"
    path.write_bytes(text.encode() + b"x" * 5000 + b"\tlong\n" + b"last\t1")
    exact = count_records(path, max_record_bytes=4096)
    assert exact == 42
    assert count_records(path, max_record_bytes=4096, exact=False) == exact
    legacy = sorted((ROOT / "examples" / "legacy").glob("*.tsv"))
    assert legacy
    for tsv in legacy:
        assert count_records(tsv, exact=False) == count_records(tsv)


def test_expected_total_rules() -> None:
    from groundscope.progress import Expected  # here: the run tests above fail on their own

    e = Expected(10, repeats=2)
    assert e.total == 20
    e.bad()
    assert e.total == 18  # each bad record: one record's samples fewer
    e.sample(new_record=True)
    e.sample(new_record=True, kept=False)  # a duplicate id: dropped
    assert e.total == 16
    e.sample(new_record=False)  # a paraphrase: 2 kept of 2 good records, 7 left at 1.5 each
    assert e.total == (2 + round(7 * 1.5)) * 2
    e.finish()
    assert e.total == 4 and Expected(None).total is None


def test_the_bar_follows_the_corrected_total(capsys: pytest.CaptureFixture[str]) -> None:
    from groundscope.progress import Expected, Progress

    p = Progress(True)
    p.expected = Expected(9)
    p.open()
    for _ in range(4):
        p.expected.sample(new_record=True)
        p.advance(0)
    p.expected.bad()
    p.expected.finish()  # 4 samples of 5 records read, the stream ended early
    p.close()
    err = capsys.readouterr().err
    assert "4/4" in err and "/9" in err
