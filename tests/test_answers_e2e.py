"""``--eval-type answers`` end to end: a simulator run's answers, saved and graded again
(from an answers file in another order, and from the records' own ``prediction`` field),
give the same BLEU/ROUGE, MCQ accuracy and judge accuracy, with zero model requests; the
grounding demo graded from a saved run gives the demo's numbers, the judge simulator seeing
only judge requests."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_support import EXAMPLES, dataset_samples, run_cli
from groundscope import run_task
from groundscope.config import SimulatorArgs, load_config
from groundscope.errors import ConfigError, RecordError
from groundscope.report.model import Report
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.simulator.grounding import sim_responders
from groundscope.simulator.judge import JudgeResponder

VQA = {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}
MCQ = {"local_path": str(EXAMPLES / "mcq"), "subset_list": ["example"]}
ARGS = {"general_vqa": {**VQA, "metric_list": ["BLEU", "Rouge", "acc"]}, "general_vmcq": MCQ}


def rows(report: Report) -> dict[tuple[str, str, str], tuple[int, float | None]]:
    return {(d.dataset, r.metric, r.subset): (r.num, r.score)
            for d in report.datasets for r in d.metrics}


def predictions(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted((run_dir / "predictions").rglob("*.jsonl"))
            for line in p.read_text().splitlines()]


@pytest.fixture(scope="module")
def model_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Report, Path, str, JudgeResponder]]:
    """A model run (accuracy 0.5: right and wrong answers) with an LLM judge."""
    run_dir = tmp_path_factory.mktemp("model_run")
    samples = (dataset_samples("general_vqa", {"general_vqa": VQA})
               + dataset_samples("general_vmcq", {"general_vmcq": MCQ}))
    model = SimulatorServer(samples, SimBehaviour(accuracy=0.5, seed=3))
    judge = JudgeResponder()
    judges = SimulatorServer(responders=[judge])
    judges.start()
    with model as url:
        report = run_task({"model": "m", "api_url": url, "datasets": list(ARGS),
                           "dataset_args": ARGS, "work_dir": str(run_dir), "no_timestamp": True,
                           "judge": {"strategy": "llm",
                                     "models": {"model_id": "j", "api_url": judges.base_url}}})
    yield report, run_dir, judges.base_url, judge
    judges.stop()


def test_answers_file_in_another_order_grades_as_the_model_run(model_run, tmp_path: Path) -> None:
    report, run_dir, judge_url, judge = model_run
    preds = predictions(run_dir)
    calls = judge.calls
    random.Random(0).shuffle(preds)  # the join is by id, not by order
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": p["sample_id"], "subset": p["subset"],
                                           "prediction": p["prediction"]}) + "\n" for p in preds))
    graded = run_task({"model": "m", "answers": str(answers), "datasets": list(ARGS),
                       "dataset_args": ARGS, "work_dir": str(tmp_path / "out"), "no_timestamp": True,
                       "judge": {"strategy": "llm", "models": {"model_id": "j", "api_url": judge_url}}})
    expected = rows(report)
    assert {"bleu-4", "rouge-l-r", "accuracy"} <= {k[1] for k in expected if k[0] == "general_vqa"}
    accuracy = expected[("general_vqa", "accuracy", "example_openai")][1]
    assert accuracy is not None and 0 < accuracy < 1  # right and wrong answers, judged
    assert rows(graded) == expected
    assert judge.calls > calls  # the judge graded the read answers (its cache is per run)
    assert graded.dataset("general_vmcq").summary.skipped == 0


def test_a_run_directory_is_an_answers_file(model_run, tmp_path: Path) -> None:
    report, run_dir, judge_url, _ = model_run
    graded = run_task({"model": "m", "answers": str(run_dir), "datasets": list(ARGS),
                       "dataset_args": ARGS, "work_dir": str(tmp_path), "no_timestamp": True,
                       "judge": {"strategy": "llm", "models": {"model_id": "j", "api_url": judge_url}}})
    assert rows(graded) == rows(report)


def test_answers_in_the_records_grade_as_the_model_run(model_run, tmp_path: Path) -> None:
    """The dataset's own ``prediction`` field; a record without one is a bad record."""
    report, run_dir, _, _ = model_run
    by_origin = {p["sample"]["origin"]: p["prediction"] for p in predictions(run_dir)
                 if p["dataset"] == "general_vqa"}
    data = tmp_path / "vqa"
    data.mkdir()
    shutil.copytree(EXAMPLES / "media", tmp_path / "media")
    source = EXAMPLES / "vqa" / "example_openai.jsonl"
    lines = source.read_text().splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        record = json.loads(line)
        record["prediction"] = by_origin[f"{source}:{number}"]
        out.append(json.dumps(record))
    (data / "example_openai.jsonl").write_text("\n".join(out) + "\n" + lines[0] + "\n")
    args = {"general_vqa": {"local_path": str(data), "subset_list": ["example_openai"],
                            "metric_list": ["BLEU", "Rouge"]}}
    graded = run_task({"eval_type": "answers", "datasets": ["general_vqa"], "dataset_args": args,
                       "media_roots": [str(tmp_path / "media")],
                       "work_dir": str(tmp_path / "out"), "no_timestamp": True})
    rep = graded.dataset("general_vqa")
    assert rep.model == "answers"  # no --model: the answers' default name
    assert rep.summary.skipped == 1  # the copy of line 1 without a prediction
    expected = {k[1:]: v for k, v in rows(report).items()
                if k[0] == "general_vqa" and k[1] != "accuracy"}
    assert {k[1:]: v for k, v in rows(graded).items()} == expected
    skipped = (tmp_path / "out" / "skipped.jsonl").read_text()
    assert f"example_openai.jsonl:{len(lines) + 1}: prediction: no answer" in skipped
    with pytest.raises(RecordError, match=r"prediction: no answer"):
        run_task({"eval_type": "answers", "datasets": ["general_vqa"], "dataset_args": args,
                  "media_roots": [str(tmp_path / "media")],
                  "work_dir": str(tmp_path / "strict"), "strict": True})


def test_config_of_an_answers_run(tmp_path: Path) -> None:
    cfg = load_config({"answers": "a.jsonl", "datasets": ["general_vqa"]})
    assert (cfg.eval_type, cfg.model, cfg.api_url) == ("answers", "answers", None)
    with pytest.raises(ConfigError, match="needs eval_type answers"):
        load_config({"answers": "a.jsonl", "eval_type": "mock", "datasets": ["general_vqa"]})
    with pytest.raises(ConfigError, match="repeats"):
        load_config({"eval_type": "answers", "repeats": 2, "datasets": ["general_vqa"]})
    proc = run_cli("eval", "--answers", str(tmp_path / "none.jsonl"), "--datasets", "general_vqa",
                   "--dataset-args", json.dumps({"general_vqa": VQA}), "--work-dir", str(tmp_path),
                   cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "none.jsonl: answers file not found" in proc.stderr


def test_the_grounding_demo_from_saved_answers_asks_no_model(tmp_path: Path) -> None:
    """The demo's numbers from its own saved answers; the judge simulator's log shows only
    the grounding judge: the evaluated model was asked nothing."""
    root = EXAMPLES / "grounding"
    cfg = yaml.safe_load((EXAMPLES / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(root)
    cfg["simulator"]["truth"] = str(root / "truth.json")
    demo = run_task({**cfg, "work_dir": str(tmp_path / "demo"), "no_timestamp": True})
    judge = SimulatorServer(responders=sim_responders(SimulatorArgs(truth=str(root / "truth.json"), seed=0)))
    with judge as url:
        graded = run_task({**cfg, "eval_type": "answers", "model": "groundscope-sim",
                           "answers": str(tmp_path / "demo"), "judge": {**cfg["judge"], "models": {
                               "model_id": "grounding-judge", "api_url": url}},
                           "work_dir": str(tmp_path / "graded"), "no_timestamp": True})
    assert rows(graded) == rows(demo)
    seen = judge.requests()
    assert seen and {r["model"] for r in seen} == {"grounding-judge"}
    assert judge.stats()["requests"] == len(seen)


def test_a_vlmevalkit_tsv_with_a_prediction_column(tmp_path: Path) -> None:
    """VLMEvalKit's prediction file is its TSV layout plus ``prediction``: graded as is."""
    source = (EXAMPLES / "legacy" / "custom_mcq.tsv").read_text().splitlines()
    answers = ["A", "The answer is B", "", "C", "(D)"]  # line 4 has none: a bad record
    rows = [source[0] + "\tprediction"] + [f"{line}\t{a}" for line, a in
                                           zip(source[1:], answers, strict=True)]
    data = tmp_path / "legacy"
    data.mkdir()
    (data / "custom_mcq.tsv").write_text("\n".join(rows) + "\n")
    shutil.copytree(EXAMPLES / "media", tmp_path / "media")
    report = run_task({"eval_type": "answers", "datasets": ["legacy_mcq"],
                       "dataset_args": {"legacy_mcq": {"local_path": str(data)}},
                       "media_roots": [str(tmp_path / "media")],
                       "work_dir": str(tmp_path / "out"), "no_timestamp": True})
    rep = report.dataset("legacy_mcq")
    keys = [line.split("\t")[2] for line in source[1:]]  # the answer column
    right = [a.split()[-1].strip("()") == k for a, k in zip(answers, keys, strict=True) if a]
    assert rep.summary.skipped == 1
    row = rep.row(rep.primary_metric)
    assert row is not None and row.num == len(right)
    assert row.score == pytest.approx(sum(right) / len(right))
