"""Shards with many rows, fast: a real 2-shard run of a tiny dataset whose predictions and
reviews files are then grown by copies of their rows under new sample ids (each a valid
row, as groundscope wrote it; the copies of one shard never overlap the other's)."""

from __future__ import annotations

import json
from pathlib import Path

from groundscope import run_task
from media_fixtures import image_bytes, write, write_jsonl


def tiny_dataset(data: Path) -> Path:
    """Two General-VQA records sharing one PNG, in ``data`` (``d.jsonl``)."""
    write(data, "a.png", image_bytes("PNG"))
    write_jsonl(data / "d.jsonl", [
        {"id": f"q{i}", "answer": "a red square", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"Question {i}?"},
            {"type": "image_url", "image_url": {"url": "a.png"}}]}]} for i in range(2)])
    return data


def real_shards(base: Path) -> list[Path]:
    data = tiny_dataset(base / "data")
    dirs = []
    for k in (1, 2):
        run_task({"model": "m", "eval_type": "mock", "datasets": ["general_vqa"],
                  "dataset_args": {"general_vqa": {"local_path": str(data)}},
                  "work_dir": str(base / f"s{k}"), "no_timestamp": True, "shard": f"{k}/2"})
        dirs.append(base / f"s{k}")
    return dirs


def grow(shard: Path, rows: int) -> None:
    """``rows`` predictions in the shard's (one) predictions file, each with its reviews."""
    (pred_path,) = (shard / "predictions").rglob("*.jsonl")
    review_path = shard / "reviews" / pred_path.relative_to(shard / "predictions")
    pred = json.loads(pred_path.read_text().splitlines()[0])
    reviews = [json.loads(line) for line in review_path.read_text().splitlines()
               if json.loads(line)["sample_id"] == pred["sample_id"]]
    with pred_path.open("a") as p, review_path.open("a") as r:
        for i in range(rows - 1):
            sid = f"{shard.name}-{i}"
            p.write(json.dumps({**pred, "sample_id": sid}) + "\n")
            for review in reviews:
                r.write(json.dumps({**review, "sample_id": sid}) + "\n")
