"""Shared helpers of the reliability tests (faults, crash/resume, Ctrl-C, secrets).

A generated General-VQA dataset (text and image records with ids), the matching simulator
oracle, a ``groundscope`` subprocess runner, and readers for a run directory's outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.runner import iter_samples, plan_dataset
from groundscope.simulator import SimulatorServer
from groundscope.types import Sample

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_MEDIA = ROOT / "examples" / "media"
MODEL = "sim-vl"
SUBSETS = ("alpha", "beta")
_ANIMALS = ("dog", "cat", "horse", "owl", "fox", "whale", "tiger", "crow")
_IMAGES = ("dog.jpg", "beach.jpg", "running.jpg", "tokyo.jpg", "xray.png")


def write_dataset(root: Path, per_subset: int = 30) -> Path:
    """Two subsets of ``per_subset`` records each; every third record carries an image."""
    data = root / "data"
    media = data / "media"
    media.mkdir(parents=True, exist_ok=True)
    for name in _IMAGES:
        shutil.copy(EXAMPLE_MEDIA / name, media / name)
    for s, subset in enumerate(SUBSETS):
        lines = []
        for i in range(per_subset):
            animal = _ANIMALS[(i + s) % len(_ANIMALS)]
            text = f"[{subset} {i}] Which animal is number {i} in the {subset} list?"
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            if i % 3 == 0:
                content.append({"type": "image_url",
                                "image_url": {"url": f"media/{_IMAGES[i % len(_IMAGES)]}"}})
            answer = f"It is a {animal}, number {i} of {subset}, seen at dawn near the river."
            lines.append(json.dumps({"id": f"{subset}-{i:03d}", "answer": answer,
                                     "messages": [{"role": "user", "content": content}]}))
        (data / f"{subset}.jsonl").write_text("\n".join(lines) + "\n")
    return data


def dataset_args(data: Path) -> dict[str, Any]:
    return {"general_vqa": {"local_path": str(data), "subset_list": list(SUBSETS)}}


def samples_of(data: Path) -> list[Sample]:
    cfg = load_config({"datasets": ["general_vqa"], "dataset_args": dataset_args(data),
                       "eval_type": "mock"})
    return [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vqa"), strict=False)
            if not isinstance(s, RecordError)]


def question_ids(samples: list[Sample]) -> dict[str, str]:
    """The first text of each sample's prompt -> its sample id (to map simulator records)."""
    out = {}
    for s in samples:
        parts = s.messages[-1].content
        text = parts if isinstance(parts, str) else parts[0].text  # type: ignore[union-attr]
        out[text] = s.id
    return out


def request_sample_id(record: dict[str, Any], ids: dict[str, str]) -> str:
    """The sample id a simulator request record asked about."""
    content = record["body"]["messages"][-1]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    return ids[text]


def eval_args(url: str, data: Path, work: Path, *extra: str) -> list[str]:
    return ["eval", "--model", MODEL, "--api-url", url, "--datasets", "general_vqa",
            "--dataset-args", json.dumps(dataset_args(data)), "--work-dir", str(work),
            "--no-timestamp", "--no-progress", *extra]


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


def run_cli(args: list[str], cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groundscope", *args], cwd=cwd,
                          env=cli_env(**env), capture_output=True, text=True, timeout=timeout)


def popen_cli(args: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "groundscope", *args], cwd=cwd,
                            env=cli_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def complete_lines(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file, ignoring a torn (unterminated) last line."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    return [json.loads(line) for line in raw[: raw.rfind(b"\n") + 1].splitlines() if line.strip()]


def rows(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    """Every row of ``predictions`` or ``reviews`` over all subsets."""
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / kind / MODEL).glob("*.jsonl")):
        out += complete_lines(path)
    return out


def assert_exactly_once(run_dir: Path, expected_ids: set[str], scorers: int = 2) -> None:
    """Every sample exactly once in predictions (status ok) and once per scorer in reviews."""
    preds = rows(run_dir, "predictions")
    ids = Counter(r["sample_id"] for r in preds)
    assert set(ids) == expected_ids
    assert max(ids.values()) == 1, [k for k, v in ids.items() if v > 1]
    assert all(r["status"] == "ok" for r in preds), [r for r in preds if r["status"] != "ok"][:3]
    reviews = Counter((r["sample_id"], r["scorer"]) for r in rows(run_dir, "reviews"))
    assert len(reviews) == scorers * len(expected_ids)
    assert max(reviews.values()) == 1


def report_numbers(run_dir: Path) -> dict[str, Any]:
    """What a report says about the model: every metric row and the outcome counts."""
    report = json.loads((run_dir / "reports" / MODEL / "general_vqa.groundscope.json").read_text())
    summary = report["summary"]
    return {
        "metrics": report["metrics"],
        "subsets": report["subsets"],
        "summary": {k: summary[k] for k in ("requested", "succeeded", "errored", "skipped")},
    }


class GatedSimulator(SimulatorServer):
    """A simulator that answers the first ``open_for`` chat requests and holds every later
    one until it stops: a client killed once ``open_for`` predictions are on disk is killed
    mid-run, deterministically, with requests in flight."""

    def __init__(self, *args: Any, open_for: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_for = open_for
        self.arrived = 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.arrived += 1
        if self.arrived > self.open_for:
            assert self._closing is not None
            await self._closing.wait()  # released (and answered 503) only when stopping
            return web.Response(status=503)
        return await super()._chat(request)
