"""The grounding, completeness and consistency scorers against the simulator's grounding mode
on loopback: empty claims, unparseable judge output, votes, and consistency's format-vs-meaning
decisions (with the judge calls they make, or do not make)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from groundscope.config import JudgeConfig
from groundscope.metrics import MetricAccumulator
from groundscope.scoring import build_scorers
from groundscope.scoring.base import ScoringContext
from groundscope.scoring.grounding_prompt import (
    CLAIMS_MARKER,
    EQUIVALENCE_MARKER,
    VERIFY_MARKER,
)
from groundscope.scoring.groups import GroupStage
from groundscope.simulator import GroundingResponder, GroundTruth, SimulatorServer
from groundscope.types import (
    Completion,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Prediction,
    PredictionStatus,
    Sample,
    Score,
    ScoreStatus,
    TextPart,
)

MEDIA = Path(__file__).resolve().parents[1] / "examples" / "media"
QUESTION = "Describe the picture."


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> GroundTruth:
    path = tmp_path_factory.mktemp("truth") / "truth.json"
    path.write_text(json.dumps({
        "images": {"dog": str(MEDIA / "dog.jpg")},
        "facts": {"dog": {"supported": ["The dog is brown.", "The sky is blue."],
                          "contradicted": ["The dog is asleep."]}},
        "answers": [
            {"image": "dog", "question": QUESTION, "answer": "A brown dog asleep under a blue sky.",
             "claims": ["The dog is brown.", "The dog is asleep.", "The sky is blue.",
                        "The dog is called Rex."]},
            {"image": "dog", "question": QUESTION, "answer": "I cannot say.", "claims": []},
            {"image": "dog", "question": QUESTION, "answer": "A dog and grass.",
             "covers": ["a dog", "grass"]},
        ],
        "equivalent": [["red", "It is red."]],
        "unparseable": ["Garbled on purpose."],
    }))
    return GroundTruth.load(path)


def sample(sid: str = "s1", question: str = QUESTION, **meta: Any) -> Sample:
    image = MediaRef(Modality.IMAGE, str(MEDIA / "dog.jpg"))
    message = Message("user", (TextPart(question), MediaPart(image)))
    target = tuple(meta.pop("target", ()))
    return Sample(sid, "general_vqa", "t", (message,), Origin(Path("d.jsonl"), 1),
                  target=target, question=question, metadata=meta)


def pred(text: str, sid: str = "s1") -> Prediction:
    return Prediction(sid, "h", PredictionStatus.OK, Completion(text))


def judge(url: str, **grounding: Any) -> JudgeConfig:
    return JudgeConfig(models=[{"model_id": "grounder", "api_url": url}],
                       grounding=grounding or None, max_repairs=2)


async def _score(cfg: JudgeConfig, metric: str, items: Sequence[tuple[Sample, Prediction]],
                 tmp_path: Path) -> tuple[list[Score], list[Score]]:
    ctx = ScoringContext(run_dir=tmp_path, judge=cfg, judge_concurrency=4)
    try:
        (scorer,) = build_scorers([metric], ctx)
        scores = list(await asyncio.gather(*(scorer.score(s, p) for s, p in items)))
        stage = GroupStage([scorer])
        for s in scores:
            stage.collect("t", s)
        groups = [score for _, score, _ in await stage.finish()]
        return scores, groups
    finally:
        await ctx.aclose()


def run(cfg: JudgeConfig, metric: str, items: Sequence[tuple[Sample, Prediction]],
        tmp_path: Path) -> tuple[list[Score], list[Score]]:
    return asyncio.run(_score(cfg, metric, items, tmp_path))


def test_claims_verified_one_per_request_with_reasons(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        (score,), _ = run(judge(url), "grounding",
                          [(sample(), pred("A brown dog asleep under a blue sky."))], tmp_path)
    assert score.status is ScoreStatus.OK
    verdicts = [(c["claim"], c["verdict"]) for c in score.detail["claims"]]
    assert verdicts == [("The dog is brown.", "supported"), ("The dog is asleep.", "contradicted"),
                        ("The sky is blue.", "supported"),
                        ("The dog is called Rex.", "not_determinable")]
    assert all(c["reason"] for c in score.detail["claims"])
    assert score.values == {"grounding": 0.5, "grounding_claims": 0.5, "hallucination": 0.5,
                            "hallucinated_answers": 1.0}
    assert score.weights == {"grounding_claims": 4.0, "hallucination": 4.0}
    assert responder.calls[CLAIMS_MARKER] == 1 and responder.calls[VERIFY_MARKER] == 4


def test_verification_requests_carry_the_image(truth: GroundTruth, tmp_path: Path) -> None:
    server = SimulatorServer(responders=[GroundingResponder(truth)], keep_bodies=True)
    with server as url:
        run(judge(url), "grounding", [(sample(), pred("A brown dog asleep under a blue sky."))],
            tmp_path)
        bodies = server.bodies()
    verify = [b for b in bodies if isinstance(b["messages"][0]["content"], list)]
    assert len(verify) == 4 and len(bodies) == 5  # the extraction request is text only
    assert all(b["messages"][0]["content"][0]["text"].startswith(VERIFY_MARKER) for b in verify)
    for body in verify:
        parts = body["messages"][0]["content"]
        assert [p["type"] for p in parts] == ["text", "image_url"]
        assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


@pytest.mark.parametrize("answer", ["I cannot say.", "", "   "])
def test_answers_without_claims_are_counted_apart_not_zero(truth: GroundTruth, tmp_path: Path,
                                                           answer: str) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        (score,), _ = run(judge(url), "grounding", [(sample(), pred(answer))], tmp_path)
    assert score.status is ScoreStatus.NO_ANSWER and score.detail["no_claims"] is True
    assert dict(score.values) == {}
    assert responder.calls[CLAIMS_MARKER] == (1 if answer.strip() else 0)
    acc = MetricAccumulator()
    acc.add("t", score, ("grounding", "grounding_claims"))
    assert {(r.num, r.excluded) for r in acc.results()} == {(0, 1)}


def test_unparseable_output_is_retried_then_judge_failed(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth, malformed_tries=99)
    with SimulatorServer(responders=[responder]) as url:
        (score,), _ = run(judge(url), "grounding", [(sample(), pred("A dog."))], tmp_path)
    assert score.status is ScoreStatus.JUDGE_FAILED and dict(score.values) == {}
    assert responder.calls[CLAIMS_MARKER] == 3  # one try + max_repairs (2) repairs
    assert score.detail["judge_failed"].startswith("claim extraction: no usable claims reply after 3")
    acc = MetricAccumulator()
    acc.add("t", score, ("grounding",))
    (row,) = acc.results()
    assert row.num == 0 and row.excluded == 1  # excluded, never a 0


def test_garbled_extraction_from_the_truth_file_fails_the_answer(truth: GroundTruth,
                                                                 tmp_path: Path) -> None:
    with SimulatorServer(responders=[GroundingResponder(truth)]) as url:
        (score,), _ = run(judge(url), "grounding", [(sample(), pred("Garbled on purpose."))],
                          tmp_path)
    assert score.status is ScoreStatus.JUDGE_FAILED and score.detail["stage"] == "claims"


def test_one_bad_reply_is_repaired(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth, malformed_tries=1)
    with SimulatorServer(responders=[responder]) as url:
        (score,), _ = run(judge(url), "grounding",
                          [(sample(), pred("A brown dog asleep under a blue sky."))], tmp_path)
    assert score.status is ScoreStatus.OK and score.values["grounding"] == 0.5
    assert responder.calls[CLAIMS_MARKER] == 2 and responder.calls[VERIFY_MARKER] == 8


def test_votes_and_policy(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        cfg = judge(url, votes=3, not_determinable="excluded")
        (score,), _ = run(cfg, "grounding", [(sample(), pred("A brown dog asleep under a blue sky."))],
                          tmp_path)
    assert responder.calls[VERIFY_MARKER] == 12  # 4 claims x 3 votes, each its own request
    assert all(len(c["votes"]) == 3 for c in score.detail["claims"])
    assert score.values["grounding"] == pytest.approx(2 / 3)  # Rex is left out: 2 of 3
    assert score.weights["grounding_claims"] == 3.0


def test_completeness_matches_elements_one_to_one(truth: GroundTruth, tmp_path: Path) -> None:
    items = [(sample("a", elements=["a dog", "grass", "the sky"]), pred("A dog and grass.", "a")),
             (sample("b", elements=["a dog"]), pred("", "b")),
             (sample("c"), pred("A dog and grass.", "c"))]
    with SimulatorServer(responders=[GroundingResponder(truth)]) as url:
        (a, b, c), _ = run(judge(url), "completeness", items, tmp_path)
    assert a.values["completeness"] == pytest.approx(2 / 3)
    assert [e["covered"] for e in a.detail["elements"]] == [True, True, False]
    assert b.values["completeness"] == 0.0  # an empty answer mentions nothing
    assert c.status is ScoreStatus.NO_ANSWER  # no elements listed: excluded


def group_items(answers: Sequence[str], group: str = "g", target: Sequence[str] = ()
                ) -> list[tuple[Sample, Prediction]]:
    return [(sample(f"{group}#p{i}", f"Paraphrase {i}?", group=group, target=target),
             pred(a, f"{group}#p{i}")) for i, a in enumerate(answers)]


def test_two_and_2_are_consistent_without_a_judge_call(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        members, (group,) = run(judge(url), "consistency",
                                group_items(["2", "two", "Two."], target=["2"]), tmp_path)
    assert all(m.status is ScoreStatus.OK and m.extracted == "2" for m in members)
    assert group.status is ScoreStatus.OK and group.sample_id == "group:g"
    assert group.values == {"consistency": 1.0, "consistent_correct": 1.0}
    assert responder.calls[EQUIVALENCE_MARKER] == 0


def test_yes_and_no_are_inconsistent_without_a_judge_call(truth: GroundTruth,
                                                          tmp_path: Path) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        _, (group,) = run(judge(url), "consistency",
                          group_items(["Yes.", "yes", "No"], target=["yes"]), tmp_path)
    assert group.values["consistency"] == pytest.approx(1 / 3)  # 1 of 3 pairs agree
    assert group.values["consistent_correct"] == 0.0
    assert [p["by"] for p in group.detail["pairs"]] == ["closed form"]
    assert responder.calls[EQUIVALENCE_MARKER] == 0


def test_free_form_answers_are_compared_by_meaning(truth: GroundTruth, tmp_path: Path) -> None:
    responder = GroundingResponder(truth)
    with SimulatorServer(responders=[responder]) as url:
        _, groups = run(judge(url), "consistency",
                        group_items(["red", "It is red."], "same", ["red"])
                        + group_items(["red", "blue paint"], "differ", ["red"])
                        + group_items(["red"], "alone"), tmp_path)
    by_id = {g.sample_id: g for g in groups}
    assert by_id["group:same"].values == {"consistency": 1.0, "consistent_correct": 1.0}
    assert by_id["group:differ"].values == {"consistency": 0.0, "consistent_correct": 0.0}
    assert by_id["group:alone"].status is ScoreStatus.NO_ANSWER  # one answer: nothing to compare
    pair = by_id["group:same"].detail["pairs"][0]
    assert pair["by"] == "judge" and pair["equivalent"] is True and pair["reason"]
    # "red" vs "It is red." is asked once for agreement and reused for correctness (cache).
    assert responder.calls[EQUIVALENCE_MARKER] == 2


def test_a_failed_equivalence_check_fails_the_group(truth: GroundTruth, tmp_path: Path) -> None:
    with SimulatorServer(responders=[GroundingResponder(truth, malformed_tries=99)]) as url:
        _, (group,) = run(judge(url), "consistency", group_items(["red", "It is red."]), tmp_path)
    assert group.status is ScoreStatus.JUDGE_FAILED and "consistency" not in group.values
