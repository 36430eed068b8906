"""Hostile input to the scale-out paths as a user types it: a bad ``--ray-address`` is one
line naming the field, exit 2, no traceback; ``groundscope merge`` never writes its run
inside one of the shards it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import EXAMPLES, run_cli
from groundscope import run_task
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


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("scaleout_shards")
    cfg = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"], "no_timestamp": True,
           "dataset_args": {"general_vqa": {"local_path": str(EXAMPLES / "vqa")}}}
    for k in (1, 2):
        run_task({**cfg, "work_dir": str(base / f"s{k}"), "shard": f"{k}/2"})
    return base / "s1", base / "s2"


@pytest.mark.parametrize("into", [".", "sub/dir"])
def test_merge_into_one_of_its_shards_is_refused(into: str, two_shards: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    s1, s2 = two_shards
    before = sorted(p.name for p in s2.iterdir())
    done = run_cli("merge", str(s1), str(s2), "--work-dir", str(s2 / into), cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-1000:]
    assert "Traceback" not in done.stderr
    assert f"is inside shard 2/2 ({s2})" in done.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in s2.iterdir()) == before  # nothing written into the shard
    ok = run_cli("merge", str(s1), str(s2), "--work-dir", str(tmp_path / "merged"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-1000:]


def test_a_partial_merge_says_so_on_the_terminal(two_shards: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    done = run_cli("merge", str(two_shards[0]), "--partial", "--work-dir", str(tmp_path / "m"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1000:]
    assert ("groundscope: warning: partial merge: shard 2/2 missing; this report covers 1 of 2 "
            "shards") in done.stderr.splitlines()


def _judge_figures(run_dir: Path) -> dict:
    report = json.loads((run_dir / "reports" / "m" / "general_vqa.groundscope.json").read_text())
    return {"judge": report["extra"]["judge"],
            "rows": [(r["metric"], r["subset"], r["num"], r["score"]) for r in report["metrics"]]}


def test_a_resume_with_fewer_records_reports_the_judge_figures_of_its_plan(tmp_path: Path) -> None:
    """Resumed with a smaller ``limit`` (as a shard resumed under a changed config is), the
    run's review file still holds the samples dropped from the plan: the judge figures
    (agreement, judge vs human) count only the planned ones, as a fresh run does."""
    cfg = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"], "no_timestamp": True,
           "dataset_args": {"general_vqa": {"local_path": str(EXAMPLES / "judge")}},
           "media_roots": [str(EXAMPLES / "media")], "repeats": 2,
           "simulator": {"accuracy": 0.7, "judge_noise": 0.0, "seed": 0},
           "judge": {"strategy": "llm", "models": [{"model_id": j, "api_url": "mock"}
                                                   for j in ("ja", "jb", "jc")]}}
    resumed, fresh = tmp_path / "resumed", tmp_path / "fresh"
    run_task({**cfg, "work_dir": str(resumed)})
    run_task({**cfg, "limit": 3, "work_dir": str(resumed), "use_cache": str(resumed)})
    run_task({**cfg, "limit": 3, "work_dir": str(fresh)})
    assert _judge_figures(resumed) == _judge_figures(fresh)
    assert _judge_figures(fresh)["judge"]["judged"] == 6  # 3 records x 2 repeats
