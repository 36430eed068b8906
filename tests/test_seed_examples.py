"""The seed guide's Python examples, with ``evalscope`` replaced by ``groundscope``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_support import EXAMPLES, dataset_samples
from groundscope.simulator import SimBehaviour, SimulatorServer

ARGS = {"general_vqa": {"local_path": "examples/vqa", "subset_list": ["example_openai"]}}


def test_general_vqa_python_example(tmp_path: Path, monkeypatch, capfd) -> None:
    # the user's folder holds the examples (their ../media is then inside the working directory)
    for name in ("vqa", "media"):
        shutil.copytree(EXAMPLES / name, tmp_path / "examples" / name)
    monkeypatch.chdir(tmp_path)
    with SimulatorServer(dataset_samples("general_vqa", ARGS), SimBehaviour()) as url:
        code = f'''
from groundscope.run import run_task
from groundscope.config import TaskConfig
from os import environ as env

task_cfg = TaskConfig(
    model='qwen-vl-plus',
    api_url={url!r},
    api_key=env.get('DASHSCOPE_API_KEY'),
    eval_type='openai_api',
    datasets=['general_vqa'],
    dataset_args={{
        'general_vqa': {{
            'local_path': {json.dumps(ARGS["general_vqa"]["local_path"])},
            'subset_list': ['example_openai'],
        }}
    }},
    limit=5,
)

result = run_task(task_cfg=task_cfg)
'''
        scope: dict = {}
        exec(compile(code, "seed_example", "exec"), scope)
    report = scope["result"]
    rep = report.dataset("general_vqa")
    assert rep.row("rouge-l-r").num == 5
    assert rep.score("rouge-l-r") == 1.0  # the simulator's oracle at accuracy 1.0
    # As EvalScope's run_task: a dict-like of dataset reports, and the table in the log.
    assert report["general_vqa"] is rep and list(report) == ["general_vqa"]
    err = capfd.readouterr().err
    assert "- groundscope - INFO: report table:" in err
    line = next(x for x in err.splitlines() if "ROUGE ↑ · L · Recall" in x)
    assert [c.strip() for c in line.strip("│").split("│")] == [
        "qwen-vl-plus", "General-VQA", "ROUGE ↑ · L · Recall", "example_openai", "5", "100%"]


def test_general_vmcq_python_example_prints_its_result(tmp_path: Path, monkeypatch,
                                                       capfd) -> None:
    """The seed's VMCQ example ends with ``print(result)``; with EvalScope the log shows the
    table and ``result["general_vmcq"]`` is the dataset's report."""
    for name in ("mcq", "media"):  # the user's folder holds the examples and their ../media
        shutil.copytree(EXAMPLES / name, tmp_path / "examples" / name)
    monkeypatch.chdir(tmp_path)
    args = {"general_vmcq": {"local_path": "examples/mcq", "subset_list": ["example"]}}
    with SimulatorServer(dataset_samples("general_vmcq", args), SimBehaviour()) as url:
        code = f'''
from groundscope.run import run_task
from groundscope.config import TaskConfig
from os import environ as env

task_cfg = TaskConfig(
    model='qwen-vl-plus',
    api_url={url!r},
    api_key=env.get('DASHSCOPE_API_KEY'),
    eval_type='openai_api',
    datasets=['general_vmcq'],
    dataset_args={{
        'general_vmcq': {{
            'local_path': {json.dumps(args["general_vmcq"]["local_path"])},
            'subset_list': ['example'],
        }}
    }},
    limit=10,
)

result = run_task(task_cfg=task_cfg)
print(result)
'''
        scope: dict = {}
        exec(compile(code, "seed_example", "exec"), scope)
    result = scope["result"]
    assert result["general_vmcq"].score("accuracy") == 1.0
    assert result["general_vmcq"].row("accuracy").num == 3
    out, err = capfd.readouterr()
    row = "│ qwen-vl-plus │ General-VMCQ │ Accuracy ↑ │ example  │     3 │ 100%    │"
    assert row in out  # print(result)
    assert row in err and "report table:" in err  # the log, as EvalScope's
    log = next(Path(result.run_dir, "logs").glob("*.log")).read_text()
    assert row in log


def test_constants_import_path() -> None:
    from groundscope.constants import EvalType

    assert EvalType.OPENAI_API == "openai_api" and EvalType.MOCK == "mock"


def test_the_grounding_evaluator_flow_through_anthropic_api(tmp_path: Path) -> None:
    """The second seed's ``MultiModalEvaluator`` asks an Anthropic-style client
    (``client.messages.create`` with base64 image blocks) to extract an answer's claims and to
    verify each against the image. groundscope runs that flow with the model and the grounding
    judge both on ``anthropic_api``, against the simulator: every request is a Messages API
    request, the verification requests carry the image as a base64 block, and the numbers are
    the grounding demo's hand-computed ones (tests/test_grounding_e2e.py)."""
    import yaml

    from groundscope import run_task
    from groundscope.config import SimulatorArgs
    from groundscope.scoring.grounding_prompt import VERIFY_MARKER
    from groundscope.simulator import sim_responders

    cfg = yaml.safe_load((EXAMPLES / "grounding_demo.yaml").read_text())
    args = {"general_vqa": {**cfg["dataset_args"]["general_vqa"],
                            "local_path": str(EXAMPLES / "grounding")}}
    truth = SimulatorArgs(truth=str(EXAMPLES / "grounding" / "truth.json"), seed=0)
    plain = {"general_vqa": {k: v for k, v in args["general_vqa"].items() if k != "metric_list"}}
    server = SimulatorServer(dataset_samples("general_vqa", plain), SimBehaviour(accuracy=0.8),
                             responders=sim_responders(truth), keep_bodies=True)
    with server as url:
        report = run_task({
            "eval_type": "anthropic_api", "api_url": url, "api_key": "sk-ant-seed",
            "model": "groundscope-sim", "datasets": ["general_vqa"], "dataset_args": args,
            "work_dir": str(tmp_path), "no_timestamp": True,
            "judge": {"models": {"model_id": "grounding-judge", "api_url": url,
                                 "eval_type": "anthropic_api"},
                      "grounding": cfg["judge"]["grounding"]}})
    got = {(r.metric, r.subset): r.score for r in report.dataset("general_vqa").metrics}
    assert got[("grounding_claims", "OVERALL")] == pytest.approx(22 / 29)
    assert got[("hallucination", "OVERALL")] == pytest.approx(7 / 29)
    assert got[("hallucinated_answers", "OVERALL")] == pytest.approx(5 / 15)
    assert got[("consistent_correct", "OVERALL")] == pytest.approx(0.5)
    assert {r["path"] for r in server.requests()} == {"/v1/messages"}
    verifications = [b for b in server.bodies() if isinstance(b["messages"][0]["content"], list)
                     and b["messages"][0]["content"][0].get("text", "").startswith(VERIFY_MARKER)]
    assert verifications
    for body in verifications:
        images = [b for b in body["messages"][0]["content"] if b["type"] == "image"]
        assert images and all(b["source"]["type"] == "base64" for b in images)
