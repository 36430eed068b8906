"""Agreement statistics (hand-computed examples) and the judge part of a dataset report."""

from __future__ import annotations

import pytest

from groundscope.config import JudgeConfig
from groundscope.report.judge import with_judge_stats
from groundscope.report.model import DatasetReport, MetricRow, Summary
from groundscope.report.table import render_summary, render_table
from groundscope.scoring.agreement import (
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    human_label,
    pairwise_agreement,
)
from groundscope.scoring.judge import Decision, Outcome, Vote, read_decision
from groundscope.types import Score, ScoreStatus

# 10 samples, (human, judge): 4x both correct, 1x human correct / judge incorrect,
# 2x human incorrect / judge correct, 3x both incorrect.
PAIRS = [(True, True)] * 4 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 3


def test_confusion_and_kappa_by_hand() -> None:
    assert confusion_matrix(PAIRS) == [[4, 1], [2, 3]]
    # p_o = 7/10; human: 5 correct / 5 incorrect; judge: 6 / 4
    # p_e = (5*6 + 5*4) / 100 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert cohen_kappa(PAIRS) == pytest.approx(0.4)


def test_kappa_edge_cases() -> None:
    assert cohen_kappa([]) is None
    assert cohen_kappa([(True, True)] * 3) is None  # no variation: chance agreement is 1
    assert cohen_kappa([(True, False), (False, True)]) == pytest.approx(-1.0)
    assert cohen_kappa([(True, True), (False, False)]) == pytest.approx(1.0)


def test_judge_agreement_by_hand() -> None:
    votes = [[True, True, True], [True, True, False], [False, False, False], [True, False]]
    # pairs agreeing per sample: 3/3, 1/3, 3/3, 0/1 -> mean (1 + 1/3 + 1 + 0) / 4 = 7/12
    assert pairwise_agreement(votes) == pytest.approx(7 / 12)
    assert pairwise_agreement([[True], []]) is None
    # Fleiss over the 3 full panels: P_i = 1, 1/3, 1 -> P = 7/9; share "correct" = 5/9
    # P_e = (5/9)^2 + (4/9)^2 = 41/81; kappa = (63/81 - 41/81) / (40/81) = 22/40 = 0.55
    assert fleiss_kappa(votes) == pytest.approx(0.55)
    # chance-level agreement is 0: shares 3, 2, 1 of 3 -> P = 5/9 = P_e
    assert fleiss_kappa([[True] * 3, [True, True, False], [False, False, True]]) == pytest.approx(0)
    assert fleiss_kappa([[True, True], [True, True]]) is None


@pytest.mark.parametrize(("value", "expected"), [
    ("correct", True), ("Incorrect", False), (" YES ", True), ("no", False), ("1", True),
    ("0", False), (1, True), (0, False), (True, True), (False, False), ("true", True),
    ("unsure", None), ("", None), (None, None), (2, None), ([1], None),
])
def test_human_label_values(value, expected) -> None:
    assert human_label(value) is expected


def _judged(sid: str, verdict: str | None, votes: list[str | None], human: str | None = None,
            failed: str | None = None) -> Score:
    detail: dict = {"verdict": verdict, "votes": [{"judge": f"j{i}", "verdict": v}
                                                  for i, v in enumerate(votes)]}
    if human:
        detail["human_label"] = human
    if failed:
        detail["judge_failed"] = failed
    status = ScoreStatus.JUDGE_FAILED if verdict is None else ScoreStatus.OK
    values = {} if verdict is None else {"accuracy": 1.0 if verdict == "A" else 0.0}
    return Score(sid, "accuracy", status, values=values, detail=detail)


def _report(subsets: list[str]) -> DatasetReport:
    return DatasetReport(model="m", dataset="general_vqa", pretty_name="General-VQA",
                         primary_metric="accuracy", subsets=subsets,
                         summary=Summary(requested=6, succeeded=6),
                         metrics=[MetricRow(metric="accuracy", subset=s, num=2, score=0.5,
                                            excluded=1) for s in subsets])


def test_report_gets_agreement_human_rows_and_failure_counts() -> None:
    judge = JudgeConfig(strategy="llm", models=[{"model_id": "j", "api_url": "http://x/v1"},
                                                {"model_id": "j", "api_url": "http://y/v1"}])
    scores = {
        "a": [_judged("1", "A", ["A", "A"], "correct"), _judged("2", "B", ["B", "B"], "correct"),
              _judged("3", None, ["A", "B"], "incorrect", failed="tie between judges")],
        "b": [_judged("4", "B", ["B", "B"], "incorrect"), _judged("5", "A", ["A", "A"]),
              _judged("6", None, [None, None], failed="no judge gave a verdict")],
    }
    rep = with_judge_stats(_report(["a", "b"]), judge, scores)
    extra = rep.extra["judge"]
    assert extra["models"] == ["j", "j#2"] and extra["strategy"] == "llm"
    assert (extra["judged"], extra["judge_failed"]) == (6, 2)
    assert extra["failures"] == {"tie between judges": 1, "no judge gave a verdict": 1}
    # votes with 2 judges: samples 1,2,3,4,5 -> agree, agree, disagree, agree, agree = 0.8
    assert extra["agreement"]["value"] == pytest.approx(0.8)
    assert extra["agreement"]["samples"] == 5
    # human vs judge where both exist: (T,T), (T,F), (F,F) -> 2/3; sample 3 failed, 5 unlabelled
    human = extra["human"]
    assert human["samples"] == 3 and human["accuracy"] == pytest.approx(2 / 3)
    assert human["confusion"]["matrix"] == [[1, 1], [0, 1]]
    # p_o = 2/3; human 2T/1F, judge 1T/2F: p_e = (2*1 + 1*2)/9 = 4/9 -> (2/3-4/9)/(5/9) = 0.4
    assert human["cohen_kappa"] == pytest.approx(0.4)
    rows = {(r.metric, r.subset): r for r in rep.metrics}
    assert rows[("judge_agreement", "a")].score == pytest.approx(2 / 3)
    assert rows[("judge_agreement", "OVERALL")].num == 5
    assert rows[("judge_human_accuracy", "OVERALL")].score == pytest.approx(2 / 3)
    assert ("judge_human_kappa", "b") in rows
    table = render_table([rep])
    assert "Judge agreement ↑" in table and "Judge vs human ↑" in table
    assert "judged 6, judge_failed 2" in render_summary([rep])


def test_no_judge_no_change() -> None:
    rep = _report(["a"])
    assert with_judge_stats(rep, None, {}) is rep
    rule = JudgeConfig(strategy="rule")
    assert with_judge_stats(rep, rule, {"a": [_judged("1", "A", ["A"])]}) is rep


def test_a_decision_reads_back_as_the_panel_wrote_it() -> None:
    """report/judge.py reads what scoring/judge.py's Outcome.detail writes through
    scoring.judge.read_decision, the writer's own reader."""
    votes = (Vote("j", "A", "yes"), Vote("j#2", "B", "no"), Vote("j#3", None, error="no JSON"))
    saved = Outcome("A", votes, human=False).detail()
    assert read_decision(saved) == Decision(None, (True, False), True, False)
    failed = Outcome(None, votes[:2], "tie between judges").detail()
    assert read_decision(failed) == Decision("tie between judges", (True, False), None, None)


def test_a_tampered_saved_decision_is_counted_not_a_crash() -> None:
    """A reviews file is untrusted: a verdict or human label of the wrong type reads as none
    (the report crashed with 'unhashable type: list' on a list verdict before)."""
    judge = JudgeConfig(strategy="llm", models=[{"model_id": "j", "api_url": "http://x/v1"}])
    bad = Score("1", "accuracy", ScoreStatus.OK, values={"accuracy": 1.0},
                detail={"verdict": ["A"], "votes": ["A", {"verdict": ["B"]}, {"verdict": "A"}],
                        "human_label": {"x": 1}})
    extra = with_judge_stats(_report(["a"]), judge, {"a": [bad, _judged("2", "A", ["A"], "correct")]}
                             ).extra["judge"]
    assert (extra["judged"], extra["judge_failed"], extra["human"]["samples"]) == (2, 0, 1)
    odd = {"verdict": "A", "votes": 5, "judge_failed": ""}
    assert read_decision(odd) == Decision(None, (), True, None)
