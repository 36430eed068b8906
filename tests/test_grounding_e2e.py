"""The bundled grounding example end to end against the simulator: the reported grounding,
hallucination, completeness and consistency equal the values computed by hand from the planted
claims; per-claim verdicts and reasons are in the reviews; re-scoring, re-reporting and
resuming make no repeated judge call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli_support import table_rows
from groundscope import run_task
from groundscope.report.model import Report
from groundscope.rescore import rebuild_report, rescore_run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "grounding"

# The planted answers (examples/grounding/truth.json) as (supported, contradicted,
# not determinable) claim counts, worked out by hand from what each image shows.
SCENES = {"scene-dog": (4, 1, 0),      # "A red ball lies next to the dog." is false
          "scene-beach": (5, 1, 1),    # swimmers are false; "the water is warm" cannot be seen
          "scene-car": (2, 0, 1),      # "The car is parked." cannot be seen
          "scene-museum": (2, 1, 0)}   # there is no flag on the roof
# scene-city answers "I cannot tell what this shows.": no claims, counted apart.
QUESTIONS = [(1, 0, 0)] * 3 + [(1, 0, 0), (1, 0, 0), (0, 1, 0)] + [(1, 0, 0)] * 2 \
    + [(1, 0, 0), (0, 1, 0)] + [(1, 0, 0)]
# Completeness: dog 3/3, beach 4/5 (not "the word BEACH"), car 2/3, city 0/3; museum has none.
COMPLETENESS = [3 / 3, 4 / 5, 2 / 3, 0 / 3]
# Consistency groups: (agreeing pairs / pairs, every answer correct)
GROUPS = {"wheels": (1.0, 1.0),          # "2", "two", "Two wheels." (judge: same)
          "dog-present": (1 / 3, 0.0),   # "Yes", "yes.", "No": 1 of 3 pairs agree
          "umbrella": (1.0, 1.0),        # "Red.", "It is red." (judge: same)
          "tower": (0.0, 0.0)}           # "A tower.", "A bridge."


def by_hand(answers: list[tuple[int, int, int]]) -> dict[str, float]:
    """Grounding aggregates under the default policy (not determinable = not supported)."""
    macro = sum(s / (s + c + n) for s, c, n in answers) / len(answers)
    claims = sum(s + c + n for s, c, n in answers)
    supported = sum(s for s, _, _ in answers)
    return {"grounding": macro, "grounding_claims": supported / claims,
            "hallucination": (claims - supported) / claims,
            "hallucinated_answers": sum(c > 0 for _, c, _ in answers) / len(answers)}


def config(work_dir: Path, **extra: object) -> dict:
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(EXAMPLE)
    cfg["simulator"]["truth"] = str(EXAMPLE / "truth.json")
    return {**cfg, "work_dir": str(work_dir), "no_timestamp": True, **extra}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Path]:
    run_dir = tmp_path_factory.mktemp("grounding_demo")
    return run_task(config(run_dir)), run_dir


def scores(report: Report) -> dict[tuple[str, str], float | None]:
    rep = report.dataset("general_vqa")
    return {(r.metric, r.subset): r.score for r in rep.metrics}


def cache_lines(run_dir: Path) -> dict[str, int]:
    return {p.stem: len(p.read_text().splitlines()) for p in (run_dir / "cache").glob("*.jsonl")}


def test_reported_values_equal_the_hand_computed_ones(demo) -> None:
    report, _ = demo
    got = scores(report)
    everything = list(SCENES.values()) + QUESTIONS
    for subset, answers in (("scenes", list(SCENES.values())), ("questions", QUESTIONS),
                            ("OVERALL", everything)):
        for metric, value in by_hand(answers).items():
            assert got[(metric, subset)] == pytest.approx(value), (metric, subset)
    # the same numbers written out: 22 of 29 claims supported, 5 of 15 answers hallucinate
    assert got[("grounding_claims", "OVERALL")] == pytest.approx(22 / 29)
    assert got[("hallucination", "OVERALL")] == pytest.approx(7 / 29)
    assert got[("hallucinated_answers", "OVERALL")] == pytest.approx(5 / 15)
    assert got[("grounding", "scenes")] == pytest.approx((4 / 5 + 5 / 7 + 2 / 3 + 2 / 3) / 4)
    assert got[("completeness", "scenes")] == pytest.approx(sum(COMPLETENESS) / 4)
    assert got[("completeness", "questions")] is None  # no record lists elements
    assert got[("consistency", "questions")] == pytest.approx(
        sum(a for a, _ in GROUPS.values()) / 4)
    assert got[("consistent_correct", "OVERALL")] == pytest.approx(0.5)
    assert ("consistency", "scenes") not in got  # no groups there: no row


def test_counts_behind_the_numbers(demo) -> None:
    report, _ = demo
    rep = report.dataset("general_vqa")
    rows = {(r.metric, r.subset): r for r in rep.metrics}
    assert rows[("grounding", "scenes")].num == 4 and rows[("grounding", "scenes")].excluded == 1
    extra = rep.extra["grounding"]
    assert extra["policy"] == {"not_determinable": "unsupported"}
    overall = extra["overall"]
    assert (overall["answers"], overall["no_claims"], overall["judge_failed"]) == (15, 1, 0)
    assert (overall["claims"], overall["supported"], overall["contradicted"],
            overall["not_determinable"]) == (29, 22, 5, 2)
    assert overall["completeness"]["elements"] == 14 and overall["completeness"]["covered"] == 9
    assert overall["consistency"] == {"groups": 4, "all_agree": 2, "too_small": 0,
                                      "judge_failed": 0, "judged_pairs": 3}


def reviews(run_dir: Path) -> list[dict]:
    rows = []
    for path in sorted((run_dir / "reviews").rglob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def test_every_scored_sample_has_per_claim_verdicts_and_reasons(demo) -> None:
    _, run_dir = demo
    grounding = [r for r in reviews(run_dir) if r["scorer"] == "grounding"]
    assert len(grounding) == 16
    for row in grounding:
        if row["status"] == "ok":
            claims = row["detail"]["claims"]
            assert len(claims) == row["detail"]["n_claims"] > 0
            assert all(c["claim"] and c["verdict"] in ("supported", "contradicted",
                                                        "not_determinable") and c["reason"]
                       for c in claims)
            assert row["weights"]["grounding_claims"] == len(claims)
        else:
            assert row["status"] == "no_answer" and row["detail"]["no_claims"] is True
    groups = {r["sample_id"]: r for r in reviews(run_dir) if r["scorer"] == "consistency_group"}
    assert set(groups) == {f"group:{g}" for g in GROUPS}
    for gid, (agreement, correct) in GROUPS.items():
        values = groups[f"group:{gid}"]["values"]
        assert values["consistency"] == pytest.approx(agreement)
        assert values["consistent_correct"] == correct


def test_each_step_is_cached_separately(demo) -> None:
    _, run_dir = demo
    # 16 answers; 27 distinct (claim, image) pairs of 29 claims; 4 answers with elements;
    # 5 equivalence checks (3 answer pairs, 2 answer-vs-reference; one pair asked twice).
    assert cache_lines(run_dir) == {"claims": 16, "verification": 27, "completeness": 4,
                                    "equivalence": 5}


def test_rescore_report_and_resume_make_no_repeated_calls(demo, tmp_path: Path) -> None:
    report, run_dir = demo
    before = cache_lines(run_dir)
    expected = scores(report)
    rescored = rescore_run(run_dir)
    assert scores(rescored) == pytest.approx(expected) and cache_lines(run_dir) == before
    rebuilt = rebuild_report(run_dir)
    assert scores(rebuilt) == pytest.approx(expected)
    assert rebuilt.dataset("general_vqa").extra["grounding"] == \
        report.dataset("general_vqa").extra["grounding"]
    resumed = run_task(config(tmp_path, use_cache=str(run_dir)))
    assert scores(resumed) == pytest.approx(expected) and cache_lines(run_dir) == before
    assert resumed.dataset("general_vqa").summary.cached == 16


def test_rescore_without_cache_asks_the_judge_only_simulator_again(demo, tmp_path: Path) -> None:
    report, run_dir = demo
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / "cache")
    rescored = rescore_run(copy)  # api_url "mock": a judge-only simulator with the same truth
    assert scores(rescored) == pytest.approx(scores(report))
    assert cache_lines(copy) == cache_lines(run_dir)


def test_the_readme_demo_command(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "groundscope", "eval", "--config", "examples/grounding_demo.yaml",
         "--work-dir", str(tmp_path), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rows = table_rows(proc.stdout)
    assert rows[("Grounding (claims) ↑", "OVERALL")] == (15, "75.9%")
    assert rows[("Consistent and correct ↑", "OVERALL")] == (4, "50%")
