"""`merge` streams the shards' rows: its peak memory does not grow with the rows (it held
whole shard files, about 10x their size). Measured on the merge process alone (its VmHWM)."""

from __future__ import annotations

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
    # the peak of the merge's own address space (VmHWM): ru_maxrss of a child also counts
    # the copy of this (xdist worker) process it was forked from, before exec
    code = ("from groundscope.cli import entry\ntry:\n    rc = entry()\nexcept SystemExit as e:\n"
            "    rc = e.code\nassert not rc, rc\nprint(open('/proc/self/status').read())")
    proc = subprocess.run([sys.executable, "-c", code, "merge", *map(str, shards),
                           "--work-dir", str(tmp_path / "merged")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (hwm,) = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("VmHWM:")]
    peak_mb = int(hwm) / 1024
    assert peak_mb < LIMIT_MB, f"merge peaked at {peak_mb:.0f} MB"
    (run,) = (tmp_path / "merged").iterdir()
    lines = sum(1 for f in (run / "predictions").rglob("*.jsonl") for _ in f.open())
    assert lines == 80_000
