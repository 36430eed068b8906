"""Grounding metrics, the pure parts: normalisation, per-answer tallies, matching, agreement,
the strict reply contracts, paraphrase expansion, micro metrics in the accumulator, config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from groundscope.config import load_config
from groundscope.dataset import load_samples
from groundscope.errors import ConfigError, RecordError
from groundscope.metrics import MetricAccumulator
from groundscope.scoring import metric_names
from groundscope.scoring.consistency import agreement
from groundscope.scoring.grounding import match_elements, tally
from groundscope.scoring.grounding_prompt import (
    claims_messages,
    equivalence_messages,
    parse_check,
    parse_claims,
    parse_covered,
    parse_equivalence,
    quoted,
)
from groundscope.scoring.json_reply import ReplyError
from groundscope.scoring.normalise import normalise_answer, same_answer
from groundscope.scoring.verification import majority_verdict
from groundscope.types import Score, ScoreStatus

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("a", "b"), [
    ("2", "two"), ("Two.", "2"), ("twenty-one", "21"), ("The dog", "dog"), ("YES!", "yes"),
    ("Yeah, it is.", "yes"), ("No.", "nope"), ("1,000", "one thousand"), ("Red car", "red car."),
])
def test_format_differences_normalise_alike(a: str, b: str) -> None:
    assert normalise_answer(a) == normalise_answer(b)
    assert same_answer(normalise_answer(a), normalise_answer(b)) is True


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("yes", "no", False), ("Yes.", "No, there isn't.", False), ("2", "3", False),
    ("two", "three", False), ("2", "2 wheels", None), ("red", "it is red", None),
])
def test_closed_forms_decide_without_a_judge(a: str, b: str, expected: bool | None) -> None:
    assert same_answer(normalise_answer(a), normalise_answer(b)) is expected


def test_tally_under_each_not_determinable_policy() -> None:
    verdicts = ["supported", "supported", "contradicted", "not_determinable"]
    values, weights, counts = tally(verdicts, "unsupported")
    assert values["grounding"] == 0.5 and values["hallucination"] == 0.5
    assert values["hallucinated_answers"] == 1.0 and weights["grounding_claims"] == 4
    assert counts["contradicted"] == 1 and counts["not_determinable"] == 1
    values, weights, _ = tally(verdicts, "excluded")
    assert values["grounding"] == pytest.approx(2 / 3) and weights["hallucination"] == 3
    values, _, _ = tally(verdicts, "supported")
    assert values["grounding"] == 0.75 and values["hallucinated_answers"] == 1.0
    values, _, _ = tally(["supported", "not_determinable"], "unsupported")
    assert values["hallucinated_answers"] == 0.0  # answer level: contradicted claims only
    assert tally([], "unsupported") is None
    assert tally(["not_determinable"], "excluded") is None


def test_majority_vote_is_strict_and_conservative() -> None:
    s, c, n = ("supported", "r1"), ("contradicted", "r2"), ("not_determinable", "r3")
    assert majority_verdict([s, s, c]) == ("supported", "r1")
    assert majority_verdict([s, c, n])[0] == "not_determinable"
    assert majority_verdict([s, c])[0] == "not_determinable"
    assert majority_verdict([c]) == ("contradicted", "r2")


def test_elements_match_one_to_one() -> None:
    expected = ["a dog", "grass", "a dog", "the sky"]
    matches, unknown = match_elements(expected, ["a dog", "A dog", "a dog", "Sky", "a cat"])
    assert [m["covered"] for m in matches] == [True, False, True, True]
    assert unknown == ["a dog", "a cat"]  # a third "a dog" has nothing left to match


def test_agreement_is_the_share_of_agreeing_pairs() -> None:
    assert agreement({"a": 3}, {}) == 1.0
    assert agreement({"a": 1, "b": 1}, {("a", "b"): False}) == 0.0
    assert agreement({"a": 2, "b": 2}, {("a", "b"): False}) == pytest.approx(2 / 6)
    assert agreement({"a": 2, "b": 2}, {("a", "b"): True}) == 1.0


@pytest.mark.parametrize("reply", [
    "no json here", '{"claims": "The dog is brown."}', '{"claims": [1, 2]}', '{"facts": []}',
])
def test_claims_contract_is_strict(reply: str) -> None:
    with pytest.raises(ReplyError):
        parse_claims(reply)


def test_replies_bind_to_the_last_object_and_forgive_spelling() -> None:
    text = '<think>{"claims": ["draft"]}</think> {"claims": ["x"]} then {"claims": ["The sky is blue."]}'
    assert parse_claims(text) == ("The sky is blue.",)
    assert parse_check('{"verdict": "SUPPORTED", "reason": "r"}').verdict == "supported"
    assert parse_check('{"verdict": "not-determinable"}').verdict == "not_determinable"
    for bad in ('{"verdict": "partial"}', '{"verdict": true}', '{"reason": "r"}'):
        with pytest.raises(ReplyError):
            parse_check(bad)
    assert parse_covered('{"covered": []}') == []
    assert parse_equivalence('{"equivalent": false, "reason": "differ"}').equivalent is False
    with pytest.raises(ReplyError):
        parse_equivalence('{"equivalent": "yes"}')


def test_requests_quote_their_inputs_verbatim() -> None:
    (msg,) = claims_messages("How many <b>wheels</b>?", "Two\nwheels.")
    assert isinstance(msg.content, str)
    assert quoted(msg.content, "question") == ["How many <b>wheels</b>?"]
    assert quoted(msg.content, "answer") == ["Two\nwheels."]
    (msg,) = equivalence_messages("Q?", "2", "two")
    assert (quoted(msg.content, "answer_1"), quoted(msg.content, "answer_2")) == (["2"], ["two"])


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_paraphrases_expand_into_samples_on_the_same_media(tmp_path: Path) -> None:
    image = str(ROOT / "examples" / "media" / "dog.jpg")
    rows = [
        {"id": "q", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Is there a dog?"}, {"type": "image_url", "image_url": image}]}],
         "answer": "yes", "paraphrases": ["Do you see a dog?", "Is a dog shown?"]},
        {"messages": [{"role": "user", "content": "How many legs?<image 1>"}], "image_1": image,
         "group": "legs", "paraphrases": '["Count the legs."]'},
    ]
    samples = [s for _, s in load_samples("general_vqa", _write(tmp_path, rows), ["data"])]
    assert [s.id for s in samples] == ["q#p0", "q#p1", "q#p2", "data:2#p0", "data:2#p1"]
    assert [s.question for s in samples[:3]] == ["Is there a dog?", "Do you see a dog?",
                                                 "Is a dog shown?"]
    assert {s.metadata["group"] for s in samples[:3]} == {"q"}
    assert {s.metadata["group"] for s in samples[3:]} == {"legs"}
    assert all(len(s.media()) == 1 and s.target in (("yes",), ()) for s in samples)
    assert samples[4].question == "Count the legs." and "paraphrases" not in samples[4].metadata


@pytest.mark.parametrize(("field", "value"), [
    ("paraphrases", "not a list"), ("paraphrases", [1]), ("elements", ["dog", ""]),
    ("elements", "[broken"),
])
def test_bad_list_fields_are_bad_records(tmp_path: Path, field: str, value: object) -> None:
    rows = [{"messages": [{"role": "user", "content": "Q?"}], field: value}]
    (item,) = [s for _, s in load_samples("general_vqa", _write(tmp_path, rows), ["data"])]
    assert isinstance(item, RecordError) and item.field == field


def _ratio(v: float, w: float) -> Score:
    return Score("s", "grounding", ScoreStatus.OK, {"grounding_claims": v, "grounding": v},
                 weights={"grounding_claims": w})


def test_micro_metrics_pool_claims_not_answers() -> None:
    acc = MetricAccumulator(["a", "b"])
    acc.add("a", _ratio(1 / 4, 4), ("grounding", "grounding_claims"))  # 1 of 4 claims supported
    acc.add("a", _ratio(1.0, 1), ("grounding", "grounding_claims"))  # 1 of 1
    acc.add("b", _ratio(2 / 3, 3), ("grounding", "grounding_claims"))
    acc.add("b", Score("s", "grounding", ScoreStatus.NO_ANSWER), ("grounding", "grounding_claims"))
    res = {(r.metric, r.subset): r for r in acc.results(seed=1)}
    assert res[("grounding", "a")].score == pytest.approx(0.625)  # macro: mean of 1/4 and 1
    assert res[("grounding_claims", "a")].score == pytest.approx(2 / 5)  # micro: 2 of 5 claims
    assert res[("grounding_claims", "b")].excluded == 1 and res[("grounding_claims", "b")].num == 1
    overall = res[("grounding_claims", "OVERALL")]
    assert overall.score == pytest.approx(4 / 8) and overall.num == 3
    assert overall.ci_low is not None and overall.ci_low <= overall.score <= overall.ci_high


def test_group_metrics_get_rows_only_where_there_are_groups() -> None:
    acc = MetricAccumulator(["scenes", "questions"])
    acc.add("scenes", Score("s", "consistency", ScoreStatus.NO_ANSWER), ())
    acc.add("questions", Score("g", "consistency_group", ScoreStatus.OK, {"consistency": 0.5}),
            ("consistency", "consistent_correct"))
    rows = [(r.metric, r.subset, r.num) for r in acc.results()]
    assert ("consistency", "questions", 1) in rows and ("consistency", "OVERALL", 1) in rows
    assert not [r for r in rows if r[1] == "scenes"]
    (cc,) = [r for r in acc.results() if r.metric == "consistent_correct" and r.subset == "questions"]
    assert cc.num == 0 and math.isnan(cc.score)


def _cfg(**judge: object) -> dict:
    return {"eval_type": "mock", "datasets": ["general_vqa"], "judge": judge}


def test_grounding_block_config(monkeypatch) -> None:
    monkeypatch.setenv("GS_GROUNDING_KEY", "sk-grounding-SECRET")
    cfg = load_config(_cfg(models={"model_id": "j", "api_url": "mock"}, grounding={
        "votes": 3, "not_determinable": "excluded",
        "models": {"model_id": "g", "api_url": "https://x.test/v1", "api_key": "$GS_GROUNDING_KEY"}}))
    assert cfg.judge is not None and cfg.judge.grounding is not None
    assert cfg.judge.grounding.votes == 3 and cfg.judge.grounding.models[0].model_id == "g"
    assert "sk-grounding-SECRET" in cfg.secrets()
    assert "sk-grounding-SECRET" not in json.dumps(cfg.redacted())
    with pytest.raises(ConfigError, match="did you mean 'votes'"):
        load_config(_cfg(models=[], grounding={"vote": 3}))
    with pytest.raises(ConfigError, match="not_determinable"):
        load_config(_cfg(grounding={"not_determinable": "maybe"}))
    with pytest.raises(ConfigError, match=r"judge.grounding.models\[0\].api_url"):
        load_config(_cfg(grounding={"models": {"model_id": "g", "api_url": "ftp://x"}}))


def test_metrics_enabled_by_list_or_block_and_need_a_model() -> None:
    block = load_config(_cfg(models={"model_id": "j", "api_url": "mock"}, grounding={})).judge
    assert metric_names(["BLEU", "Rouge"], None, block) == [
        "BLEU", "Rouge", "grounding", "completeness", "consistency"]
    assert metric_names(["BLEU", "Rouge"], ["grounding"], block) == [
        "grounding", "completeness", "consistency"]
    assert metric_names(["acc"], None, block) == ["acc"]  # multiple choice: no claims to check
    from groundscope.runner import Runner

    no_model = {"eval_type": "mock", "datasets": ["general_vqa"],
                "dataset_args": {"general_vqa": {"local_path": str(ROOT / "examples" / "grounding"),
                                                 "metric_list": ["grounding"]}}}
    with pytest.raises(ConfigError, match="'grounding' needs a judge model"):
        Runner(load_config(no_model))

