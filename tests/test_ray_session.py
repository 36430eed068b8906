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
