"""groundscope: evaluate multimodal models served over OpenAI-compatible chat APIs.

The public API is exactly ``__all__`` (pinned by a test), the ``groundscope`` command and
the versioned run-directory schema. Everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DatasetArgs",
    "DatasetError",
    "DatasetReport",
    "GroundscopeError",
    "JudgeConfig",
    "MultiModalEvaluator",
    "MultiModalMetrics",
    "RecordError",
    "Report",
    "TaskConfig",
    "__version__",
    "merge_runs",
    "run_task",
]

if TYPE_CHECKING:
    from groundscope.config import DatasetArgs, JudgeConfig, TaskConfig
    from groundscope.errors import ConfigError, DatasetError, GroundscopeError, RecordError
    from groundscope.evaluator import MultiModalEvaluator, MultiModalMetrics
    from groundscope.merge import merge_runs
    from groundscope.report.model import DatasetReport, Report
    from groundscope.run import run_task

_LAZY = {
    "TaskConfig": "groundscope.config",
    "DatasetArgs": "groundscope.config",
    "JudgeConfig": "groundscope.config",
    "ConfigError": "groundscope.errors",
    "DatasetError": "groundscope.errors",
    "GroundscopeError": "groundscope.errors",
    "RecordError": "groundscope.errors",
    "MultiModalEvaluator": "groundscope.evaluator",
    "MultiModalMetrics": "groundscope.evaluator",
    "Report": "groundscope.report.model",
    "DatasetReport": "groundscope.report.model",
    "run_task": "groundscope.run",
    "merge_runs": "groundscope.merge",
}


def __getattr__(name: str) -> Any:
    """Import public names on first use, so ``import groundscope`` stays instant."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'groundscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
