"""``groundscope score`` on a run of any size: the saved predictions are streamed, and the
samples being scored at once are bounded, never all of the run's at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundscope import rescore, run_task
from merge_support import grow, tiny_dataset


def test_score_holds_a_bounded_number_of_samples_whatever_the_run_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tiny_dataset(tmp_path / "data")
    run_dir = tmp_path / "run"
    run_task({"model": "m", "eval_type": "mock", "datasets": ["general_vqa"],
              "dataset_args": {"general_vqa": {"local_path": str(data)}},
              "work_dir": str(run_dir), "no_timestamp": True, "judge_concurrency": 4})
    grow(run_dir, 600)
    (predictions,) = (run_dir / "predictions").rglob("*.jsonl")
    n = len(predictions.read_text().splitlines())
    assert n > 500
    live, peak = [0], [0]
    real = rescore.evaluate_sample

    async def counted(*args: Any, **kwargs: Any) -> Any:
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        try:
            return await real(*args, **kwargs)
        finally:
            live[0] -= 1

    monkeypatch.setattr(rescore, "evaluate_sample", counted)
    report = rescore.rescore_run(run_dir)
    assert report.datasets[0].summary.succeeded == n
    assert 1 <= peak[0] <= 2 * 4  # twice the scoring concurrency, not the run's size
    (reviews,) = (run_dir / "reviews").rglob("*.jsonl")
    scored = {json.loads(line)["sample_id"] for line in reviews.read_text().splitlines()}
    assert len(scored) == n
