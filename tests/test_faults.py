"""Fault injection: a run against a simulator that fails a third of its requests in every way
(429 with Retry-After, 500, hung connections, malformed JSON, dropped connections) scores
every sample exactly once and reports the numbers of a fault-free run. Plus the failure
policy: non-retryable 4xx, refusals, the retry budget, the error budget, ``ignore_errors``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from groundscope import run_task
from groundscope.errors import ErrorBudgetExceeded
from groundscope.simulator import SimBehaviour, SimReply, SimRequest, SimulatorServer
from reliability_support import (
    MODEL,
    assert_exactly_once,
    dataset_args,
    report_numbers,
    rows,
    samples_of,
    write_dataset,
)

ACCURACY, SEED = 0.7, 5
FAULTS = dict(rate_429=0.1, retry_after_s=0.25, rate_500=0.1, rate_timeout=0.08, hang_s=60.0,
              rate_malformed=0.1, rate_disconnect=0.1)
# Fast retries: tiny backoff, a short per-request timeout for the hung requests.
FAST = dict(max_retries=8, retry_base_delay=0.005, retry_max_delay=0.5, timeout=2.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("faults"))


def evaluate(url: str, data: Path, work: Path, **over: Any) -> Path:
    cfg = {"model": MODEL, "api_url": url, "datasets": ["general_vqa"],
           "dataset_args": dataset_args(data), "work_dir": str(work), "no_timestamp": True,
           "eval_batch_size": 8, **FAST, **over}
    run_task(cfg)
    return work


def serve(data: Path, responders: tuple = (), **behaviour: Any) -> SimulatorServer:
    server = SimulatorServer(samples_of(data), SimBehaviour(accuracy=ACCURACY, seed=SEED, **behaviour),
                             responders=responders)
    server.start()
    return server


@pytest.fixture(scope="module")
def clean_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    server = serve(data)
    try:
        return evaluate(server.base_url, data, tmp_path_factory.mktemp("clean") / "run")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ids(data: Path) -> set[str]:
    return {s.id for s in samples_of(data)}


@pytest.mark.slow
def test_faulty_run_matches_the_fault_free_run(data: Path, clean_run: Path, ids: set[str],
                                                tmp_path: Path) -> None:
    server = serve(data, max_faults_per_key=3, **FAULTS)
    try:
        run_dir = evaluate(server.base_url, data, tmp_path / "run", debug=True)
        stats, records = server.stats(), server.requests()
    finally:
        server.stop()
    # The simulator really was hostile: >= 30% of requests faulty, every kind several times.
    faulty = sum(stats["by_fault"].values())
    assert faulty / stats["requests"] >= 0.3, stats
    assert {k for k, v in stats["by_fault"].items() if v >= 2} == {
        "429", "500", "timeout", "malformed", "disconnect"}, stats
    # Every sample ends scored exactly once, and the numbers equal a fault-free run's.
    assert_exactly_once(run_dir, ids)
    assert report_numbers(run_dir) == report_numbers(clean_run)
    attempts = {r["sample_id"]: r["attempts"] for r in rows(run_dir, "predictions")}
    per_key: dict[str, int] = {}
    for r in records:
        if r["key"]:
            per_key[r["key"]] = max(per_key.get(r["key"], 0), r["attempt"])
    assert sum(attempts.values()) == sum(per_key.values())  # attempts are counted truly
    assert max(attempts.values()) >= 3
    _assert_retry_after_honoured(run_dir)


def _assert_retry_after_honoured(run_dir: Path) -> None:
    """The debug log's retry lines: after a 429 the wait is the server's Retry-After (0.25 s),
    after any other fault the (much shorter) exponential backoff."""
    log = (run_dir / "logs" / "eval_log.log").read_text()
    waits = re.findall(r"retry \d+ in ([\d.]+)s after (HTTP 429|HTTP 5\d\d|request timed|"
                       r"connection error|malformed JSON)", log)
    after_429 = [float(w) for w, why in waits if why == "HTTP 429"]
    others = [float(w) for w, why in waits if why != "HTTP 429"]
    assert after_429 and others
    assert min(after_429) >= 0.25
    assert max(others) < 0.25


def _refuse_some(req: SimRequest) -> SimReply | None:
    """A content filter that blanks the answers to questions 7, 17 and 27."""
    if any(re.search(r"\] Which animal is number (7|17|27) ", t) for t in req.texts):
        return SimReply("", finish_reason="content_filter")
    return None


def test_refusals_and_non_retryable_4xx_fail_their_samples(data: Path, ids: set[str],
                                                           tmp_path: Path) -> None:
    # Image records (every third) exceed a 200-token context: a 400, never retried.
    server = serve(data, (_refuse_some,), max_context_tokens=200)
    try:
        run_dir = evaluate(server.base_url, data, tmp_path / "run", ignore_errors=True)
        requests = server.requests()
    finally:
        server.stop()
    preds = {r["sample_id"]: r for r in rows(run_dir, "predictions")}
    assert set(preds) == ids
    too_long = {i for i in ids if int(i[-3:]) % 3 == 0}
    filtered = {i for i in ids if i[-3:] in ("007", "017", "027")} - too_long
    for sid, row in preds.items():
        if sid in too_long:
            assert (row["status"], row["error_kind"], row["attempts"]) == ("error", "context_length", 1)
            assert row["error"].startswith("HTTP 400: This model's maximum context length is 200")
        elif sid in filtered:
            assert (row["status"], row["error_kind"]) == ("error", "content_filter")
            assert row["error"] == "the reply was blocked by a content filter"
        else:
            assert row["status"] == "ok"
    assert len(requests) == len(ids)  # nothing non-retryable was asked twice
    summary = report_numbers(run_dir)["summary"]
    assert summary == {"requested": len(ids), "succeeded": len(ids) - len(too_long | filtered),
                       "errored": len(too_long | filtered), "skipped": 0}
    report = (run_dir / "reports" / MODEL / "general_vqa.groundscope.json").read_text()
    assert '"context_length"' in report and '"content_filter"' in report


def test_first_failure_stops_the_run_and_resume_completes(data: Path, clean_run: Path,
                                                         ids: set[str], tmp_path: Path) -> None:
    """Without ignore_errors (EvalScope's default) the first sample that fails for good stops
    the run; everything finished is kept and a resume completes it."""
    server = serve(data, rate_500=0.3)
    run_dir = tmp_path / "run"
    try:
        with pytest.raises(ErrorBudgetExceeded) as info:
            evaluate(server.base_url, data, run_dir, max_retries=1)
    finally:
        server.stop()
    message = str(info.value)
    assert message.startswith("run stopped early: a sample failed: HTTP 500")  # and why
    assert "(pass --ignore-errors to record failures and go on)" in message
    assert f"Finished work is kept in {run_dir}; resume with --use-cache {run_dir}" in message
    before = rows(run_dir, "predictions")
    assert 0 < len(before) < len(ids) and any(r["status"] == "error" for r in before)
    assert all(r["attempts"] == 2 for r in before if r["status"] == "error")  # retry budget
    server = serve(data)
    try:
        evaluate(server.base_url, data, tmp_path / "unused", use_cache=str(run_dir))
        asked = server.requests()
    finally:
        server.stop()
    finished = {r["sample_id"] for r in before if r["status"] == "ok"}
    assert len(asked) == len(ids) - len(finished)
    assert_exactly_once(run_dir, ids)
    assert report_numbers(run_dir) == report_numbers(clean_run)


def test_ignore_errors_records_failures_and_goes_on(data: Path, ids: set[str], tmp_path: Path) -> None:
    server = serve(data, rate_500=0.3)
    try:
        run_dir = evaluate(server.base_url, data, tmp_path / "run", max_retries=0,
                           ignore_errors=True)
    finally:
        server.stop()
    preds = rows(run_dir, "predictions")
    failed = [r for r in preds if r["status"] == "error"]
    assert len(preds) == len(ids) and failed
    assert all(r["error"].startswith("HTTP 500: The server had an error") for r in failed)
    report = report_numbers(run_dir)
    assert report["summary"]["errored"] == len(failed)
    rouge = next(m for m in report["metrics"] if m["metric"] == "rouge-l-r" and m["subset"] == "OVERALL")
    assert rouge["num"] == len(ids) - len(failed)  # failures are excluded, never scored 0
    assert rouge["excluded"] == len(failed)


def test_error_rate_budget_stops_early(data: Path, ids: set[str], tmp_path: Path) -> None:
    server = serve(data, rate_500=0.3)
    run_dir = tmp_path / "run"
    try:
        with pytest.raises(ErrorBudgetExceeded, match=r"crossed max_error_rate 10\.0%") as info:
            evaluate(server.base_url, data, run_dir, max_retries=0, ignore_errors=True,
                     max_error_rate=0.1, eval_batch_size=1)
    finally:
        server.stop()
    assert f"resume with --use-cache {run_dir}" in str(info.value)
    preds = rows(run_dir, "predictions")
    assert 20 <= len(preds) < len(ids)  # 20 samples of warm-up, then the budget applies
    assert len({r["sample_id"] for r in preds}) == len(preds)
