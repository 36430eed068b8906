"""Attacks on what a run costs: saved usage whose detail counters exceed their totals (a
prediction row, a review row, a response-cache line) is held to them wherever it is read, as
the wire modules hold a reply's; the dry-run estimate names its steps as ``summary.usage``
does, so an estimate and the run's usage can be compared step by step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_support import run_cli
from groundscope import run_task
from groundscope.client.cache import completion_from_json
from groundscope.errors import StoreError
from groundscope.estimate import estimate, estimate_json
from groundscope.pricing import Price
from groundscope.rescore import rebuild_report
from groundscope.rows import read_rows
from groundscope.types import Usage
from groundscope.usage import MAX_COUNT, CallCounts, Tokens, UsageSummary, short_count

ROOT = Path(__file__).resolve().parents[1]
OVER = {"reasoning_tokens": 10**6, "cached_tokens": 10**6}  # far above their totals


def _judge_config(work: Path) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "judge_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(ROOT / "examples" / "judge")
    return {**cfg, "work_dir": str(work), "no_timestamp": True}


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(run_task(_judge_config(tmp_path_factory.mktemp("costs"))).run_dir)


def _consistent(t: dict[str, Any] | Tokens) -> bool:
    d = t if isinstance(t, dict) else t.model_dump()
    return d["reasoning_tokens"] <= d["completion_tokens"] and d["cached_tokens"] <= d["prompt_tokens"]


def test_usage_details_are_held_to_their_totals() -> None:
    u = Usage(10, 5, 15, reasoning_tokens=9, cached_tokens=40)
    assert (u.reasoning_tokens, u.cached_tokens) == (5, 10)
    assert Usage(-3, -1, 0, reasoning_tokens=7, cached_tokens=7) == Usage(0, 0, 0)
    t = Tokens.model_validate({"requests": 1, "prompt_tokens": 9, "completion_tokens": 4, **OVER})
    assert (t.reasoning_tokens, t.cached_tokens) == (4, 9)


def test_report_holds_crafted_row_details_to_their_totals(judged_run: Path, tmp_path: Path) -> None:
    """A prediction row and a review row saying 10**6 reasoning / cached tokens of a few
    hundred: ``groundscope report`` shows totals whose details stay within them, and a cost
    that is the one of the row's real prompt and completion tokens."""
    run = tmp_path / "run"
    shutil.copytree(judged_run, run)
    pred = next((run / "predictions").rglob("*.jsonl"))
    rows = [json.loads(line) for line in pred.read_text().splitlines()]
    rows[0]["usage"].update(OVER)
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows))
    review = next((run / "reviews").rglob("*.jsonl"))
    rows = [json.loads(line) for line in review.read_text().splitlines()]
    for counts in next(iter(rows[0]["usage"].values())).values():
        counts["billed"].update(OVER)
    review.write_text("".join(json.dumps(r) + "\n" for r in rows))

    done = run_cli("report", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    usage = rebuild_report(run)["general_vqa"].summary.usage
    assert _consistent(usage.total.billed)
    for by_model in usage.steps.values():
        for entry in by_model.values():
            assert _consistent(entry.billed) and _consistent(entry.cached)
    saved = json.loads(next((run / "reports").rglob("general_vqa.groundscope.json")).read_text())
    assert _consistent(saved["summary"]["usage"]["total"]["billed"])
    # priced with a cheap cache: the 10**6 "cached" tokens cannot lower the prompt's cost
    usage.price({"groundscope-sim": Price(input=1.0, output=1.0, cached_input=0.0)})
    model = usage.steps["model"]["groundscope-sim"].billed
    assert model.cached_tokens <= model.prompt_tokens


def test_cache_line_details_are_held_to_their_totals() -> None:
    reply = completion_from_json({"text": "ok", "model": "m", "usage": [10, 5, 15, 10**6, 10**6]})
    assert (reply.usage.reasoning_tokens, reply.usage.cached_tokens) == (5, 10)


def test_summary_sums_stay_consistent_under_crafted_calls() -> None:
    s = UsageSummary()
    s.add_calls({"claims": {"j": CallCounts.model_validate(
        {"billed": {"requests": 1, "prompt_tokens": 5, "completion_tokens": 2, **OVER}})}})
    assert _consistent(s.total.billed)


def test_dry_run_names_the_steps_as_the_usage_summary(judged_run: Path, tmp_path: Path) -> None:
    """Every (step, model id) the run's ``summary.usage`` counts has an estimate row of the
    same name: the correctness judge is ``correctness`` in both."""
    report = rebuild_report(judged_run)
    counted = {(step, model) for step, by_model in
               report["general_vqa"].summary.usage.steps.items() for model in by_model}
    assert ("correctness", "judge-a") in counted
    est = estimate_json(estimate(_judge_config(tmp_path)))
    rows = {(s["step"], s["model_id"]) for s in est["steps"]}
    assert counted <= rows, counted - rows
    shown = run_cli("eval", "--config", str(ROOT / "examples" / "judge_demo.yaml"),
                    "--dataset-args", json.dumps({"general_vqa": {
                        "local_path": str(ROOT / "examples" / "judge")}}),
                    "--dry-run", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert any(line.startswith("correctness ") for line in shown.stdout.splitlines())


@pytest.mark.parametrize("step", ["model", "\x1b[2J<script>", "judge", ""])
def test_review_row_counts_only_judge_steps(tmp_path: Path, step: str) -> None:
    """A review row holds the judge calls made to score it: a step that is no judge step
    (the model's own, or an invented one) is a bad row named by file and line, never a total
    (a forged ``model`` entry would be summed into the model's requests)."""
    row = {"sample_id": "a", "dataset": "d", "subset": "s", "scorer": "accuracy",
           "status": "ok", "values": {"accuracy": 1.0},
           "usage": {step: {"m": {"billed": {"requests": 10**6}}}}}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(StoreError, match=r"r\.jsonl:1: usage"):
        list(read_rows(path, "review"))


def test_score_with_a_new_judge_finds_the_media_of_a_relative_dataset(tmp_path: Path) -> None:
    """The README's grounding demo names its dataset relatively (``examples/grounding``), so
    its saved samples' origins are relative: ``groundscope score RUN --judge NEW`` from the
    same directory re-verifies the claims against the images (verification calls counted),
    where it used to look for ``../media/x.jpg`` in the working directory."""
    shutil.copytree(ROOT / "examples" / "grounding", tmp_path / "examples" / "grounding")
    shutil.copytree(ROOT / "examples" / "media", tmp_path / "examples" / "media")
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(cfg))
    done = run_cli("eval", "--config", "demo.yaml", "--work-dir", "out", "--no-timestamp",
                   "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    judge = json.dumps({"models": {"model_id": "second-judge", "api_url": "mock"}})
    again = run_cli("score", "out", "--judge", judge, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    reviews = [json.loads(line) for f in (tmp_path / "out" / "reviews").rglob("*.jsonl")
               for line in f.read_text().splitlines()]
    assert not [r for r in reviews if "not found" in json.dumps(r.get("detail"))]
    usage = rebuild_report(tmp_path / "out")["general_vqa"].summary.usage
    assert usage.steps["verification"]["second-judge"].billed.requests > 0


def test_counts_in_a_line_never_use_exponent_notation() -> None:
    """A reply may claim 2**31 - 1 tokens (the most a wire module accepts), and a summed
    total reaches ``MAX_COUNT``: the closing line shows them as numbers a reader can read."""
    for n in [999_499, 999_500, 999_999, 999_999_999, 2**31 - 1, 3 * (2**31 - 1), 10**12,
              MAX_COUNT, *(10**k - 1 for k in range(3, 16)), *(5 * 10**k for k in range(3, 15))]:
        text = short_count(n)
        assert "e" not in text, (n, text)
        number, unit = float(text.rstrip("kMGT")), text[len(text.rstrip("kMGT")):]
        scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[unit]
        assert abs(number * scale - n) <= 0.006 * n, (n, text)
