"""Hostile input to the scale-out paths as a user types it: a bad ``--ray-address`` is one
line naming the field, exit 2, no traceback; ``groundscope merge`` never writes its run
inside one of the shards it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import EXAMPLES, run_cli
from ray_support import RAY_ENV

VQA = ["--eval-type", "mock", "--model", "m", "--datasets", "general_vqa", "--dataset-args",
       '{"general_vqa": {"local_path": "%s"}}' % (EXAMPLES / "vqa")]


@pytest.mark.parametrize("address", ["garbage", "ray://127.0.0.1:1"])
def test_a_bad_ray_address_is_one_line_exit_2(address: str, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    done = run_cli("eval", *VQA, "--work-dir", str(tmp_path / "o"), "--executor", "ray",
                   "--ray-address", address, cwd=tmp_path, env_extra=RAY_ENV)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and f"ray_address: cannot join a Ray cluster at {address!r}" in errors[0]
