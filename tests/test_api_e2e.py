"""``--eval-type anthropic_api`` / ``openai_responses_api`` end to end against the simulator,
which serves every API: the evaluated model, every judge (each names its API), a mock run
speaking the chosen API, media the API cannot take, and the config checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXAMPLES, dataset_samples, run_cli
from groundscope import run_task
from groundscope.config import load_config
from groundscope.errors import ConfigError
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.simulator.judge import JudgeResponder

ARGS = {"general_vqa": {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}}
PATHS = {"openai_api": "/v1/chat/completions", "anthropic_api": "/v1/messages",
         "openai_responses_api": "/v1/responses"}


def predictions(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted((run_dir / "predictions").rglob("*.jsonl"))
            for line in p.read_text().splitlines()]


@pytest.mark.parametrize("api", ["anthropic_api", "openai_responses_api"])
def test_the_evaluated_model_through_each_api(api: str, tmp_path: Path) -> None:
    """The oracle recognises every request (same texts and image bytes as over chat): an
    accuracy-1.0 simulator scores 100%; usage and finish reasons come back mapped."""
    server = SimulatorServer(dataset_samples("general_vqa", ARGS), SimBehaviour(accuracy=1.0))
    with server as url:
        report = run_task({"eval_type": api, "api_url": url, "api_key": "sk-e2e", "model": "m",
                           "datasets": ["general_vqa"], "dataset_args": ARGS, "limit": 5,
                           "work_dir": str(tmp_path), "no_timestamp": True})
    rep = report.dataset("general_vqa")  # the first 5 records: text and images
    assert rep.row("rouge-l-r").num == 5 and rep.score("rouge-l-r") == 1.0
    assert {r["path"] for r in server.requests()} == {PATHS[api]}
    preds = predictions(tmp_path)
    assert len(preds) == 5 and all(p["status"] == "ok" for p in preds)
    assert all(p["finish_reason"] == "stop" and p["usage"]["prompt_tokens"] > 0
               and p["usage"]["total_tokens"] == p["usage"]["prompt_tokens"]
               + p["usage"]["completion_tokens"] for p in preds)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["eval_type"] == api


def _audio_dataset(root: Path) -> Path:
    data = root / "data"
    data.mkdir()
    for name in ("dog.jpg", "sample.wav"):
        shutil.copy(EXAMPLES / "media" / name, data / name)
    records = [{"id": "img", "answer": "Dog", "messages": [{"role": "user", "content": [
                   {"type": "text", "text": "What animal is this?"},
                   {"type": "image_url", "image_url": {"url": "dog.jpg"}}]}]},
               {"id": "wav", "answer": "A beep", "messages": [{"role": "user", "content": [
                   {"type": "text", "text": "What do you hear?"},
                   {"type": "input_audio", "input_audio": {"data": "sample.wav",
                                                           "format": "wav"}}]}]}]
    (data / "mixed.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return data


@pytest.mark.parametrize("api", ["openai_api", "anthropic_api", "openai_responses_api"])
def test_a_mock_run_speaks_the_chosen_api(api: str, tmp_path: Path) -> None:
    """``--eval-type mock --sim-api API``: the run talks to its simulator in that API; audio,
    which only the chat API carries, fails its sample as unsupported_media there."""
    data = _audio_dataset(tmp_path)
    args = {"general_vqa": {"local_path": str(data), "subset_list": ["mixed"]}}
    proc = run_cli("eval", "--eval-type", "mock", "--sim-api", api, "--datasets", "general_vqa",
                   "--dataset-args", json.dumps(args), "--work-dir", str(tmp_path / "out"),
                   "--no-timestamp", "--no-progress", "--ignore-errors", "--sim-accuracy", "1",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    preds = {p["sample_id"]: p for p in predictions(tmp_path / "out")}
    assert preds["img"]["status"] == "ok" and preds["img"]["prediction"] == "Dog"
    if api == "openai_api":
        assert preds["wav"]["status"] == "ok"
    else:
        assert preds["wav"]["error_kind"] == "unsupported_media"
        assert "audio input is not accepted" in preds["wav"]["error"]
        assert preds["wav"]["attempts"] == 1  # refused before sending: nothing retried
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["simulator"]["api"] == api


def test_each_judge_names_its_api(tmp_path: Path) -> None:
    """Three judges, one per API, on one simulator: every verdict arrives, each judge's
    requests went to its own route."""
    judge = JudgeResponder()
    model = SimulatorServer(dataset_samples("general_vqa", ARGS), SimBehaviour(accuracy=1.0))
    judges = SimulatorServer(responders=[judge])
    with model as model_url, judges as judge_url:
        entries = [{"model_id": f"judge-{api}", "api_url": judge_url, "api_key": "sk-j",
                    **({"eval_type": api} if api != "openai_api" else {})} for api in PATHS]
        report = run_task({"model": "m", "api_url": model_url, "datasets": ["general_vqa"],
                           "dataset_args": ARGS, "limit": 4, "work_dir": str(tmp_path),
                           "judge": {"strategy": "llm", "models": entries}})
    rep = report.dataset("general_vqa")
    assert rep.row("accuracy").num == 4 and rep.score("accuracy") == 1.0
    by_model: dict[str, set[str]] = {}
    for r in judges.requests():
        by_model.setdefault(r["model"], set()).add(r["path"])
    assert by_model == {f"judge-{api}": {path} for api, path in PATHS.items()}
    assert judge.calls == 12  # 4 samples x 3 judges, all answered


def test_judge_eval_type_is_checked_and_translated() -> None:
    base = {"model": "m", "api_url": "http://127.0.0.1:9/v1", "datasets": ["general_vqa"]}
    with pytest.raises(ConfigError, match=r"judge\.models\[0\]\.eval_type"):
        load_config({**base, "judge": {"models": {"model_id": "j", "api_url": "http://h/v1",
                                                  "eval_type": "anthropic"}}})
    legacy = load_config({**base, "judge_strategy": "llm", "judge_model_args": {
        "model_id": "claude", "api_url": "https://api.anthropic.com", "eval_type": "anthropic_api"}})
    assert legacy.judge is not None and legacy.judge.models[0].eval_type == "anthropic_api"
    service = load_config({**base, "judge": {"models": {"model_id": "j", "api_url": "http://h/v1",
                                                        "eval_type": "service"}}})
    assert service.judge is not None and service.judge.models[0].eval_type == "openai_api"


@pytest.mark.parametrize("api", ["anthropic_api", "openai_responses_api"])
def test_the_new_eval_types_need_an_http_url(api: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"api_url: required for eval_type {api}"):
        load_config({"eval_type": api, "datasets": ["general_vqa"]})
    proc = run_cli("eval", "--eval-type", api, "--api-url", "ftp://h/v1", "--datasets",
                   "general_vqa", "--work-dir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("api_url must be an http(s) URL "
                                                         "(got ftp scheme)")
    assert not any(tmp_path.iterdir())  # refused before a run directory


def test_constants_name_the_new_eval_types() -> None:
    from groundscope.constants import EvalType

    assert EvalType.ANTHROPIC_API == "anthropic_api"
    assert EvalType.OPENAI_RESPONSES_API == "openai_responses_api"
