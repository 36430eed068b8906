"""The runner hands freed heap back to the OS every ``TRIM_EVERY`` finished samples."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from groundscope import memory, run_task
from groundscope import runner as R
from groundscope.simulator import SimulatorServer
from media_fixtures import image_bytes, write, write_jsonl


def test_release_free_memory_trims_where_glibc_is() -> None:
    assert memory.release_free_memory() is (platform.libc_ver()[0] == "glibc")


def test_the_runner_trims_every_trim_every_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(R, "TRIM_EVERY", 5)
    monkeypatch.setattr(R, "release_free_memory", lambda: calls.append(1) or True)
    write(tmp_path, "a.jpg", image_bytes("JPEG"))
    write_jsonl(tmp_path / "data.jsonl", [
        {"id": f"q{i}", "answer": "x", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"Question {i}?"},
            {"type": "image_url", "image_url": {"url": "a.jpg"}}]}]} for i in range(12)])
    with SimulatorServer() as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(tmp_path)}},
                           "work_dir": str(tmp_path / "out")})
    assert report.datasets[0].summary.succeeded == 12
    assert len(calls) == 2  # after samples 5 and 10
