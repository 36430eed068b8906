"""A merge killed with SIGKILL mid-way leaves no directory that reads as a complete run:
the merged run is built in a temporary directory beside its target, marked unfinished, and
renamed into place; its completion marker (merge.json) is written last. `report`, `score`
and `merge` refuse what a killed merge left, in one line (exit 2)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import run_cli
from groundscope import merge_runs
from groundscope.rundir import MERGING_FILE
from merge_support import grow, real_shards


def _rows_written(out: Path) -> bool:
    """Whether some directory under ``out`` (hidden ones too) has merged prediction rows."""
    if not out.is_dir():
        return False
    return any(f.stat().st_size > 0 for d in os.listdir(out)
               for f in (out / d / "predictions").rglob("*.jsonl"))


@pytest.mark.slow
def test_a_merge_killed_midway_leaves_nothing_report_accepts(tmp_path: Path) -> None:
    shards = real_shards(tmp_path)
    for shard in shards:
        grow(shard, 30_000)
    out = tmp_path / "merged"
    proc = subprocess.Popen([sys.executable, "-m", "groundscope", "merge", *map(str, shards),
                             "--work-dir", str(out)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _rows_written(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the merge ended before it could be killed mid-way"
    assert _rows_written(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = [out / d for d in os.listdir(out)]
    assert left
    for d in left:
        for args in (["report", str(d)], ["score", str(d)],
                     ["merge", str(d), "--work-dir", str(tmp_path / "again")]):
            done = run_cli(*args, cwd=tmp_path)
            assert done.returncode == 2, (args, done.stdout[-500:], done.stderr[-500:])
            err = done.stderr.strip()
            assert len(err.splitlines()) == 1 and "unfinished groundscope merge" in err, err


def test_a_finished_merge_has_its_marker_and_no_leftovers(tmp_path: Path) -> None:
    shards = real_shards(tmp_path)
    report = merge_runs(shards, tmp_path / "merged")
    run = Path(report.run_dir)
    assert os.listdir(tmp_path / "merged") == [run.name]  # no temporary directory left
    assert (run / "merge.json").is_file() and not (run / MERGING_FILE).exists()
    assert run_cli("report", str(run), cwd=tmp_path).returncode == 0


def test_report_on_an_interrupted_eval_reads_it_and_says_how_to_resume(tmp_path: Path) -> None:
    shard = real_shards(tmp_path)[0]
    for f in (shard / "reports").rglob("*.json"):
        f.unlink()  # as a run stopped by Ctrl-C leaves it: no reports yet
    done = run_cli("report", str(shard), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the run did not finish" in done.stderr and f"--use-cache {shard}" in done.stderr
