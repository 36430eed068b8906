"""Shared helpers of the tests that run ``groundscope`` as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.runner import iter_samples, plan_dataset
from groundscope.types import Sample

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, cwd: Path, env_extra: Mapping[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """``python -m groundscope ARGS`` in ``cwd``; output captured as text."""
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "groundscope", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def table_rows(stdout: str) -> dict[tuple[str, str], tuple[int, str]]:
    """The terminal table as {(metric label, subset): (num, score text)}."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 6 and cells[0] not in ("Model", ""):
            rows[(cells[2], cells[3])] = (int(cells[4]), cells[5])
    return rows


def dataset_samples(dataset: str, dataset_args: Mapping[str, Any]) -> list[Sample]:
    """The good samples of a dataset, loaded exactly as a run loads them."""
    cfg = load_config({"datasets": [dataset], "dataset_args": dict(dataset_args),
                       "eval_type": "mock"})
    return [s for _, s in iter_samples(cfg, plan_dataset(cfg, dataset), strict=False)
            if not isinstance(s, RecordError)]
