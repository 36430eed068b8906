"""The seed guide's Python examples, with ``evalscope`` replaced by ``groundscope``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_support import EXAMPLES, dataset_samples
from groundscope.simulator import SimBehaviour, SimulatorServer

ARGS = {"general_vqa": {"local_path": "examples/vqa", "subset_list": ["example_openai"]}}


def test_general_vqa_python_example(tmp_path: Path, monkeypatch) -> None:
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


def test_constants_import_path() -> None:
    from groundscope.constants import EvalType

    assert EvalType.OPENAI_API == "openai_api" and EvalType.MOCK == "mock"
