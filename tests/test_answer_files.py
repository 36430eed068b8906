"""Answers files of other tools, in their real formats (examples/answers/, written by
make_fixtures.py as each tool's writer does): recognised, joined to the dataset by id
whatever their order, a missing and an extra id each named and counted, never scored;
``--strict`` makes both fatal; a hostile file is a one-line error naming file:line: field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import EXAMPLES, run_cli
from groundscope import run_task
from groundscope.dataset.answers import read_answers
from groundscope.errors import DatasetError, RecordError
from groundscope.estimate import estimate

HERE = EXAMPLES / "answers"
ARGS = {"general_vqa": {"local_path": str(HERE / "data"), "metric_list": ["BLEU", "Rouge"]}}
FORMATS = {
    "answers.jsonl": "groundscope",
    "evalscope": "evalscope-predictions run directory",
    "evalscope/reviews/my-vlm/general_vqa_items.jsonl": "evalscope-reviews",
    "my-vlm_Items.xlsx": "vlmevalkit",
    "my-vlm_Items.tsv": "vlmevalkit",
    "my-vlm_Items.csv": "vlmevalkit",
    "lmms-eval/my-vlm/20260801_120000_samples_items.jsonl": "lmms-eval",
}
# the fixtures answer 3, 1, 0 and 9 (in that order); the dataset has ids 0..3
JOINED = {"0": "Two cats", "1": "A red bus.", "3": "Paris"}


def graded(run_dir: Path) -> dict[str, str]:
    rows = [json.loads(line) for p in (run_dir / "predictions").rglob("*.jsonl")
            for line in p.read_text().splitlines()]
    return {r["sample_id"]: r["prediction"] for r in rows}


@pytest.mark.parametrize("name", list(FORMATS))
def test_each_format_is_recognised_and_joined_by_id(name: str, tmp_path: Path) -> None:
    book = read_answers(HERE / name)
    assert book.format == FORMATS[name] and not book.bad
    report = run_task({"answers": str(HERE / name), "datasets": ["general_vqa"],
                       "dataset_args": ARGS, "work_dir": str(tmp_path), "no_timestamp": True})
    assert graded(tmp_path) == JOINED  # by id, not by row: the file's order is 3, 1, 0, 9
    rep = report.dataset("general_vqa")
    assert rep.score("rouge-l-r") == 1.0 and rep.row("rouge-l-r").num == 3
    assert rep.summary.skipped == 1  # id 2: no answer
    warnings = " | ".join(rep.summary.warnings)
    assert "1 samples have no answer" in warnings and "'2'" in warnings
    assert "1 answers in" in warnings and "'9'" in warnings


@pytest.mark.slow  # a CLI subprocess
def test_strict_makes_a_missing_or_an_extra_id_fatal(tmp_path: Path) -> None:
    base = {"datasets": ["general_vqa"], "dataset_args": ARGS, "strict": True}
    with pytest.raises(RecordError, match=r"items.jsonl:3: id: '2' has no answer"):
        run_task({**base, "answers": str(HERE / "answers.jsonl"), "work_dir": str(tmp_path / "a")})
    complete = tmp_path / "complete.jsonl"
    complete.write_text("".join(json.dumps({"id": str(i), "prediction": "x"}) + "\n"
                                for i in (0, 1, 2, 3, 9)))
    with pytest.raises(DatasetError, match=r"1 answers name no sample of the dataset: '9'"):
        run_task({**base, "answers": str(complete), "work_dir": str(tmp_path / "b")})
    proc = run_cli("eval", "--answers", str(complete), "--datasets", "general_vqa", "--strict",
                   "--dataset-args", json.dumps(ARGS), "--work-dir", str(tmp_path / "c"),
                   cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "'9'" in proc.stderr


def test_bad_lines_are_named_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    lines = [{"id": "0", "prediction": "Two cats"},
             {"id": "1", "prediction": ""},            # no answer: never an empty answer
             {"id": "3", "prediction": {"x": 1}},      # not text
             {"prediction": "no id"},
             {"id": "0", "prediction": "again"},       # answered twice
             {"id": "3", "prediction": "Paris", "repeat": "two"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + "{not json\n"
                    + json.dumps({"id": "3", "prediction": "x" * 5000}) + "\n")
    book = read_answers(path, max_record_bytes=1024)
    problems = [str(b) for b in book.bad]
    assert any(p.endswith(":2: prediction: no answer (absent, empty or not text)") for p in problems)
    assert any(":3: prediction:" in p for p in problems) and any(":4: id:" in p for p in problems)
    assert any(":5: id: '0' answered twice" in p for p in problems)
    assert any(":6: repeat:" in p for p in problems)
    assert any(":7:" in p for p in problems) and any(":8:" in p for p in problems)
    assert len(problems) == 7 and list(book.answers.values()) == ["Two cats"]
    report = run_task({"answers": str(path), "datasets": ["general_vqa"], "dataset_args": ARGS,
                       "max_record_bytes": 1024, "work_dir": str(tmp_path / "out"),
                       "no_timestamp": True})  # the dataset's record bound, for answers too
    assert graded(tmp_path / "out") == {"0": "Two cats"}
    assert "7 bad lines" in " | ".join(report.dataset("general_vqa").summary.warnings)


@pytest.mark.parametrize("content", [b"not a zip", b"PK\x03\x04broken"])
def test_a_broken_workbook_is_one_line(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "preds.xlsx"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=r"preds.xlsx: not a readable .xlsx: \w+$"):
        read_answers(path)


def test_an_unknown_layout_says_what_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"question": "q", "response": "a"}) + "\n")
    with pytest.raises(DatasetError, match=r"x.jsonl:1: answers file of no known format"):
        read_answers(path)


def test_resume_regrades_only_a_changed_answer(tmp_path: Path) -> None:
    """The answer is in the request hash: a resumed run reuses the same answers' grades."""
    path = tmp_path / "answers.jsonl"
    first = {"0": "Two cats", "1": "A red bus.", "3": "Paris"}
    path.write_text("".join(json.dumps({"id": i, "prediction": a}) + "\n" for i, a in first.items()))
    base = {"answers": str(path), "datasets": ["general_vqa"], "dataset_args": ARGS}
    run_task({**base, "work_dir": str(tmp_path / "run"), "no_timestamp": True})
    path.write_text(path.read_text().replace("Paris", "Lyon"))
    resumed = run_task({**base, "use_cache": str(tmp_path / "run")})
    summary = resumed.dataset("general_vqa").summary
    assert (summary.cached, summary.changed) == (2, 1)
    assert graded(tmp_path / "run")["3"] == "Lyon"
    assert resumed.dataset("general_vqa").score("rouge-l-r") == pytest.approx(2 / 3)


def test_the_dry_run_of_an_answers_run_asks_the_model_nothing() -> None:
    judge = {"strategy": "llm", "models": {"model_id": "j", "api_url": "http://127.0.0.1:9/v1"}}
    plan = estimate({"answers": str(HERE / "answers.jsonl"), "datasets": ["general_vqa"],
                     "dataset_args": {"general_vqa": {"local_path": str(HERE / "data")}},
                     "judge": judge})
    assert plan.row("model").requests == 0
    assert plan.row("correctness").requests == 4  # the judge still grades every sample
