"""A run that evaluated nothing (issue 13, item 10): every record bad, every request failed,
or no record at all. The run keeps its outputs, exits 1 with one line naming the dataset and
where to look (``skipped.jsonl``), and ``run_task`` raises ``NothingEvaluated``. Inputs:
``tests/untrusted/es_report/`` (see its README)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_support import EXAMPLES, dataset_samples, run_cli
from groundscope import GroundscopeError, run_task
from groundscope.errors import NothingEvaluated
from groundscope.report.model import Report
from groundscope.simulator import SimBehaviour, SimulatorServer

CORPUS = Path(__file__).parent / "untrusted" / "es_report"
GOOD = {"general_vqa": {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    shutil.copytree(CORPUS, tmp_path / "data")
    return tmp_path / "data"


def _eval(data: Path, run_dir: Path, dataset_args: dict, *extra: str):
    return run_cli("eval", "--eval-type", "mock", "--datasets", *dataset_args,
                   "--dataset-args", json.dumps(dataset_args), "--work-dir", str(run_dir),
                   "--no-timestamp", "--no-progress", *extra, cwd=data)


def test_all_bad_records_exit_1_with_one_line_naming_skipped_jsonl(data: Path,
                                                                    tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = {"general_vqa": {"local_path": str(data / "all_bad"), "subset_list": ["all_bad"]}}
    proc = _eval(data, run_dir, args)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"groundscope: general_vqa: nothing was evaluated: all 3 records were bad, see "
        f"{run_dir / 'skipped.jsonl'}")
    assert proc.stdout == ""  # no table of nothing
    assert len((run_dir / "skipped.jsonl").read_text().splitlines()) == 3
    # Outputs are written all the same; EvalScope's report has no score rather than a 0.
    es = json.loads((run_dir / "reports" / "groundscope-sim" / "general_vqa.json").read_text())
    assert es["metrics"] == [] and "score" not in es
    assert es["execution_summary"]["skipped"] == 3 and es["execution_summary"]["incomplete"]


def test_run_task_raises_nothing_evaluated_with_the_report(data: Path, tmp_path: Path) -> None:
    args = {"general_vqa": {"local_path": str(data / "all_bad"), "subset_list": ["all_bad"]}}
    with pytest.raises(NothingEvaluated) as caught:
        run_task({"eval_type": "mock", "datasets": ["general_vqa"], "dataset_args": args,
                  "work_dir": str(tmp_path / "run"), "no_timestamp": True})
    assert isinstance(caught.value, GroundscopeError)
    assert str(caught.value).startswith("general_vqa: nothing was evaluated: all 3 records were bad")
    report = caught.value.report
    assert isinstance(report, Report) and report["general_vqa"].summary.skipped == 3


def test_a_dataset_with_nothing_fails_the_run_but_the_others_are_shown(data: Path,
                                                                        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = {**GOOD, "general_vmcq": {"local_path": str(data / "all_bad"),
                                     "subset_list": ["all_bad_mcq"]}}
    proc = _eval(data, run_dir, args, "--sim-accuracy", "1.0")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"groundscope: general_vmcq: nothing was evaluated: all 2 records were bad, see "
        f"{run_dir / 'skipped.jsonl'}")
    assert "ROUGE ↑ · L · Recall" in proc.stdout and "General-VMCQ: requested 0" in proc.stdout
    assert (run_dir / "reports" / "groundscope-sim" / "general_vqa.json").exists()


def test_every_request_failed(tmp_path: Path) -> None:
    samples = dataset_samples("general_vqa", GOOD)
    with SimulatorServer(samples, SimBehaviour(rate_500=1.0)) as url:
        proc = run_cli("eval", "--model", "m", "--api-url", url, "--datasets", "general_vqa",
                       "--dataset-args", json.dumps(GOOD), "--ignore-errors", "--max-retries",
                       "0", "--work-dir", str(tmp_path / "run"), "--no-timestamp",
                       "--media-root", str(EXAMPLES / "media"), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"groundscope: general_vqa: nothing was evaluated: all {len(samples)} requests failed "
        "(the predictions files say why)")


def test_a_dataset_without_records(data: Path, tmp_path: Path) -> None:
    args = {"general_vqa": {"local_path": str(data / "empty"), "subset_list": ["empty"]}}
    proc = _eval(data, tmp_path / "run", args)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "groundscope: general_vqa: nothing was evaluated: the dataset has no records")
