"""The Ray session of a run as a user meets it: a bad or unreachable ``--ray-address`` is one
line and exit 2 at once, before any run directory; a local Ray that groundscope started
leaves no process and no temp dir behind, however the run ends."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from cli_support import EXAMPLES
from ray_support import RAY_ENV

# a local Ray per module, runs of seconds: CI runs them in its Ray step (-o addopts=-q)
pytestmark = pytest.mark.slow

VQA = ["--eval-type", "mock", "--model", "m", "--datasets", "general_vqa", "--dataset-args",
       '{"general_vqa": {"local_path": "%s"}}' % (EXAMPLES / "vqa")]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


def eval_cli(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **RAY_ENV}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "groundscope", "eval", *VQA, "--work-dir",
                           str(tmp_path / "out"), "--no-timestamp", "--executor", "ray", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("address", ["127.0.0.1:{closed}", "[::1]:{closed}", "ray://127.0.0.1:{closed}",
                                     "http://127.0.0.1:{closed}", "garbage", "auto"])
def test_an_unreachable_ray_address_is_one_line_exit_2_and_no_run_directory(
        address: str, tmp_path: Path) -> None:
    if address == "auto":
        from ray._private.services import find_bootstrap_address, find_gcs_addresses

        if find_gcs_addresses() or find_bootstrap_address(None):
            pytest.skip("a Ray cluster runs on this machine: auto would join it")
    address = address.format(closed=closed_port())
    started = time.monotonic()
    done = eval_cli(tmp_path, "--ray-address", address)  # the timeout: a guard against a hang
    took = time.monotonic() - started
    assert done.returncode == 2, (took, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]  # no Ray connection spam
    assert f"ray_address: cannot join a Ray cluster at {address!r}" in lines[0]
    assert not (tmp_path / "out").exists()  # no (empty) run directory


# ---------------------------------------------------------------- a local Ray's lifetime

KEY_VAR, KEY = "GS_RAY_LIFE_KEY", "sk-ray-life-9d3a61c0e4"


def descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every process below ``pid`` now."""
    import psutil  # Ray's own copy (ray/thirdparty_files), on the path once ray is imported

    out = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            out[child.pid] = " ".join(child.cmdline())
        except psutil.Error:
            continue
    return out


def alive(pids: dict[int, str]) -> dict[int, str]:
    import psutil

    left = {}
    for pid, cmd in pids.items():
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left[pid] = cmd
        except psutil.NoSuchProcess:
            continue
    return left


def naming(text: str) -> dict[int, str]:
    """Every live process on this machine whose command line holds ``text``."""
    import psutil

    out = {}
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or ())
        if text in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            out[proc.pid] = cmd
    return out


def env_holding(pids: dict[int, str], value: str) -> dict[int, str]:
    import psutil

    out = {}
    for pid, cmd in pids.items():
        try:
            if value in psutil.Process(pid).environ().values():
                out[pid] = cmd
        except psutil.Error:
            continue
    return out


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["success", "error", "ctrl-c"])
def test_a_local_ray_started_for_a_run_leaves_no_process_and_no_temp_dir(
        ending: str, tmp_path: Path) -> None:
    """However the run ends (it finishes, it stops on an error, Ctrl-C), every process of the
    local Ray it started is gone and its temp dir removed; no Ray process had the key."""
    import os
    import signal
    import tempfile

    import ray  # noqa: F401  (puts Ray's psutil on the path)

    from ray_support import HoldingSimulator, wait_until
    from reliability_support import eval_args, popen_cli, rows, samples_of, write_dataset

    data = write_dataset(tmp_path / "data", per_subset=4)
    if ending == "error":  # it serves another model: the first request's 404 stops the run
        from groundscope.simulator import SimBehaviour, SimulatorServer

        server = SimulatorServer(behaviour=SimBehaviour(models=("another-model",)))
    else:
        server = HoldingSimulator(samples_of(data), open_for=3 if ending == "ctrl-c" else 10**9)
    url = server.start()
    short_tmp = tempfile.mkdtemp(prefix="gsT")  # the system temp dir of the run, short
    run_dir = tmp_path / ("w" * 40) / "run"  # too long for Ray's sockets: a scratch temp dir
    env = {**RAY_ENV, "TMPDIR": short_tmp, KEY_VAR: KEY}
    proc = popen_cli(eval_args(url, data, run_dir, "--executor", "ray", "--workers", "1",
                               "--api-key", f"${KEY_VAR}", "--eval-batch-size", "2"),
                     cwd=tmp_path, **env)
    seen: dict[int, str] = {}
    try:
        def up() -> bool:  # the worker actor runs: Ray's processes are all there
            seen.update(descendants(proc.pid))
            return proc.poll() is not None or any("SampleWorker" in c for c in seen.values())

        wait_until("the Ray worker", up, timeout=90)
        if ending == "ctrl-c":
            wait_until("requests held", lambda: (len(server.held_now()) == 2
                                                 and len(rows(run_dir, "predictions")) == 3)
                       or proc.poll() is not None, timeout=90)
            seen.update(descendants(proc.pid))
            assert proc.poll() is None, proc.communicate()
            leaked = env_holding(seen, KEY)
            proc.send_signal(signal.SIGINT)
        else:
            leaked = env_holding(seen, KEY)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        server.stop()
    expected = {"success": 0, "error": 1, "ctrl-c": 130}[ending]
    assert proc.returncode == expected, err[-2000:]
    assert any("raylet" in c for c in seen.values()), seen  # a local Ray was started
    assert leaked == {}  # the key is in no Ray process's environment
    assert alive(seen) == {}  # ended before the run returned
    assert naming(short_tmp) == {}  # nor any other process of that Ray (reparented ones too)
    assert os.listdir(short_tmp) == []  # the scratch temp dir removed
    os.rmdir(short_tmp)
