"""An endpoint nobody should trust: real runs against the simulator's hostile modes on loopback
(``simulator/faults.py``). Keys echoed back in any form, credentials in URLs, redirects to
another server, broken 200 bodies, huge, gzip-bombed, endless and lying replies: each fails
its sample (or is hidden) and the run goes on; nothing secret is written anywhere."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from groundscope import run_task
from groundscope.errors import NothingEvaluated
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.simulator.faults import MALFORMED_BODIES, echo_forms
from groundscope.simulator.judge import JudgeResponder
from reliability_support import (
    MODEL,
    dataset_args,
    eval_args,
    rows,
    run_cli,
    samples_of,
    write_dataset,
)

MODEL_KEY = "sk-model-SECRET-7f3a9c1e5b2d4680aa"
JUDGE_KEY = "sk-judge-SECRET-0b1c2d3e4f5a6978bb"
URL_PASSWORD = "pw-url-SECRET-19c7e3b5a2d4f6081c"
QUERY_KEY = "qk-query-SECRET-5e2a8c4f6b1d3907ee"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("untrusted"), per_subset=3)


def serve(data: Path | None = None, responders: tuple = (), **behaviour: Any) -> SimulatorServer:
    server = SimulatorServer(samples_of(data) if data else (), SimBehaviour(**behaviour),
                             responders=responders)
    server.start()
    return server


def _views(raw: bytes) -> list[str]:
    """A file's text as stored, HTML-unescaped, and with JSON's doubled backslashes undone."""
    text = raw.decode("utf-8", "replace")
    return [text, html.unescape(text), text.replace("\\\\", "\\")]


def assert_no_secret(root: Path | None, *texts: str,
                     secrets: tuple[str, ...] = (MODEL_KEY, JUDGE_KEY)) -> None:
    """No secret, in any form the simulator echoes it (cased, base64, URL-encoded, escaped,
    hex, cut), in any file under ``root`` (log, predictions, reviews, caches, report.html,
    config.json) nor in ``texts`` (stdout, stderr)."""
    files = [p for p in root.rglob("*") if p.is_file()] if root is not None else []
    assert files or root is None
    views = [v for t in texts for v in _views(t.encode())]
    views += [v for p in files for v in _views(p.read_bytes())]
    for secret in secrets:
        forms = [f for f in echo_forms(secret) if not f.startswith("Bearer ")]
        for view in views:
            assert secret.lower() not in view.lower()
            for form in forms:
                assert form.strip(".\u2026") not in view, form


def _judge(url: str, key: str = "$GS_JUDGE_KEY") -> str:
    return json.dumps({"strategy": "llm", "models": {"model_id": "judge-1", "api_url": url,
                                                     "api_key": key}})


def _preds(run: Path) -> list[dict[str, Any]]:
    return rows(run, "predictions")


# ------------------------------------------------------------------ keys


@pytest.mark.parametrize("echo", ["error", "reply"])
def test_a_key_echoed_in_any_form_is_written_nowhere(data: Path, tmp_path: Path, echo: str) -> None:
    """The model's server echoes its key (in a 401 body, or in the answer, its reasoning and
    its model name), the judge's server echoes the judge key (read from $GS_JUDGE_KEY) in its
    verdicts: every form is hidden in outputs, caches, the log, report.html and the terminal."""
    model = serve(data, echo_key=echo)
    judge = serve(responders=(JudgeResponder(),), echo_key="reply")
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(model.base_url, data, run, "--api-key", MODEL_KEY, "--debug",
                                 "--ignore-errors", "--judge", _judge(judge.base_url)),
                       cwd=tmp_path, GS_JUDGE_KEY=JUDGE_KEY)
    finally:
        model.stop()
        judge.stop()
    assert proc.returncode == (1 if echo == "error" else 0), proc.stderr  # 1: nothing evaluated
    preds = _preds(run)
    assert len(preds) == 6
    if echo == "error":
        assert all(p["error_kind"] == "http_401" for p in preds)
        assert all(p["error"].startswith("HTTP 401: Incorrect API key provided: ***.") for p in preds)
    else:
        assert all(p["status"] == "ok" and "| *** | ***" in p["prediction"] for p in preds)
        assert all(p["reasoning"].startswith("you sent | ***") for p in preds)
        assert "you sent | ***" in (run / "cache" / "judge.jsonl").read_text()  # the judge's echo
    assert_no_secret(tmp_path, proc.stdout, proc.stderr)


def test_url_credentials_are_basic_auth_and_never_stored(data: Path, tmp_path: Path) -> None:
    """``http://user:PASSWORD@host/v1?api_key=KEY``: the user-info is sent as Basic auth, the
    query as given; config.json, report.html, the log and the terminal show the URL without
    user-info and with ``api_key=***``. The same for a judge's URL."""
    model = serve(data, echo_key="reply")
    judge = serve(responders=(JudgeResponder(),), echo_key="reply")
    try:
        run = tmp_path / "run"
        url = f"http://user:{URL_PASSWORD}@{model.base_url[7:]}?api_key={QUERY_KEY}"
        judge_url = f"http://judge:{URL_PASSWORD}@{judge.base_url[7:]}"
        proc = run_cli(eval_args(url, data, run, "--debug", "--judge",
                                 _judge(judge_url, key="EMPTY")), cwd=tmp_path)
        records = model.requests() + judge.requests()
    finally:
        model.stop()
        judge.stop()
    assert proc.returncode == 0, proc.stderr
    basic = [f"Basic {base64.b64encode(f'{u}:{URL_PASSWORD}'.encode()).decode()}"
             for u in ("user", "judge")]
    digests = {hashlib.sha256(b.encode()).hexdigest()[:16] for b in basic}
    assert {r["auth_sha256"] for r in records if r["path"].endswith("/completions")} == digests
    saved = json.loads((run / "config.json").read_text())
    assert saved["api_url"] == f"{model.base_url}?api_key=***"
    assert saved["judge"]["models"][0]["api_url"] == judge.base_url
    assert "api_key=***" in (run / "report.html").read_text()
    assert_no_secret(tmp_path, proc.stdout, proc.stderr, secrets=(URL_PASSWORD, QUERY_KEY))


CORPUS = Path(__file__).parent / "untrusted" / "client"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_url_credentials_with_an_api_key_are_refused(name: str, data: Path, tmp_path: Path) -> None:
    """Two credentials for one Authorization header (the model's or a judge's): one line,
    exit 2, before any request or run directory, the secrets not quoted."""
    proc = run_cli(["eval", "--config", str(CORPUS / name), "--work-dir", str(tmp_path / "w"),
                    "--dataset-args", json.dumps(dataset_args(data))], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [EXPECTED[name]]
    assert not (tmp_path / "w").exists()
    assert_no_secret(None, proc.stdout, proc.stderr, secrets=(URL_PASSWORD, MODEL_KEY))


# ------------------------------------------------------------------ redirects


@pytest.mark.parametrize("who", ["model", "judge"])
def test_a_redirect_to_another_server_is_not_followed(data: Path, tmp_path: Path, who: str) -> None:
    """A 307 to a second loopback server: that server receives nothing; each request fails
    as ``redirect`` naming where it pointed (query secrets hidden), logged once."""
    target = serve(data)
    location = f"{target.base_url}/chat/completions?token={QUERY_KEY}"
    hostile = serve(data, responders=(JudgeResponder(),), redirect_to=location)
    honest = serve(data, responders=(JudgeResponder(),))
    model, judge = (hostile, honest) if who == "model" else (honest, hostile)
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(model.base_url, data, run, "--ignore-errors", "--judge",
                                 _judge(judge.base_url, key=MODEL_KEY), "--api-key", MODEL_KEY),
                       cwd=tmp_path)
        hostile_records, target_records = hostile.requests(), target.requests()
    finally:
        for server in (target, hostile, honest):
            server.stop()
    # a model whose every request failed evaluated nothing (exit 1); a failed judge does not
    assert proc.returncode == (1 if who == "model" else 0), proc.stderr
    assert target_records == []
    assert {r["status"] for r in hostile_records} == {307}
    expected = f"HTTP 307: redirect to {target.base_url}/chat/completions?token=*** not followed"
    if who == "model":
        assert [(p["error_kind"], p["error"], p["attempts"]) for p in _preds(run)] == [
            ("redirect", expected, 1)] * 6
    else:
        reviews = "".join(p.read_text() for p in (run / "reviews").rglob("*.jsonl"))
        assert f"redirect: {expected}" in reviews
    assert proc.stderr.count("redirecting to") == 1
    assert_no_secret(tmp_path, proc.stdout, proc.stderr, secrets=(QUERY_KEY,))


# ------------------------------------------------------------------ malformed 200 bodies


def test_every_malformed_body_fails_its_sample_and_the_run_goes_on(tmp_path: Path) -> None:
    """One sample per kind of broken 200 body: each is recorded as ``malformed_response``,
    the run finishes (exit 0 with --ignore-errors), no traceback."""
    data = write_dataset(tmp_path, per_subset=(len(MALFORMED_BODIES) + 1) // 2)
    server = serve(data, rate_malformed=1.0, malformed_body="each")
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(server.base_url, data, run, "--ignore-errors", "--max-retries",
                                 "0"), cwd=tmp_path)
        kinds = [r["malformed"] for r in server.requests()]
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stderr  # 1: every request failed, nothing was evaluated
    assert "Traceback" not in proc.stderr
    assert set(kinds) == set(MALFORMED_BODIES)
    preds = _preds(run)
    assert len(preds) == len(kinds) >= len(MALFORMED_BODIES)
    assert {p["error_kind"] for p in preds} == {"malformed_response"}
    assert all(p["error"].startswith("malformed response: ") for p in preds)
    report = json.loads((run / "reports" / MODEL / "general_vqa.groundscope.json").read_text())
    assert report["summary"]["errors_by_kind"] == {"malformed_response": len(preds)}


@pytest.mark.slow
def test_a_malformed_body_is_retried_and_stops_a_strict_run_cleanly(data: Path, tmp_path: Path) -> None:
    """``malformed_response`` is retryable: the second attempt succeeds. Without
    --ignore-errors a sample that stays malformed stops the run with exit 1, no traceback."""
    flaky = serve(data, rate_malformed=1.0, malformed_body="usage_string", max_faults_per_key=1)
    broken = serve(data, rate_malformed=1.0, malformed_body="message_string")
    try:
        ok = run_cli(eval_args(flaky.base_url, data, tmp_path / "ok", "--retry-base-delay", "0"),
                     cwd=tmp_path)
        stopped = run_cli(eval_args(broken.base_url, data, tmp_path / "stopped", "--max-retries",
                                    "1", "--retry-base-delay", "0"), cwd=tmp_path)
    finally:
        flaky.stop()
        broken.stop()
    assert ok.returncode == 0, ok.stderr
    assert [(p["status"], p["attempts"]) for p in _preds(tmp_path / "ok")] == [("ok", 2)] * 6
    assert stopped.returncode == 1, stopped.stderr
    assert "Traceback" not in stopped.stderr and "run stopped early" in stopped.stderr


def test_a_judge_sending_malformed_bodies_is_judge_failed(data: Path, tmp_path: Path) -> None:
    """The judge path (CachedChat) behaves the same: a broken judge reply is a failed vote,
    recorded as judge_failed, never a crash."""
    model = serve(data)
    judge = serve(rate_malformed=1.0, malformed_body="each")
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(model.base_url, data, run, "--max-retries", "0", "--judge",
                                 _judge(judge.base_url, key="EMPTY")), cwd=tmp_path)
    finally:
        model.stop()
        judge.stop()
    assert proc.returncode == 0, proc.stderr
    judged = [r for r in rows(run, "reviews") if r["scorer"] == "accuracy"]
    assert len(judged) == 6
    assert all(r["status"] == "judge_failed" for r in judged)
    assert all("malformed_response: malformed response: " in r["detail"]["votes"][0]["error"]
               for r in judged)


# ------------------------------------------------------------------ reply size


def test_a_gzip_bomb_is_cut_at_the_cap_in_small_memory(data: Path, tmp_path: Path) -> None:
    """A 64 MiB gzip bomb (~64 KB on the wire) per answer: reading stops just past the
    4 MiB default cap, the sample fails as ``response_too_large`` (not retried) and the
    process's traced memory peak stays far below one decoded reply."""
    server = serve(data, reply_bytes=64 * MIB, reply_gzip=True)
    run = tmp_path / "run"
    try:
        tracemalloc.start()
        try:
            with pytest.raises(NothingEvaluated):  # every reply was too large
                run_task({"model": MODEL, "api_url": server.base_url, "datasets": ["general_vqa"],
                          "dataset_args": dataset_args(data), "work_dir": str(run),
                          "no_timestamp": True, "ignore_errors": True, "eval_batch_size": 2})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        server.stop()
    preds = _preds(run)
    assert [(p["error_kind"], p["attempts"]) for p in preds] == [("response_too_large", 1)] * 6
    read = [int(p["error"].split("stopped reading after ")[1].split()[0]) for p in preds]
    assert all(4 * MIB < n <= 4 * MIB + 256 * 1024 for n in read), read
    assert peak < 48 * MIB, peak
    assert sum(p.stat().st_size for p in run.rglob("*.jsonl")) < MIB


@pytest.mark.parametrize("reply", [
    {"reply_bytes": 20 * MIB},                          # Content-Length over the cap
    {"reply_bytes": 48 * MIB, "reply_chunked": True},   # no length: cut while reading
    {"declared_length": 10**12},                        # a lying Content-Length
])
def test_oversized_replies_fail_as_response_too_large(data: Path, tmp_path: Path,
                                                      reply: dict[str, Any]) -> None:
    server = serve(data, **reply)
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(server.base_url, data, run, "--ignore-errors"), cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stderr  # 1: every request failed, nothing was evaluated
    preds = _preds(run)
    assert [(p["error_kind"], p["attempts"]) for p in preds] == [("response_too_large", 1)] * 6
    assert sum(p.stat().st_size for p in run.rglob("*")) < MIB


def test_oversized_headers_are_a_malformed_response(data: Path, tmp_path: Path) -> None:
    """A 100 KB header line: refused by the header limits, the sample fails as
    ``malformed_response`` (not a connection error), the run goes on."""
    server = serve(data, header_bytes=100_000)
    try:
        run = tmp_path / "run"
        proc = run_cli(eval_args(server.base_url, data, run, "--ignore-errors", "--max-retries",
                                 "1", "--retry-base-delay", "0"), cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stderr  # 1: every request failed, nothing was evaluated
    preds = _preds(run)
    assert [(p["error_kind"], p["attempts"]) for p in preds] == [("malformed_response", 2)] * 6
    assert all("invalid HTTP response head" in p["error"] for p in preds)


@pytest.mark.slow
def test_max_response_bytes_is_a_setting_for_model_and_judges(data: Path, tmp_path: Path) -> None:
    """``--max-response-bytes``: 2 MiB answers pass the default cap and fail under a 1 MiB
    cap, for the model and for a judge alike."""
    big = serve(data, responders=(JudgeResponder(),), reply_bytes=2 * MIB)
    honest = serve(data)
    try:
        default = run_cli(eval_args(big.base_url, data, tmp_path / "default"), cwd=tmp_path)
        capped = run_cli(eval_args(big.base_url, data, tmp_path / "capped", "--ignore-errors",
                                   "--max-response-bytes", str(MIB)), cwd=tmp_path)
        judged = run_cli(eval_args(honest.base_url, data, tmp_path / "judged",
                                   "--max-response-bytes", str(MIB), "--judge",
                                   _judge(big.base_url, key="EMPTY")), cwd=tmp_path)
    finally:
        big.stop()
        honest.stop()
    assert default.returncode == 0, default.stderr
    assert {p["status"] for p in _preds(tmp_path / "default")} == {"ok"}
    assert capped.returncode == 1, capped.stderr  # 1: every request failed, nothing was evaluated
    assert {p["error_kind"] for p in _preds(tmp_path / "capped")} == {"response_too_large"}
    assert json.loads((tmp_path / "capped" / "config.json").read_text())["max_response_bytes"] == MIB
    assert judged.returncode == 0, judged.stderr
    votes = [r["detail"]["votes"][0] for r in rows(tmp_path / "judged", "reviews")
             if r["scorer"] == "accuracy"]
    assert len(votes) == 6 and all(v["error"].startswith("response_too_large") for v in votes)


# ------------------------------------------------------------------ groundscope simulate


@pytest.mark.slow
def test_the_hostile_modes_are_simulate_flags(data: Path, tmp_path: Path) -> None:
    """``groundscope simulate --echo-key reply --malformed-body each --rate-malformed 0.5``
    in its own process: a run against it hides the echoed key and records the broken bodies
    as malformed_response. A bad flag value is one line, exit 2."""
    bad = run_cli(["simulate", "--datasets", "general_vqa", "--malformed-body", "bogus"],
                  cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("groundscope: error: simulate: malformed_body must be 'each' or")
    proc = subprocess.Popen(
        [sys.executable, "-m", "groundscope", "simulate", "--port", "0", "--datasets",
         "general_vqa", "--dataset-args", json.dumps(dataset_args(data)), "--echo-key",
         "reply", "--malformed-body", "each", "--rate-malformed", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]  # "groundscope simulator listening on URL"
        assert url.startswith("http://127.0.0.1:")
        run = tmp_path / "run"
        result = run_cli(eval_args(url, data, run, "--api-key", MODEL_KEY, "--ignore-errors",
                                   "--max-retries", "0"), cwd=tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    preds = _preds(run)
    assert {p["error_kind"] for p in preds} <= {None, "malformed_response"}
    assert any(p["status"] == "ok" and "| *** | ***" in p["prediction"] for p in preds)
    assert_no_secret(run, result.stdout, result.stderr)
