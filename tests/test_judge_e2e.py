"""The seed guide's "Configure Judge Model" example, end to end against the simulator.

CLI and Python API, then what makes the judge cheap and honest: a resumed run and
``groundscope score`` make zero judge calls, a judge that breaks its contract gives
``judge_failed`` (excluded and counted), several judges and human labels add agreement rows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import cli_support
from cli_support import ROOT, dataset_samples, table_rows
from groundscope import TaskConfig, run_task
from groundscope.simulator import JudgeResponder, SimBehaviour, SimulatorServer

VQA_ARGS = {"general_vqa": {"local_path": str(ROOT / "examples" / "vqa"),
                            "subset_list": ["example_openai"]}}
MEDIA_ROOT = ("--media-root", str(ROOT / "examples" / "media"))  # runs are not started in ROOT
SECRET = "sk-judge-e2e-SECRET-0123456789"
MODEL_KEY = "sk-model-e2e-SECRET-9876543210"


def example_samples() -> list:
    return dataset_samples("general_vqa", VQA_ARGS)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cli_support.run_cli(*args, cwd=cwd,
                               env_extra={"DASHSCOPE_API_KEY": SECRET, "GS_MODEL_KEY": MODEL_KEY})


@pytest.fixture(scope="module")
def sim():
    judge = JudgeResponder()
    server = SimulatorServer(example_samples(), SimBehaviour(accuracy=1.0), responders=[judge])
    server.start()
    yield server, judge
    server.stop()


def judge_flag(url: str) -> str:
    return json.dumps({"strategy": "llm", "models": {
        "model_id": "qwen-plus", "api_url": url, "api_key": "$DASHSCOPE_API_KEY",
        "generation_config": {"temperature": 0.0, "max_tokens": 4096}}})


@pytest.fixture(scope="module")
def cli_run(sim, tmp_path_factory):
    server, judge = sim
    work = tmp_path_factory.mktemp("judge_cli")
    before = judge.calls
    proc = run_cli(
        "eval", "--model", "qwen-vl-plus", "--api-url", server.base_url,
        "--api-key", "$GS_MODEL_KEY", "--eval-type", "openai_api", "--datasets", "general_vqa",
        "--dataset-args", json.dumps(VQA_ARGS), "--limit", "5", "--eval-batch-size", "5",
        "--judge", judge_flag(server.base_url), "--work-dir", str(work), *MEDIA_ROOT,
        "--no-progress", cwd=work)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return proc, run_dir, judge.calls - before


def test_cli_judge_example_prints_accuracy_rows(sim, cli_run) -> None:
    server, _ = sim
    proc, run_dir, judge_calls = cli_run
    rows = table_rows(proc.stdout)
    assert rows == {("Accuracy ↑", "example_openai"): (5, "100%")}  # no BLEU / ROUGE rows
    assert judge_calls == 5
    assert "judged 5, judge_failed 0" in proc.stdout
    report = json.loads((run_dir / "reports" / "qwen-vl-plus" / "general_vqa.groundscope.json").read_text())
    assert report["primary_metric"] == "accuracy"
    assert report["extra"]["judge"]["models"] == ["qwen-plus"]
    judge_requests = [r for r in server.requests() if r.get("model") == "qwen-plus"]
    assert judge_requests and all(r["auth_sha256"] for r in judge_requests)
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in proc.stdout + proc.stderr
    assert (run_dir / "cache" / "judge.jsonl").read_text().count("\n") == 5


def test_use_cache_rerun_makes_zero_judge_calls(sim, cli_run, tmp_path) -> None:
    server, judge = sim
    _, finished, _ = cli_run
    run_dir = tmp_path / "copy"
    shutil.copytree(finished, run_dir)
    args = ("eval", "--model", "qwen-vl-plus", "--api-url", server.base_url,
            "--api-key", "$GS_MODEL_KEY", "--datasets", "general_vqa",
            "--dataset-args", json.dumps(VQA_ARGS), "--limit", "5",
            "--judge", judge_flag(server.base_url), "--use-cache", str(run_dir), *MEDIA_ROOT,
            "--no-progress")
    before, requests_before = judge.calls, server.stats()["requests"]
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert table_rows(proc.stdout)[("Accuracy ↑", "example_openai")] == (5, "100%")
    # lose the saved judgements too: the judge cache still answers every call
    shutil.rmtree(run_dir / "reviews")
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert table_rows(proc.stdout)[("Accuracy ↑", "example_openai")] == (5, "100%")
    assert judge.calls == before
    assert server.stats()["requests"] == requests_before  # neither model nor judge asked


def test_score_command_makes_zero_judge_calls(sim, cli_run, tmp_path) -> None:
    _, judge = sim
    _, finished, _ = cli_run
    run_dir = tmp_path / "copy"
    shutil.copytree(finished, run_dir)
    before = judge.calls
    proc = run_cli("score", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert table_rows(proc.stdout) == {("Accuracy ↑", "example_openai"): (5, "100%")}
    assert judge.calls == before
    reviews = (run_dir / "reviews" / "qwen-vl-plus" / "general_vqa_example_openai.jsonl")
    assert all(json.loads(line)["detail"]["verdict"] == "A" for line in reviews.open())


def test_python_api_judge_example(sim, tmp_path) -> None:
    server, judge = sim
    before = judge.calls
    task_cfg = TaskConfig(
        model="qwen-vl-plus", api_url=server.base_url, api_key=MODEL_KEY,
        eval_type="openai_api", datasets=["general_vqa"], dataset_args=VQA_ARGS, limit=5,
        judge={"strategy": "llm", "models": {
            "model_id": "qwen-plus-api", "api_url": server.base_url, "api_key": SECRET,
            "generation_config": {"temperature": 0.0, "max_tokens": 4096}}},
        eval_batch_size=5, work_dir=str(tmp_path))
    report = run_task(task_cfg=task_cfg)
    rep = report.dataset("general_vqa")
    assert [(r.metric, r.subset, r.num) for r in rep.metrics] == [("accuracy", "example_openai", 5)]
    assert rep.score() == 1.0 and judge.calls - before == 5
    assert "Accuracy ↑" in report.table() and "BLEU" not in report.table()


def test_broken_judge_gives_judge_failed_excluded_and_counted(tmp_path) -> None:
    garbage = JudgeResponder(malformed=1.0)
    with SimulatorServer(example_samples(), SimBehaviour(accuracy=1.0),
                         responders=[garbage]) as url:
        report = run_task({
            "model": "m", "api_url": url, "datasets": ["general_vqa"], "dataset_args": VQA_ARGS,
            "limit": 4, "work_dir": str(tmp_path),
            "judge": {"strategy": "llm", "max_repairs": 1,
                      "models": {"model_id": "bad-judge", "api_url": url}}})
    rep = report.dataset("general_vqa")
    row = rep.row("accuracy")
    assert row is not None and row.num == 0 and row.score is None and row.excluded == 4
    assert garbage.calls == 4 * 2  # each judgement: one try and one repair
    assert rep.extra["judge"]["judge_failed"] == 4
    from groundscope.report.table import render_summary

    assert "judge_failed 4" in render_summary(report.datasets)
    reviews = Path(report.run_dir, "reviews", "m", "general_vqa_example_openai.jsonl")
    statuses = {json.loads(line)["status"] for line in reviews.open()}
    assert statuses == {"judge_failed"}


def test_offline_demo_several_judges_and_human_labels(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    labels = ["correct", "correct", "incorrect", "yes", "0", "maybe"]
    with (data / "labelled.jsonl").open("w") as fh:
        for i, label in enumerate(labels):
            fh.write(json.dumps({"messages": [{"role": "user", "content": f"Question {i}?"}],
                                 "answer": f"answer {i}", "rater": label}) + "\n")
    judges = [{"model_id": f"judge-{k}", "api_url": "mock"} for k in "abc"]
    report = run_task({
        "eval_type": "mock", "datasets": ["general_vqa"], "work_dir": str(tmp_path / "out"),
        "dataset_args": {"general_vqa": {"local_path": str(data)}},
        "simulator": {"accuracy": 1.0, "judge_noise": 0.0},
        "judge": {"strategy": "llm", "models": judges, "human_label_field": "rater"}})
    rep = report.dataset("general_vqa")
    assert rep.score("accuracy") == 1.0
    assert rep.row("judge_agreement").score == 1.0 and rep.row("judge_agreement").num == 6
    human = rep.extra["judge"]["human"]
    # judge says correct on all 6; labelled: T, T, F, T, F (the 6th is unlabelled)
    assert human["samples"] == 5 and human["accuracy"] == pytest.approx(3 / 5)
    assert human["confusion"]["matrix"] == [[3, 0], [2, 0]]
    assert human["cohen_kappa"] == pytest.approx(0.0)
    assert rep.row("judge_human_accuracy").score == pytest.approx(0.6)
    assert "Judge vs human ↑" in report.table()


def test_offline_demo_noisy_judges_disagree(tmp_path) -> None:
    judges = [{"model_id": f"judge-{k}", "api_url": "mock"} for k in "abc"]
    report = run_task({
        "eval_type": "mock", "datasets": ["general_vqa"], "work_dir": str(tmp_path),
        "dataset_args": VQA_ARGS, "simulator": {"accuracy": 1.0, "judge_noise": 0.4},
        "judge": {"strategy": "llm", "models": judges}})
    rep = report.dataset("general_vqa")
    agreement = rep.row("judge_agreement")
    assert agreement is not None and agreement.num == 9 and agreement.score < 1.0
    assert rep.extra["judge"]["agreement"]["fleiss_kappa"] is not None
    reviews = Path(report.run_dir, "reviews", "groundscope-sim", "general_vqa_example_openai.jsonl")
    votes = [json.loads(line)["detail"]["votes"] for line in reviews.open()]
    assert all(len(v) == 3 for v in votes)


def test_resume_rejudges_judge_failed_samples(tmp_path) -> None:
    """A judge that was down (HTTP 500) gave judge_failed; --use-cache asks it again, and
    only for those samples (transport failures are not cached, verdicts are)."""
    flaky = JudgeResponder()
    # every judge request fails once with a 500; with max_retries 0 that is a failed vote
    with SimulatorServer(example_samples(), SimBehaviour(accuracy=1.0)) as model_url, \
            SimulatorServer(responders=[flaky],
                            behaviour=SimBehaviour(rate_500=1.0, max_faults_per_key=1)) as judge_url:
        cfg = {"model": "m", "api_url": model_url, "datasets": ["general_vqa"],
               "dataset_args": VQA_ARGS, "limit": 3, "max_retries": 0,
               "work_dir": str(tmp_path), "no_timestamp": True,
               "judge": {"strategy": "llm", "models": {"model_id": "j", "api_url": judge_url}}}
        first = run_task(cfg).dataset("general_vqa")
        assert first.row("accuracy").excluded == 3 and flaky.calls == 0
        second = run_task({**cfg, "use_cache": str(tmp_path)}).dataset("general_vqa")
        assert second.row("accuracy").num == 3 and second.score() == 1.0 and flaky.calls == 3
        third = run_task({**cfg, "use_cache": str(tmp_path)}).dataset("general_vqa")
        assert third.score() == 1.0 and flaky.calls == 3  # nothing left to ask


def test_report_after_score_with_a_new_judge_keeps_that_judges_figures(sim, tmp_path) -> None:
    # a run made without a judge, scored afterwards by one (`score --judge`), then its
    # report rebuilt (`report`): the report is the judged one, not the run's first metrics
    # with every prediction "unscored" (found in the fifth session of 2026-12-06)
    server, _ = sim
    proc = run_cli(
        "eval", "--model", "qwen-vl-plus", "--api-url", server.base_url,
        "--api-key", "$GS_MODEL_KEY", "--eval-type", "openai_api", "--datasets", "general_vqa",
        "--dataset-args", json.dumps(VQA_ARGS), "--limit", "5", "--work-dir", str(tmp_path / "w"),
        "--no-timestamp", *MEDIA_ROOT, "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run_dir = tmp_path / "w"
    scored = run_cli("score", str(run_dir), "--judge", judge_flag(server.base_url),
                     "--judge-key-env", "DASHSCOPE_API_KEY", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    report_file = run_dir / "reports" / "qwen-vl-plus" / "general_vqa.groundscope.json"
    judged = json.loads(report_file.read_text())
    assert judged["primary_metric"] == "accuracy"
    reported = run_cli("report", str(run_dir), cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    again = json.loads(report_file.read_text())
    assert "no score" not in reported.stderr + reported.stdout
    for key in ("primary_metric", "subsets", "metrics"):
        assert again[key] == judged[key], key
    assert again["summary"]["usage"] == judged["summary"]["usage"]  # the judge's calls too
    saved = json.loads((run_dir / "config.json").read_text())["judge"]
    assert saved["models"][0]["api_key"] == "$DASHSCOPE_API_KEY"  # a reference, never the key
    assert SECRET not in (run_dir / "config.json").read_text()
    assert SECRET not in (run_dir / "configs" / "task_config.yaml").read_text()


def test_a_judge_that_cannot_be_recorded_says_its_reviews_are_in(tmp_path, monkeypatch) -> None:
    # score --judge replaced the reviews, then could not write config.json (a full disk):
    # the error said "the saved reviews are unchanged" over reviews that were not
    import errno

    from groundscope import fileio, store
    from groundscope.errors import StoreError
    from groundscope.rescore import rescore_run

    report = run_task({
        "eval_type": "mock", "datasets": ["general_vqa"], "work_dir": str(tmp_path),
        "dataset_args": VQA_ARGS, "simulator": {"accuracy": 1.0}, "no_timestamp": True})
    reviews = Path(report.run_dir, "reviews", "groundscope-sim", "general_vqa_example_openai.jsonl")
    before = reviews.read_bytes()

    def full_disk(path: Path, data: bytes, *, hint: str = "") -> None:
        if path.name == "config.json":
            raise fileio.write_error(path, OSError(errno.ENOSPC, "No space left on device"), hint)
        fileio.atomic_write(path, data, hint=hint)

    monkeypatch.setattr(store, "atomic_write", full_disk)
    judge = {"strategy": "llm", "models": [{"model_id": "judge-a", "api_url": "mock"}]}
    with pytest.raises(StoreError) as failed:
        rescore_run(report.run_dir, judge=judge)
    assert reviews.read_bytes() != before  # the new judge's reviews are in ...
    assert "unchanged" not in str(failed.value)  # ... and the message says so
    assert "are the new ones" in str(failed.value) and "--judge" in str(failed.value)


def test_a_dataset_half_replaced_by_a_new_judge_says_so_and_names_it(tmp_path, monkeypatch) -> None:
    # a dataset's subsets are replaced one at a time: when a later one fails (a full disk),
    # the earlier ones hold the new judge's reviews, and the error said "the saved reviews
    # are unchanged" while config.json named no judge (found by an outside attack)
    import errno
    import os

    from groundscope import store
    from groundscope.errors import StoreError
    from groundscope.rescore import rescore_run

    both = {"general_vqa": {**VQA_ARGS["general_vqa"],
                            "subset_list": ["example_openai", "example_placeholder"]}}
    report = run_task({"eval_type": "mock", "datasets": ["general_vqa"], "work_dir": str(tmp_path),
                       "dataset_args": both, "simulator": {"accuracy": 1.0},
                       "no_timestamp": True})
    real_replace = os.replace

    def full_disk(src, dst):  # the second subset's reviews cannot be swapped in
        if str(dst).endswith("general_vqa_example_placeholder.jsonl"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(store.os, "replace", full_disk)
    judge = {"strategy": "llm", "models": [{"model_id": "judge-a", "api_url": "mock"}]}
    with pytest.raises(StoreError) as failed:
        rescore_run(report.run_dir, judge=judge)
    assert "unchanged" not in str(failed.value) and "--judge" in str(failed.value)
    config = json.loads(Path(report.run_dir, "config.json").read_text())
    assert config["judge"]["models"][0]["model_id"] == "judge-a"  # as the replaced reviews


def test_score_with_a_judge_keeps_a_schema_1_runs_version(tmp_path) -> None:
    # a run of schema 1 keeps its version when score --judge names its judge: its reports
    # stay where that schema has them (found by an outside attack)
    from groundscope.rescore import rescore_run

    report = run_task({"eval_type": "mock", "datasets": ["general_vqa"], "work_dir": str(tmp_path),
                       "dataset_args": VQA_ARGS, "simulator": {"accuracy": 1.0},
                       "no_timestamp": True})
    path = Path(report.run_dir, "config.json")
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": 1}))
    rescore_run(report.run_dir, judge={"strategy": "llm",
                                       "models": [{"model_id": "judge-a", "api_url": "mock"}]})
    config = json.loads(path.read_text())
    assert config["schema_version"] == 1 and config["judge"]["models"][0]["model_id"] == "judge-a"
