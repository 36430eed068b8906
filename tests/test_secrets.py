"""API keys never leave the Authorization header: not into any file of a run directory, the
log, stdout/stderr or an exception message, also when an endpoint rejects the key with a
401 that quotes it back (some do), and for the judge's key as well."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from groundscope.client.chat import ChatClient
from groundscope.client.retry import NO_RETRY
from groundscope.errors import ResponseError
from groundscope.simulator import JudgeResponder, SimBehaviour, SimulatorServer
from groundscope.simulator.wire import error_response
from groundscope.types import Message
from reliability_support import MODEL, eval_args, run_cli, samples_of, write_dataset

MODEL_KEY = "sk-model-SECRET-7f3a9c1e5b2d4680aa"
JUDGE_KEY = "sk-judge-SECRET-0b1c2d3e4f5a6978bb"
SECRETS = (MODEL_KEY, JUDGE_KEY)


class RejectingServer(SimulatorServer):
    """Answers every chat request with a 401 that quotes the key and the header it got."""

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        self._record(request, 401, key=None, attempt=0, fault=None)
        return error_response(401, f"Incorrect API key provided: {auth.removeprefix('Bearer ')}. "
                                   f"You sent 'Authorization: {auth}'.", "invalid_request_error",
                              "invalid_api_key")


def _sent_as_bearer(records: list[dict], key: str) -> bool:
    digest = hashlib.sha256(f"Bearer {key}".encode()).hexdigest()[:16]
    return any(r["auth_sha256"] == digest for r in records)


def _assert_nowhere(root: Path, *texts: str) -> None:
    """No secret in any file under ``root`` nor in the captured texts."""
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for secret in SECRETS:
        for text in texts:
            assert secret not in text
        for path in files:
            assert secret.encode() not in path.read_bytes(), path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("secrets"), per_subset=6)


@pytest.fixture(scope="module")
def sim(data: Path):
    server = SimulatorServer(samples_of(data), SimBehaviour(accuracy=0.7),
                             responders=[JudgeResponder()])
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rejecting():
    server = RejectingServer()
    server.start()
    yield server
    server.stop()


def _judge(url: str) -> str:
    return json.dumps({"strategy": "llm", "models": {"model_id": "judge-1", "api_url": url,
                                                     "api_key": "$GS_JUDGE_KEY"}})


def _run(data: Path, url: str, work: Path, *extra: str):
    # The model key on the command line itself, the judge key from the environment.
    return run_cli(eval_args(url, data, work, "--api-key", MODEL_KEY, "--debug", *extra),
                   cwd=work.parent, GS_JUDGE_KEY=JUDGE_KEY)


def test_a_judged_run_writes_no_key(data: Path, sim: SimulatorServer, tmp_path: Path) -> None:
    sim.reset()
    proc = _run(data, sim.base_url, tmp_path / "run", "--judge", _judge(sim.base_url))
    assert proc.returncode == 0, proc.stderr
    records = sim.requests()
    assert _sent_as_bearer(records, MODEL_KEY) and _sent_as_bearer(records, JUDGE_KEY)
    assert (tmp_path / "run" / "cache").is_dir()  # the judge's reply cache is checked too
    _assert_nowhere(tmp_path, proc.stdout, proc.stderr)


def test_a_401_that_quotes_the_key_is_scrubbed(data: Path, rejecting: SimulatorServer,
                                               tmp_path: Path) -> None:
    proc = _run(data, rejecting.base_url, tmp_path / "run", "--ignore-errors")
    assert proc.returncode == 1, proc.stderr  # every request failed: nothing was evaluated
    assert "nothing was evaluated: all 12 requests failed" in proc.stderr.splitlines()[-1]
    preds = [json.loads(line) for p in (tmp_path / "run" / "predictions" / MODEL).glob("*.jsonl")
             for line in p.read_text().splitlines()]
    assert preds and all(p["status"] == "error" and p["error_kind"] == "http_401" for p in preds)
    assert preds[0]["error"].startswith("HTTP 401: Incorrect API key provided: ***.")
    assert "Authorization: Bearer ***" in preds[0]["error"]
    assert _sent_as_bearer(rejecting.requests(), MODEL_KEY)
    _assert_nowhere(tmp_path, proc.stdout, proc.stderr)


def test_a_run_stopped_by_a_401_says_nothing_secret(data: Path, rejecting: SimulatorServer,
                                                    tmp_path: Path) -> None:
    proc = _run(data, rejecting.base_url, tmp_path / "run")
    assert proc.returncode == 1
    assert "run stopped early: a sample failed" in proc.stderr
    _assert_nowhere(tmp_path, proc.stdout, proc.stderr)


def test_a_judge_rejecting_its_key_is_scrubbed(data: Path, sim: SimulatorServer,
                                               rejecting: SimulatorServer, tmp_path: Path) -> None:
    proc = _run(data, sim.base_url, tmp_path / "run", "--judge", _judge(rejecting.base_url))
    assert proc.returncode == 0, proc.stderr
    assert _sent_as_bearer(rejecting.requests(), JUDGE_KEY)
    reviews = "".join(p.read_text() for p in (tmp_path / "run" / "reviews").rglob("*.jsonl"))
    assert "judge_failed" in reviews and "***" in reviews
    _assert_nowhere(tmp_path, proc.stdout, proc.stderr)


async def test_client_exceptions_never_quote_the_key(rejecting: SimulatorServer) -> None:
    async with ChatClient(rejecting.base_url, "m", api_key=MODEL_KEY, retry=NO_RETRY) as client:
        with pytest.raises(ResponseError) as info:
            await client.complete((Message("user", "hello"),))
    exc = info.value
    assert exc.status == 401 and "Incorrect API key provided: ***" in str(exc)
    for text in (str(exc), repr(exc), str(exc.args), repr(client)):
        assert MODEL_KEY not in text


def test_a_judge_key_from_the_environment_is_saved_by_name(data: Path, sim: SimulatorServer,
                                                           tmp_path: Path) -> None:
    """config.json keeps ``$GS_JUDGE_KEY`` (a name, no secret), so ``groundscope score`` on a
    judge-cache miss finds the key again where the variable is set, and goes on without it
    where it is not."""
    run = tmp_path / "run"
    proc = _run(data, sim.base_url, run, "--judge", _judge(sim.base_url))
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((run / "config.json").read_text())
    assert saved["judge"]["models"][0]["api_key"] == "$GS_JUDGE_KEY"
    assert saved["api_key"] == "***"  # given as a literal: hidden
    shutil.rmtree(run / "cache")  # every judgement must be asked again
    sim.reset()
    proc = run_cli(["score", str(run), "--judge-key-env", "GS_JUDGE_KEY"], cwd=tmp_path,
                   GS_JUDGE_KEY=JUDGE_KEY)
    assert proc.returncode == 0, proc.stderr
    assert sim.requests() and _sent_as_bearer(sim.requests(), JUDGE_KEY)
    _assert_nowhere(tmp_path, proc.stdout, proc.stderr)
    shutil.rmtree(run / "cache")
    sim.reset()
    env = {k: v for k, v in os.environ.items() if k != "GS_JUDGE_KEY"}
    proc = subprocess.run([sys.executable, "-m", "groundscope", "score", str(run)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sim.requests() and not _sent_as_bearer(sim.requests(), JUDGE_KEY)
