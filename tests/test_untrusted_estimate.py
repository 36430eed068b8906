"""The dry-run estimate on a hostile dataset (tests/untrusted/estimate/make_corpus.py): bad
records and duplicate ids are counted exactly as a run skips them, never a crash; media sizes
come from headers (a cut PNG, a streamed WAV, a remote image never fetched); ``strict`` makes
the first bad record the one-line error it is in a run."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from cli_support import run_cli
from groundscope import run_task
from groundscope.estimate import estimate
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.tokens import VIDEO_TOKENS, image_tokens

MAKE = runpy.run_path(str(Path(__file__).parent / "untrusted" / "estimate" / "make_corpus.py"))


@pytest.fixture()
def hostile(tmp_path: Path) -> Path:
    return MAKE["hostile"](tmp_path / "corpus")


def _cfg(data: Path, **extra: object) -> dict[str, object]:
    return {"eval_type": "mock", "datasets": ["general_vqa"],
            "dataset_args": {"general_vqa": {"local_path": str(data)}}, **extra}


def test_bad_records_are_counted_as_a_run_skips_them(hostile: Path, tmp_path: Path) -> None:
    est = estimate(_cfg(hostile))
    (count,) = est.datasets
    assert (count.samples, count.bad_records, count.duplicate_ids) == \
        (MAKE["GOOD"], MAKE["BAD"], MAKE["DUPLICATES"])
    assert count.records == MAKE["GOOD"] + MAKE["BAD"] + MAKE["DUPLICATES"]
    server = SimulatorServer(behaviour=SimBehaviour(accuracy=0.0))
    with server as url:
        run_task({**_cfg(hostile), "eval_type": "openai_api", "model": "m", "api_url": url,
                  "work_dir": str(tmp_path / "run"), "no_timestamp": True, "ignore_errors": True})
    skipped = (tmp_path / "run" / "skipped.jsonl").read_text().splitlines()
    assert len(skipped) == count.bad_records + count.duplicate_ids
    assert server.stats()["requests"] == est.row("model").requests == MAKE["GOOD"]


def test_media_sizes_come_from_headers(hostile: Path) -> None:
    m = estimate(_cfg(hostile)).media
    # wide.png 640x480 high; cut.png 1500x900 (cut after its header) auto; the remote image
    # is never fetched: a 1024x1024 one
    assert m.images == 3 and m.unknown_images == 1
    assert m.image_tokens == image_tokens(640, 480, "high") + image_tokens(1500, 900, None) + 765
    # the streamed WAV declares 0xFFFFFFFF data bytes: its length is what the file holds
    assert (m.audio, m.audio_seconds, m.audio_tokens) == (1, 2.0, 20)
    assert (m.videos, m.video_tokens) == (1, VIDEO_TOKENS)
    assert m.unreadable == 0


def test_dry_run_on_the_hostile_dataset(hostile: Path) -> None:
    """Exit 0 with the counts in the table; with --strict the first bad record is the one-line
    error a strict run gives, before any request (exit 2)."""
    args = json.dumps({"general_vqa": {"local_path": str(hostile)}})
    base = ("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args", args,
            "--dry-run")
    proc = run_cli(*base, cwd=hostile)
    assert proc.returncode == 0, proc.stderr
    row = next(line.split() for line in proc.stdout.splitlines()
               if line.startswith("general_vqa "))
    assert row[1:] == ["13", "6", "1", "6", "1", "6"]
    assert "general_vqa: 7 records a run would skip (first 5):" in proc.stdout
    assert "mixed.jsonl:7: <json>: invalid JSON" in proc.stdout  # each one line: file:line
    strict = run_cli(*base, "--strict", cwd=hostile)
    assert strict.returncode == 2
    (line,) = strict.stderr.strip().splitlines()
    assert line.startswith("groundscope: error: ") and "mixed.jsonl:7" in line, line
