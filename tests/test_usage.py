"""Usage and cost (issue 14, item 1): the requests and tokens of the evaluated model and of
each judge step, in ``summary.usage``, the closing summary line and report.html, equal the
sum over the saved prediction rows and the judge replies; replies from the response cache
and answers reused on resume are counted apart (cached, not billed); cost from ``pricing``,
never guessed for an unpriced model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from groundscope import run_task
from groundscope.pricing import Price
from groundscope.report.model import Report
from groundscope.report.table import render_summary
from groundscope.rescore import rebuild_report
from groundscope.types import Usage
from groundscope.usage import Tokens, UsageSummary, usage_line

ROOT = Path(__file__).resolve().parents[1]
GROUNDING = ROOT / "examples" / "grounding"
PRICES = {"groundscope-sim": {"input": 2.5, "output": 10.0}}


def grounding_config(work: Path, **extra: Any) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(GROUNDING)
    cfg["simulator"]["truth"] = str(GROUNDING / "truth.json")
    return {**cfg, "work_dir": str(work), "no_timestamp": True, "pricing": PRICES, **extra}


def judge_config(work: Path, **extra: Any) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "judge_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(ROOT / "examples" / "judge")
    return {**cfg, "work_dir": str(work), "no_timestamp": True, **extra}


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts(usage: dict[str, int], requests: int = 1) -> dict[str, int]:
    return {"requests": requests, "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "reasoning_tokens": usage.get("reasoning_tokens", 0),
            "cached_tokens": usage.get("cached_tokens", 0)}


def add(total: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def billed_by_step(run_dir: Path) -> dict[str, dict[str, int]]:
    """What the run directory says was billed: each prediction row (the model step) and
    each line of a judge step's response cache (one line per reply requested)."""
    out: dict[str, dict[str, int]] = {}
    for path in (run_dir / "predictions").rglob("*.jsonl"):
        for row in jsonl(path):
            if row.get("usage"):
                add(out.setdefault("model", {}), counts(row["usage"]))
    for path in (run_dir / "cache").glob("*.jsonl"):
        step = "correctness" if path.stem == "judge" else path.stem
        for line in jsonl(path):
            p, c, _, r, k = line["completion"]["usage"]
            add(out.setdefault(step, {}), counts({"prompt_tokens": p, "completion_tokens": c,
                                                  "reasoning_tokens": r, "cached_tokens": k}))
    return out


def reviews_by_step(run_dir: Path) -> dict[str, dict[str, int]]:
    """billed + cached judge calls recorded in the review rows, per step."""
    out: dict[str, dict[str, int]] = {}
    for path in (run_dir / "reviews").rglob("*.jsonl"):
        for row in jsonl(path):
            for step, by_model in (row.get("usage") or {}).items():
                for entry in by_model.values():
                    add(out.setdefault(step, {}), entry["billed"])
                    add(out.setdefault(step, {}), entry["cached"])
    return out


def as_dicts(tokens: Tokens) -> dict[str, int]:
    return tokens.model_dump()


@pytest.fixture(scope="module")
def grounding(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Path]:
    work = tmp_path_factory.mktemp("usage_grounding")
    report = run_task(grounding_config(work))
    return report, Path(report.run_dir)


def test_grounding_usage_equals_the_rows_and_judge_replies(grounding) -> None:
    report, run_dir = grounding
    usage = report["general_vqa"].summary.usage
    billed = billed_by_step(run_dir)
    assert set(billed) == {"model", "claims", "verification", "completeness", "equivalence"}
    for step, want in billed.items():
        assert as_dicts(usage.by_step[step].billed) == {**want}, step
    assert set(usage.steps["claims"]) == {"grounding-judge"}  # keyed by the judge's model id
    assert set(usage.steps["model"]) == {"groundscope-sim"}
    # every judge call made while scoring is in a review row: billed ones and cache hits
    recorded = reviews_by_step(run_dir)
    for step in ("claims", "verification", "completeness", "equivalence"):
        entry = usage.by_step[step]
        both = as_dicts(entry.billed)
        add(both, as_dicts(entry.cached))
        assert both == recorded[step], step
    # replies the response cache served (identical requests) are apart, and were made
    assert usage.total.cached.requests == sum(e.cached.requests for e in usage.by_step.values())
    assert usage.total.billed.requests == sum(v["requests"] for v in billed.values())
    assert usage.total.billed.prompt_tokens > 0 and usage.total.billed.completion_tokens > 0


def test_report_rebuilds_the_same_usage(grounding) -> None:
    report, run_dir = grounding
    rebuilt = rebuild_report(run_dir)["general_vqa"].summary.usage
    assert rebuilt.model_dump() == report["general_vqa"].summary.usage.model_dump()
    saved = json.loads(next((run_dir / "reports").rglob("general_vqa.groundscope.json")).read_text())
    assert saved["summary"]["usage"]["total"] == rebuilt.total.model_dump(mode="json")
    assert set(saved["summary"]["usage"]["by_step"]) == set(billed_by_step(run_dir))


def test_cost_of_the_priced_model_only(grounding) -> None:
    report, _run_dir = grounding
    usage = report["general_vqa"].summary.usage
    model = usage.steps["model"]["groundscope-sim"]
    want = Price(input=2.5, output=10.0).cost(model.billed.prompt_tokens,
                                              model.billed.completion_tokens)
    assert model.cost == pytest.approx(want) and want > 0
    assert usage.total.cost == pytest.approx(want)  # the judge is not priced: not guessed
    assert usage.by_step["claims"].cost is None
    assert usage.unpriced == ["grounding-judge"]


def test_summary_line_and_page_show_the_usage(grounding) -> None:
    report, run_dir = grounding
    usage = report["general_vqa"].summary.usage
    text = render_summary(report.datasets)
    line = next(x for x in text.splitlines() if "usage:" in x)
    m = usage.steps["model"]["groundscope-sim"].billed
    assert f"model groundscope-sim {m.requests} requests" in line
    assert f"verification grounding-judge {usage.by_step['verification'].billed.requests} requests" in line
    assert f"cost {usage.total.cost:.4g}" in line and "no price for grounding-judge" in line
    page = (run_dir / "report.html").read_text()
    block = page[page.index('<div class="gs-usage">'):]
    block = block[:block.index("</div>")]
    assert "<td>verification</td><td>grounding-judge</td>" in block
    assert f'<td class="num">{usage.total.billed.prompt_tokens}</td>' in block
    assert f"{usage.total.cost:.4g}" in block and "grounding-judge" in block


def test_resumed_run_counts_reused_replies_as_cached(grounding, tmp_path: Path) -> None:
    first, run_dir = grounding
    before = first["general_vqa"].summary.usage.total
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    again = run_task(grounding_config(tmp_path, use_cache=str(copy)))
    usage = again["general_vqa"].summary.usage
    assert usage.total.billed == Tokens()  # nothing was asked of any model
    both = as_dicts(before.billed)
    add(both, as_dicts(before.cached))
    assert as_dicts(usage.total.cached) == both
    assert usage.total.cost == 0.0
    line = render_summary(again.datasets).splitlines()[-1]
    assert line.startswith("General-VQA usage: cached (not billed) ")
    assert f"{usage.total.cached.requests} requests" in line


def test_correctness_judges_counted_per_model(tmp_path: Path) -> None:
    report = run_task(judge_config(tmp_path, pricing={
        "judge-a": {"input": 1.0, "output": 1.0}, "judge-b": {"input": 1.0, "output": 1.0},
        "judge-c": {"input": 1.0, "output": 1.0}, "groundscope-sim": {"input": 0, "output": 0}}))
    run_dir = Path(report.run_dir)
    usage = report["general_vqa"].summary.usage
    assert set(usage.steps) == {"model", "correctness"}
    assert set(usage.steps["correctness"]) == {"judge-a", "judge-b", "judge-c"}
    billed = billed_by_step(run_dir)
    assert as_dicts(usage.by_step["correctness"].billed) == billed["correctness"]
    assert as_dicts(usage.by_step["model"].billed) == billed["model"]
    judged = usage.by_step["correctness"].billed
    assert usage.total.cost == pytest.approx((judged.prompt_tokens + judged.completion_tokens) / 1e6)
    assert usage.unpriced == []


def test_price_uses_cached_input_and_lists_unpriced() -> None:
    u = UsageSummary()
    u.add("model", "m", Usage(1000, 200, 1200, reasoning_tokens=50, cached_tokens=400), billed=True)
    u.add("model", "m", Usage(999, 999, 1998), billed=False)  # cached: never costs
    u.add("claims", "j", Usage(100, 10, 110), billed=True)
    u.price({"m": Price(input=2.0, output=8.0, cached_input=0.5)})
    want = (600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6
    assert u.steps["model"]["m"].cost == pytest.approx(want)
    assert u.total.cost == pytest.approx(want) and u.unpriced == ["j"]
    assert u.by_model["m"].billed.reasoning_tokens == 50
    assert u.by_model["m"].cached.requests == 1
    line = usage_line(u) or ""
    assert "model m 1 request, 1k in (400 cached) / 200 out (50 reasoning)" in line
    assert "no price for j" in line
    u.price({})
    assert u.total.cost is None and u.unpriced == ["j", "m"]



def test_score_counts_its_judge_calls_from_the_cache_as_cached(grounding, tmp_path: Path) -> None:
    from groundscope.rescore import rescore_run

    first, run_dir = grounding
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    usage = rescore_run(copy)["general_vqa"].summary.usage
    was = first["general_vqa"].summary.usage
    assert usage.by_step["model"].billed == was.by_step["model"].billed  # the saved answers
    for step in ("claims", "verification", "completeness", "equivalence"):
        assert usage.by_step[step].billed.requests == 0, step  # every reply from the cache
        assert usage.by_step[step].cached.requests == (was.by_step[step].billed.requests
                                                       + was.by_step[step].cached.requests), step
