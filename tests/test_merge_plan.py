"""`merge` joins only shards that ran on the same data: each shard records its plan
(plan.json, plan-records.jsonl); shards whose plans differ (records appended between two
shards, an image replaced) are refused with one line naming the shard and the first record
that differs, with or without --partial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_support import run_cli
from groundscope import run_task
from media_fixtures import image_bytes, write, write_jsonl


def _records(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "answer": "a red square", "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"Question {i}?"},
        {"type": "image_url", "image_url": {"url": "a.png"}}]}]} for i in range(start, start + n)]


def _cfg(data: Path, work: Path, shard: str) -> dict[str, Any]:
    return {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"],
            "dataset_args": {"general_vqa": {"local_path": str(data), "shuffle": True}},
            "seed": 3, "work_dir": str(work), "no_timestamp": True, "shard": shard}


def _refused(tmp_path: Path, *args: str) -> str:
    done = run_cli("merge", *args, "--work-dir", str(tmp_path / "merged"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "merged").exists() or not any((tmp_path / "merged").iterdir())
    return lines[0]


def test_records_appended_between_shards_are_refused_even_partial(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data, "a.png", image_bytes("PNG"))
    write_jsonl(data / "d.jsonl", _records(10))
    run_task(_cfg(data, tmp_path / "s1", "1/2"))
    write_jsonl(data / "d.jsonl", _records(15))  # 5 records appended meanwhile
    run_task(_cfg(data, tmp_path / "s2", "2/2"))
    for extra in ([], ["--partial"]):
        err = _refused(tmp_path, str(tmp_path / "s1"), str(tmp_path / "s2"), *extra)
        assert f"{tmp_path / 's2'}: shard 2/2 ran on different data" in err, err
        assert "first differing record: general_vqa/d line" in err and "sample 'q" in err, err


def test_shards_run_on_different_images_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write(data, "a.png", image_bytes("PNG", color="red"))
    write_jsonl(data / "d.jsonl", _records(6))
    run_task(_cfg(data, tmp_path / "s1", "1/2"))
    write(data, "a.png", image_bytes("PNG", color="blue"))  # same name, other picture
    run_task(_cfg(data, tmp_path / "s2", "2/2"))
    err = _refused(tmp_path, str(tmp_path / "s1"), str(tmp_path / "s2"))
    assert "shard 2/2 ran on different data" in err and "its text or media differ" in err, err
    write(data, "a.png", image_bytes("PNG", color="red"))  # the same data again: merged
    run_task(_cfg(data, tmp_path / "s3", "2/2"))
    done = run_cli("merge", str(tmp_path / "s1"), str(tmp_path / "s3"), "--work-dir",
                   str(tmp_path / "ok"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
