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
