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
    # merging again into the same folder clears the killed merge's temporary directory
    assert run_cli("merge", *map(str, shards), "--work-dir", str(out), cwd=tmp_path).returncode == 0
    assert not [d for d in os.listdir(out) if d.startswith(".merge-")]


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


def _ended_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_the_next_merge_removes_what_a_killed_merge_left_and_nothing_else(tmp_path: Path) -> None:
    """A merge killed with SIGKILL leaves its hidden temporary directory (rows and all);
    the next merge into the same folder removes it. It leaves alone: one whose merge is
    running (its process alive, its lock held), one not marked unfinished, and a link."""
    shards = real_shards(tmp_path)
    out = tmp_path / "merged"
    out.mkdir()
    dead = _ended_pid()
    stale = out / f".merge-{dead}-20261205_000000"
    (stale / "predictions").mkdir(parents=True)
    (stale / "predictions" / "general_vqa.jsonl").write_text('{"sample_id": "1"}\n')
    (stale / MERGING_FILE).write_text("groundscope merge in progress\n")
    unmarked = out / f".merge-{dead}-20261205_000001"
    unmarked.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / MERGING_FILE).write_text("")
    (out / f".merge-{dead}-20261205_000002").symlink_to(elsewhere)
    running = out / ".merge-placeholder"  # renamed below to its holder's pid
    running.mkdir()
    (running / MERGING_FILE).write_text("groundscope merge in progress\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(running / '.groundscope.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        live = running.rename(out / f".merge-{holder.pid}-20261205_000003")
        report = merge_runs(shards, out)
    finally:
        holder.kill()
        holder.wait()
    assert not stale.exists()
    assert unmarked.is_dir() and live.is_dir() and (elsewhere / MERGING_FILE).exists()
    assert (Path(report.run_dir) / "merge.json").is_file()
