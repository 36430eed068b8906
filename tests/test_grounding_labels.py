"""Human labels for grounding: the labelled example (examples/grounding_labels.yaml) run against
the simulator gives the judge-vs-human agreement computed by hand; `groundscope report`
rebuilds the same figures; bad labels are one-line errors naming file:line: field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from groundscope import run_task
from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.rescore import rebuild_report
from groundscope.runner import iter_samples, plan_dataset

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# The simulator's verdicts on the planted answers (examples/grounding/truth.json) and the
# human labels of examples/grounding/labelled/labelled.jsonl, as (human, judge) hallucinated:
#   scene-dog (T, T)  scene-beach (T, T)  scene-car (T, F)  scene-museum (T, T)
#   dog-1 (F, F)  dog-3 (T, T)  umbrella (F, F)  tower-2 (T, T)  wheels (F, F)
#   scene-city: no claims, so no judge verdict: labelled but not scored (1).
# Confusion (rows human, columns judge; hallucinated first): [[5, 1], [0, 3]], n = 9.
# accuracy p_o = (5 + 3) / 9 = 8/9
# chance p_e = ((5+1)(5+0) + (0+3)(1+3)) / 81 = (30 + 12) / 81 = 42/81
# kappa = (72/81 - 42/81) / (1 - 42/81) = 30/39 = 10/13
# Claims: 4 labelled; 3 match a judge claim ("The dog wears a collar." was never claimed):
# the red ball (contradicted / contradicted) and the car is red (supported / supported)
# agree, the car is parked (human contradicted, judge not_determinable) does not: 2 of 3.
ACCURACY, KAPPA = 8 / 9, 10 / 13


def labelled_config(work_dir: Path) -> dict[str, Any]:
    cfg = yaml.safe_load((EXAMPLES / "grounding_labels.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(EXAMPLES / "grounding" / "labelled")
    cfg["simulator"]["truth"] = str(EXAMPLES / "grounding" / "truth.json")
    return {**cfg, "work_dir": str(work_dir), "no_timestamp": True}


def test_judge_vs_human_on_the_labelled_example_equals_the_hand_computed_figures(
        tmp_path: Path) -> None:
    rep = run_task(labelled_config(tmp_path)).dataset("general_vqa")
    rows = {r.metric: r for r in rep.metrics}
    assert rows["grounding_human_accuracy"].score == pytest.approx(ACCURACY)
    assert rows["grounding_human_kappa"].score == pytest.approx(KAPPA)
    assert rows["grounding_human_accuracy"].num == 9
    human = rep.extra["grounding"]["human"]
    assert human["confusion"] == {"rows": "human", "columns": "judge",
                                  "labels": ["hallucinated", "not hallucinated"],
                                  "matrix": [[5, 1], [0, 3]]}
    assert human["labelled_not_scored"] == 1
    assert human["claims"] == {"labelled": 4, "matched": 3, "agree": 2, "accuracy": 2 / 3}
    # the labels are in the saved reviews, where `groundscope report` reads them back
    reviews = [json.loads(line) for p in (tmp_path / "reviews").rglob("*.jsonl")
               for line in p.read_text().splitlines()]
    car = next(r for r in reviews if r["sample_id"] == "scene-car")
    assert car["detail"]["human_hallucinated"] is True
    assert [(c["claim"], c.get("human_verdict")) for c in car["detail"]["claims"]] == [
        ("The car is red.", "supported"), ("Two wheels are visible.", None),
        ("The car is parked.", "contradicted")]
    rebuilt = rebuild_report(tmp_path)
    again = {r.metric: r.score for r in rebuilt.dataset("general_vqa").metrics}
    assert again["grounding_human_kappa"] == pytest.approx(KAPPA)


def test_labels_given_in_an_answers_file_give_the_same_agreement(tmp_path: Path) -> None:
    """The labels may come with the answers (``--answers``) instead of the records: the
    labelled example's answers, graded from a file that carries its labels against the
    records stripped of theirs, give the hand-computed figures."""
    first = run_task(labelled_config(tmp_path / "asked"))
    source = EXAMPLES / "grounding" / "labelled" / "labelled.jsonl"
    records = [json.loads(x) for x in source.read_text().splitlines()]
    labels = {r["id"]: {k: v for k, v in r.items() if k.startswith("human_")} for r in records}
    data = tmp_path / "data"
    data.mkdir()
    for r in records:  # the records without labels; media paths valid from here
        part = r["messages"][0]["content"][1]["image_url"]
        part["url"] = str((source.parent / part["url"]).resolve())
    (data / "labelled.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if not k.startswith("human_")}) + "\n"
        for r in records))
    saved = [json.loads(x) for p in (Path(first.run_dir) / "predictions").rglob("*.jsonl")
             for x in p.read_text().splitlines()]
    answers = tmp_path / "answers.jsonl"  # in another order than the dataset's
    answers.write_text("".join(json.dumps({"id": row["sample_id"], "prediction": row["prediction"],
                                           **labels[row["sample_id"]]}) + "\n"
                               for row in reversed(saved)))
    cfg = labelled_config(tmp_path / "graded")
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(data)
    cfg["media_roots"] = [str(EXAMPLES / "media")]
    rep = run_task({**cfg, "eval_type": "answers", "answers": str(answers)}).dataset("general_vqa")
    rows = {r.metric: r for r in rep.metrics}
    assert rows["grounding_human_accuracy"].score == pytest.approx(ACCURACY)
    assert rows["grounding_human_kappa"].score == pytest.approx(KAPPA)
    assert rep.extra["grounding"]["human"]["confusion"]["matrix"] == [[5, 1], [0, 3]]


def test_without_labels_there_is_no_human_row(tmp_path: Path) -> None:
    cfg = labelled_config(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    lines = (EXAMPLES / "grounding" / "labelled" / "labelled.jsonl").read_text().splitlines()
    unlabelled = [{k: v for k, v in json.loads(x).items() if not k.startswith("human_")}
                  for x in lines[:3]]
    for r in unlabelled:  # the media paths stay valid from here
        part = r["messages"][0]["content"][1]["image_url"]
        part["url"] = str((EXAMPLES / "grounding" / "labelled" / part["url"]).resolve())
    (data / "plain.jsonl").write_text("".join(json.dumps(r) + "\n" for r in unlabelled))
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(data)
    cfg["media_roots"] = [str(EXAMPLES / "media")]
    rep = run_task({**cfg, "work_dir": str(tmp_path / "run")}).dataset("general_vqa")
    assert "grounding_human_accuracy" not in {r.metric for r in rep.metrics}
    assert "human" not in rep.extra["grounding"]


def bad_records(tmp_path: Path, extra: dict[str, Any], suffix: str = "jsonl") -> list[str]:
    record = {"id": "a", "messages": [{"role": "user", "content": "What is shown?"}], **extra}
    path = tmp_path / f"d.{suffix}"
    if suffix == "jsonl":
        path.write_text(json.dumps(record) + "\n")
    else:
        messages = json.dumps(record["messages"])
        path.write_text("id\tmessages\thuman_hallucinated\thuman_claims\n"
                        f"a\t{messages}\t{extra.get('human_hallucinated', '')}\t"
                        f"{extra.get('human_claims', '')}\n")
    cfg = load_config({"datasets": ["general_vqa"], "eval_type": "mock",
                       "dataset_args": {"general_vqa": {"local_path": str(path)}}})
    items = [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vqa"), strict=False)]
    return [str(s) for s in items if isinstance(s, RecordError)] or \
        [json.dumps(dict(s.metadata)) for s in items]


@pytest.mark.parametrize(("extra", "field", "problem"), [
    ({"human_hallucinated": "maybe"}, "human_hallucinated", "expected true or false, got 'maybe'"),
    ({"human_hallucinated": 2}, "human_hallucinated", "expected true or false, got 2"),
    ({"human_hallucinated": ["yes"]}, "human_hallucinated", "expected true or false, got list"),
    ({"human_claims": {"claim": "x"}}, "human_claims", "expected a list"),
    ({"human_claims": [{"claim": "x"}]}, "human_claims[0]", 'expected {"claim"'),
    ({"human_claims": [{"claim": "x", "verdict": "yes"}]}, "human_claims[0].verdict",
     "got 'yes'"),
    ({"human_claims": [{"claim": "", "verdict": "supported"}]}, "human_claims[0].claim",
     "non-empty"),
    ({"human_claims": [{"claim": "x", "verdict": "supported"}] * 65}, "human_claims",
     "65 labelled claims, over the limit of 64"),
])
def test_bad_labels_are_one_line_errors(tmp_path: Path, extra: dict[str, Any], field: str,
                                        problem: str) -> None:
    (error,) = bad_records(tmp_path, extra)
    assert error.startswith(f"{tmp_path / 'd.jsonl'}:1: {field}: ") and problem in error
    assert "\n" not in error


def test_labels_in_tsv_cells(tmp_path: Path) -> None:
    claims = json.dumps([{"claim": "A dog.", "verdict": "supported"}])
    (meta,) = bad_records(tmp_path, {"human_hallucinated": "No", "human_claims": claims}, "tsv")
    assert json.loads(meta) == {"human_hallucinated": False,
                                "human_claims": [{"claim": "A dog.", "verdict": "supported"}]}
    (error,) = bad_records(tmp_path, {"human_claims": "[not json"}, "tsv")
    assert error.startswith(f"{tmp_path / 'd.tsv'}:2: human_claims: expected a JSON array")
