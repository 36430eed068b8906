"""`merge` streams the shards' rows: its peak memory does not grow with the rows (it held
whole shard files, about 10x their size). Measured on the merge process alone (wait4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from merge_support import grow, real_shards

LIMIT_MB = 200  # issue 23.5; before streaming, these 80,000 rows (58 MB) took ~1 GB


@pytest.mark.slow
def test_merge_of_big_shards_stays_under_200_mb(tmp_path: Path) -> None:
    shards = real_shards(tmp_path)
    for shard in shards:
        grow(shard, 40_000)
    proc = subprocess.Popen([sys.executable, "-m", "groundscope", "merge", *map(str, shards),
                             "--work-dir", str(tmp_path / "merged")], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read() if proc.stderr else ""
    peak_mb = usage.ru_maxrss / 1024
    assert peak_mb < LIMIT_MB, f"merge peaked at {peak_mb:.0f} MB"
    (run,) = (tmp_path / "merged").iterdir()
    lines = sum(1 for f in (run / "predictions").rglob("*.jsonl") for _ in f.open())
    assert lines == 80_000
