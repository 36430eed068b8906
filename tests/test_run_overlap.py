"""What a run does beside and ahead of its requests: jieba loads in a background thread as
soon as a loaded record's reference holds Chinese (once per run, never for English-only
data), and records are read only a little ahead of free model slots."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from groundscope import run_task
from groundscope.scoring import tokenize
from groundscope.simulator import SimBehaviour, SimRequest, SimulatorServer
from media_fixtures import image_bytes, write, write_jsonl


class _FirstWaveGate(SimulatorServer):
    """Holds the first ``wave`` requests until all of them have arrived, then answers every
    request at once: the first wave is in flight together, whatever the machine's load."""

    def __init__(self, *args: Any, wave: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wave, self.arrived = wave, 0
        self.full: asyncio.Event | None = None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.full is None:
            self.full = asyncio.Event()
        self.arrived += 1
        if self.arrived >= self.wave:
            self.full.set()
        await self.full.wait()
        return await super()._chat(request)


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


def test_records_are_read_only_a_little_ahead_of_free_model_slots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory follows the concurrency: at any moment at most ``eval_batch_size`` + 16 records
    are read and not yet answered, however long the dataset (and however many may be
    scored at once). Read: yielded by ``groundscope.dataset.load_samples``; answered: the
    simulator's responder ran (just before the reply is sent)."""
    import groundscope.dataset

    reads, answered, worst = [0], [0], [0]
    load = groundscope.dataset.load_samples

    def counting_load(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in load(*args, **kwargs):
            reads[0] += 1
            worst[0] = max(worst[0], reads[0] - answered[0])
            yield item

    def counting_responder(req: SimRequest) -> None:
        answered[0] += 1  # and the oracle answers

    monkeypatch.setattr(groundscope.dataset, "load_samples", counting_load)
    data = _dataset(tmp_path / "data", [f"answer {i}" for i in range(200)])
    with _FirstWaveGate(behaviour=SimBehaviour(latency_ms=50), wave=32,  # slots stay busy
                        responders=[counting_responder]) as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(data)}},
                           "work_dir": str(tmp_path / "out"), "eval_batch_size": 32,
                           "judge_concurrency": 64})
    assert report.datasets[0].summary.succeeded == 200 == reads[0] == answered[0]
    assert 32 <= worst[0] <= 32 + 16
