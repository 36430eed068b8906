"""The public API is exactly groundscope.__all__; changing it must be deliberate."""

import subprocess
import sys

import groundscope

EXPECTED = {
    "ConfigError", "DatasetArgs", "DatasetError", "DatasetReport", "GroundscopeError",
    "JudgeConfig", "MultiModalEvaluator", "MultiModalMetrics", "RecordError", "Report",
    "TaskConfig", "__version__", "merge_runs", "run_task",
}


def test_all_is_pinned() -> None:
    assert set(groundscope.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    for name in groundscope.__all__:
        assert getattr(groundscope, name) is not None


def test_import_is_light() -> None:
    code = ("import sys, groundscope; heavy = [m for m in ('aiohttp', 'pydantic', 'numpy', "
            "'pyarrow', 'PIL', 'jieba', 'nltk') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_does_not_import_heavy_modules() -> None:
    code = ("import sys\nfrom groundscope.cli import build_parser\nbuild_parser()\n"
            "print([m for m in ('aiohttp', 'pydantic', 'numpy', 'pyarrow', 'PIL', 'jieba', 'nltk')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"



def test_a_run_without_a_judge_imports_no_judge_or_ray_code(tmp_path) -> None:
    """Issue 21: the judge's and Ray's modules load only where a run uses them."""
    import json

    from cli_support import EXAMPLES, dataset_samples
    from groundscope.simulator import SimBehaviour, SimulatorServer

    args = {"general_vqa": {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}}
    code = ("import json, sys\nfrom groundscope import run_task\n"
            "run_task(json.loads(sys.argv[1]))\n"
            "print(sorted({'groundscope.scoring.judge', 'groundscope.report.judge', "
            "'groundscope.scaleout.driver', 'ray'} & set(sys.modules)))")
    sim = SimulatorServer(dataset_samples("general_vqa", args), SimBehaviour(accuracy=1.0))
    sim.start()
    try:
        cfg = {"model": "m", "api_url": sim.base_url, "datasets": ["general_vqa"],
               "dataset_args": args, "media_roots": [str(EXAMPLES / "media")],
               "work_dir": str(tmp_path), "limit": 2}
        out = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], capture_output=True,
                             text=True, check=True, cwd=tmp_path)
    finally:
        sim.stop()
    assert sim.stats()["requests"] == 2
    assert out.stdout.strip().splitlines()[-1] == "[]"
