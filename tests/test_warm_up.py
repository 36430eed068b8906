"""Tokenizer set-up runs off the event loop: jieba loads in a background thread as soon as a
loaded record's reference holds Chinese, once per run, and never for English-only data."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from groundscope import run_task
from groundscope.client.simulator import SimulatorServer
from groundscope.scoring import tokenize
from media_fixtures import image_bytes, write, write_jsonl


def _dataset(root: Path, answers: list[str]) -> Path:
    write(root, "a.jpg", image_bytes("JPEG"))
    write_jsonl(root / "data.jsonl", [
        {"id": f"q{i}", "answer": a, "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"Question {i}?"},
            {"type": "image_url", "image_url": {"url": "a.jpg"}}]}]}
        for i, a in enumerate(answers)])
    return root


@pytest.mark.parametrize(("answers", "expected"), [
    (["a red square", "a cat", "一只红色的方块", "两只猫"], ["groundscope-jieba"]),
    (["a red square", "a cat", "the sky"], []),
])
def test_jieba_is_loaded_in_the_background_when_references_are_chinese(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: list[str], expected: list[str]) -> None:
    calls: list[str] = []
    real = tokenize.warm_chinese

    def recording() -> None:
        calls.append(threading.current_thread().name)
        real()

    monkeypatch.setattr(tokenize, "warm_chinese", recording)
    data = _dataset(tmp_path / "data", answers)
    with SimulatorServer() as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(data)}},
                           "work_dir": str(tmp_path / "out"), "eval_batch_size": 2})
    assert report.datasets[0].summary.succeeded == len(answers)
    for thread in threading.enumerate():  # the warm-up thread has finished its work
        if thread.name == "groundscope-jieba":
            thread.join(timeout=60)
    assert calls == expected
