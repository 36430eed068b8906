"""Crash safety: ``groundscope eval`` killed with SIGKILL (or stopped with Ctrl-C) part-way,
then resumed with ``--use-cache RUN_DIR``, ends with every sample exactly once, never asks
the model again for a finished sample, and reports what a clean run reports.

The kill is deterministic, not timed: the simulator answers the first N requests and holds
every later one, so once N predictions are on disk the run is stuck mid-way with requests
in flight, and that is when it is killed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from groundscope import run_task
from groundscope.simulator import SimBehaviour, SimulatorServer
from reliability_support import (
    MODEL,
    GatedSimulator,
    assert_exactly_once,
    complete_lines,
    dataset_args,
    eval_args,
    popen_cli,
    question_ids,
    report_numbers,
    request_sample_id,
    rows,
    run_cli,
    samples_of,
    write_dataset,
)

# kills, SIGKILL mid-write and resumes: subprocess runs of a few seconds each
pytestmark = pytest.mark.slow
BEHAVIOUR = SimBehaviour(accuracy=0.7, seed=5)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("crash"))


@pytest.fixture(scope="module")
def samples(data: Path) -> list:
    return samples_of(data)


@pytest.fixture(scope="module")
def clean_report(data: Path, samples: list, tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("clean") / "run"
    with SimulatorServer(samples, BEHAVIOUR) as url:
        run_task({"model": MODEL, "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": dataset_args(data), "work_dir": str(work), "no_timestamp": True})
    return report_numbers(work)


def _wait_for_predictions(proc: subprocess.Popen, run_dir: Path, n: int) -> None:
    """Poll until ``n`` complete prediction lines are on disk (or the run died)."""
    deadline = time.monotonic() + 60
    while len(rows(run_dir, "predictions")) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never produced its first predictions"
        time.sleep(0.01)


def _interrupt(data: Path, samples: list, run_dir: Path, n: int, sig: int) -> tuple[int, str]:
    """Start a run, let exactly ``n`` requests be answered, send ``sig``; (returncode, stderr)."""
    server = GatedSimulator(samples, BEHAVIOUR, open_for=n)
    url = server.start()
    try:
        proc = popen_cli(eval_args(url, data, run_dir, "--eval-batch-size", "4"), cwd=run_dir.parent)
        try:
            _wait_for_predictions(proc, run_dir, n)
            proc.send_signal(sig)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    finally:
        server.stop()
    return proc.returncode, stderr


def _resume_and_check(data: Path, samples: list, run_dir: Path, clean_report: dict) -> None:
    """Resume; assert exactly-once, no second request for a finished sample, equal report."""
    before = {r["sample_id"]: r for r in rows(run_dir, "predictions")}
    server = SimulatorServer(samples, BEHAVIOUR)
    url = server.start()
    try:
        proc = run_cli(eval_args(url, data, run_dir.parent / "unused", "--use-cache", str(run_dir)),
                       cwd=run_dir.parent)
        asked = [request_sample_id(r, question_ids(samples)) for r in server.requests()]
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert not set(asked) & set(before), "a finished sample was requested again"
    assert sorted(asked) == sorted({s.id for s in samples} - set(before))  # each once
    assert_exactly_once(run_dir, {s.id for s in samples})
    after = {r["sample_id"]: r for r in rows(run_dir, "predictions")}
    assert all(after[k] == v for k, v in before.items())  # finished work untouched
    assert report_numbers(run_dir) == clean_report
    report_path = run_dir / "reports" / MODEL / "general_vqa.groundscope.json"
    summary = json.loads(report_path.read_text())["summary"]
    assert (summary["cached"], summary["requested"]) == (len(before), len(samples))


@pytest.mark.parametrize("n", [1, 23, 51])
def test_sigkill_then_resume(data: Path, samples: list, clean_report: dict, tmp_path: Path,
                             n: int) -> None:
    run_dir = tmp_path / "run"
    code, _ = _interrupt(data, samples, run_dir, n, signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert len(rows(run_dir, "predictions")) == n  # nothing else could finish
    _resume_and_check(data, samples, run_dir, clean_report)


def test_sigkill_mid_write_then_resume(data: Path, samples: list, clean_report: dict,
                                       tmp_path: Path) -> None:
    """A line torn by the kill (no newline) is not a finished sample: it is asked again."""
    run_dir = tmp_path / "run"
    _interrupt(data, samples, run_dir, 23, signal.SIGKILL)
    path = max((run_dir / "predictions" / MODEL).glob("*.jsonl"), key=lambda p: p.stat().st_size)
    raw = path.read_bytes()
    last = raw.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(raw[: last + (len(raw) - last) // 2])  # the last line, half written
    assert len(complete_lines(path)) == raw.count(b"\n") - 1
    _resume_and_check(data, samples, run_dir, clean_report)


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(data: Path, samples: list,
                                                     clean_report: dict, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, stderr = _interrupt(data, samples, run_dir, 17, signal.SIGINT)
    assert code == 130, stderr
    assert f"--use-cache {run_dir}" in stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr
    for path in (run_dir / "predictions" / MODEL).glob("*.jsonl"):
        assert path.read_bytes().endswith(b"\n")  # flushed, nothing torn
    assert len(rows(run_dir, "predictions")) == 17
    assert "run directory:" in (run_dir / "logs" / "eval_log.log").read_text()
    _resume_and_check(data, samples, run_dir, clean_report)


def _rewrite(path: Path, sample_id: str, **changes: str) -> None:
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["id"] == sample_id:
            if "answer" in changes:
                record["answer"] = changes["answer"]
            if "question" in changes:
                record["messages"][0]["content"][0]["text"] = changes["question"]
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


def test_changed_records_and_config_are_detected_not_mixed(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    data = write_dataset(tmp_path_factory.mktemp("changed"))
    run_dir = tmp_path / "run"
    cfg = {"model": MODEL, "datasets": ["general_vqa"], "dataset_args": dataset_args(data),
           "work_dir": str(run_dir), "no_timestamp": True}
    with SimulatorServer(samples_of(data), BEHAVIOUR) as url:
        run_task({**cfg, "api_url": url})
    old = {(r["sample_id"], r["scorer"]): r for r in rows(run_dir, "reviews")}
    # One reference changes (the request does not: re-score, do not re-ask); one question
    # changes (a new request).
    _rewrite(data / "alpha.jsonl", "alpha-004", answer="A completely different reference text.")
    _rewrite(data / "alpha.jsonl", "alpha-005", question="[alpha 5] Which bird is this?")
    server = SimulatorServer(samples_of(data), BEHAVIOUR)
    url = server.start()
    try:
        run_task({**cfg, "api_url": url, "use_cache": str(run_dir)})
        asked = [request_sample_id(r, question_ids(samples_of(data))) for r in server.requests()]
        report = json.loads((run_dir / "reports" / MODEL / "general_vqa.groundscope.json").read_text())
        assert asked == ["alpha-005"]
        assert report["summary"]["changed"] == 2 and report["summary"]["cached"] == 59
        assert_exactly_once(run_dir, {s.id for s in samples_of(data)})
        preds = {r["sample_id"]: r for r in rows(run_dir, "predictions")}
        assert preds["alpha-004"]["sample"]["target"] == ["A completely different reference text."]
        new = {(r["sample_id"], r["scorer"]): r for r in rows(run_dir, "reviews")}
        assert new[("alpha-004", "rouge")]["values"] != old[("alpha-004", "rouge")]["values"]
        assert all(new[k] == v for k, v in old.items() if k[0] not in ("alpha-004", "alpha-005"))
        log = (run_dir / "logs" / "eval_log.log").read_text()
        assert "2 samples changed since the cached run" in log
        # A changed generation config: reported up front, and every sample is asked again.
        server.reset()
        run_task({**cfg, "api_url": url, "use_cache": str(run_dir),
                  "generation_config": {"max_tokens": 64}})
        assert server.stats()["requests"] == 60
    finally:
        server.stop()
    log = (run_dir / "logs" / "eval_log.log").read_text()
    assert f"resuming {run_dir} with a changed config: generation_config" in log
    assert_exactly_once(run_dir, {s.id for s in samples_of(data)})
