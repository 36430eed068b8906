"""The Python API (``MultiModalEvaluator``) against the simulator on loopback: its numbers equal
the CLI's on the same answers (the grounding demo), its images come in every accepted form,
answers without claims are excluded rather than 0, and bad input is one clear error."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from cli_support import run_cli
from groundscope import ConfigError, JudgeConfig, MultiModalEvaluator, MultiModalMetrics
from groundscope.errors import GroundscopeError, MediaError
from groundscope.evaluator import VQAItem
from groundscope.scoring.grounding_prompt import CLAIMS_MARKER, VERIFY_MARKER
from groundscope.simulator import GroundingResponder, GroundTruth, SimulatorServer, sim_responders
from groundscope.types import ScoreStatus

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "grounding"
MEDIA = ROOT / "examples" / "media"
DOG = MEDIA / "dog.jpg"
DESCRIBE = "Describe the picture."
DOG_ANSWER = ("A brown dog stands on green grass under a blue sky. "
              "A red ball lies next to the dog.")  # truth.json: 4 claims supported, 1 contradicted


def demo_config(work_dir: Path) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(EXAMPLE)
    cfg["simulator"]["truth"] = str(EXAMPLE / "truth.json")
    return {**cfg, "work_dir": str(work_dir), "no_timestamp": True}


@pytest.fixture(scope="module")
def judge_url() -> Iterator[str]:
    """A judge-only simulator answering as the demo run's own simulator does."""
    from groundscope.config import load_config

    cfg = load_config(demo_config(Path("unused")))
    with SimulatorServer(responders=sim_responders(cfg.simulator)) as url:
        yield url


def judge(url: str, **grounding: Any) -> dict[str, Any]:
    return {"models": {"model_id": "grounding-judge", "api_url": url}, "max_repairs": 2,
            **({"grounding": grounding} if grounding else {})}


def rows(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((run_dir / kind).rglob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def grade_run_answers(run_dir: Path, url: str) -> tuple[dict, dict, dict, dict, dict]:
    """The CLI run's saved answers graded again through the Python API; the CLI's per-sample
    figures beside the API's."""
    preds = {r["sample_id"]: r for r in rows(run_dir, "predictions")}
    reviews = rows(run_dir, "reviews")
    cli = {(r["sample_id"], r["scorer"]): r for r in reviews}

    def image(pred: dict[str, Any]) -> list[Path]:
        origin = Path(pred["sample"]["origin"].rpartition(":")[0])
        parts = pred["sample"]["messages"][0]["content"]
        return [(ROOT / origin.parent / p["media"]).resolve() for p in parts if p["type"] == "image"]

    async def grade() -> tuple[dict, dict]:
        async with MultiModalEvaluator(judge=judge(url), media_roots=[MEDIA]) as ev:
            items = [VQAItem(image(p), p["sample"]["question"], p["prediction"],
                             elements=p["sample"]["metadata"].get("elements"))
                     for p in preds.values()]
            graded = dict(zip(preds, await ev.evaluate_many(items, concurrency=4), strict=True))
            groups: dict[str, list[dict[str, Any]]] = {}
            for sid in sorted(preds):
                group = preds[sid]["sample"]["metadata"].get("group")
                if group is not None:
                    groups.setdefault(group, []).append(preds[sid])
            consistency = {}
            for gid, members in groups.items():
                consistency[gid] = await ev.evaluate_consistency(
                    image(members[0]), [m["sample"]["question"] for m in members],
                    answers=[m["prediction"] for m in members])
            return graded, consistency

    graded, consistency = asyncio.run(grade())
    cli_groups = {r["detail"]["group"]: r["values"]["consistency"] for r in reviews
                  if r["scorer"] == "consistency_group"}
    return preds, cli, graded, consistency, cli_groups


def test_python_api_numbers_equal_the_cli_run_on_the_same_answers(tmp_path: Path,
                                                                    judge_url: str) -> None:
    # the README's demo command, as a user types it in the repository
    done = run_cli("eval", "--config", "examples/grounding_demo.yaml", "--work-dir",
                   str(tmp_path), "--no-timestamp", cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    preds, cli, graded, consistency, cli_groups = grade_run_answers(tmp_path, judge_url)
    assert len(preds) == 16  # 5 scenes + 11 questions (paraphrases expanded)
    compared = 0
    for sid, metrics in graded.items():
        row = cli[(sid, "grounding")]
        assert metrics.status == row["status"], sid
        if row["status"] == "ok":
            values = row["values"]
            assert metrics.grounding_score == values["grounding"], sid
            assert metrics.hallucination_rate == values["hallucination"], sid
            assert metrics.hallucinated == (values["hallucinated_answers"] == 1.0), sid
            assert [(c.text, c.verdict, c.reason) for c in metrics.claims] == \
                [(c["claim"], c["verdict"], c["reason"]) for c in row["detail"]["claims"]], sid
            compared += 1
        else:  # scene-city: "I cannot tell what this shows." has no claims: excluded, not 0
            assert metrics.grounding_score is None and metrics.hallucination_rate is None
        done = cli[(sid, "completeness")]
        expected = done["values"].get("completeness") if done["status"] == "ok" else None
        assert metrics.completeness_score == expected, sid
    assert compared == 15
    assert consistency == pytest.approx(cli_groups) and len(consistency) == 4
    assert consistency["dog-present"] == pytest.approx(1 / 3)  # "Yes", "yes.", "No"


def test_one_answer_with_votes_claims_and_usage(judge_url: str) -> None:
    async def go() -> MultiModalMetrics:
        ev = MultiModalEvaluator(judge=JudgeConfig(**judge(judge_url, votes=3)))
        try:
            return await ev.evaluate_vqa_response(DOG, DESCRIBE, DOG_ANSWER,
                                                  elements=["a dog", "grass", "the sky"])
        finally:
            await ev.aclose()

    m = asyncio.run(go())
    assert (m.grounding_score, m.hallucination_rate, m.hallucinated) == (0.8, 0.2, True)
    assert m.completeness_score == 1.0 and m.consistency_score is None
    assert [c.verdict for c in m.claims] == ["supported"] * 4 + ["contradicted"]
    assert all(len(c.votes) == 3 for c in m.claims)
    assert m.usage["verification"]["grounding-judge"]["billed"]["requests"] == 15  # 5 claims x 3
    assert m.usage["claims"]["grounding-judge"]["billed"]["requests"] == 1


def test_images_as_path_bytes_pillow_and_lists_give_the_same_verdicts(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    # the simulator compares request images by content: one picture in three forms
    truth.write_text(json.dumps({
        "images": {"dog": str(DOG)},
        "facts": {"dog": {"supported": ["The dog is brown."],
                          "contradicted": ["The dog is asleep."]}},
        "answers": [{"image": "dog", "question": DESCRIBE, "answer": "A brown dog, asleep.",
                     "claims": ["The dog is brown.", "The dog is asleep."]}]}))
    responder = GroundingResponder(GroundTruth.load(truth))
    pil = Image.open(DOG)
    pil.load()
    buf = io.BytesIO()
    pil.save(buf, format="PNG")

    async def go(url: str) -> list[MultiModalMetrics]:
        async with MultiModalEvaluator(judge=judge(url), media_roots=[MEDIA]) as ev:
            return await ev.evaluate_many(
                [{"image": DOG, "question": DESCRIBE, "answer": "A brown dog, asleep."},
                 {"image": DOG.read_bytes(), "question": DESCRIBE, "answer": "A brown dog, asleep."},
                 {"image": [str(DOG), DOG.read_bytes()], "question": DESCRIBE,
                  "answer": "A brown dog, asleep."},
                 {"image": tmp_path / "missing.jpg", "question": DESCRIBE, "answer": "A dog."}])

    with SimulatorServer(responders=[responder]) as url:
        path, raw, both, missing = asyncio.run(go(url))
    for m in (path, raw, both):
        assert [c.verdict for c in m.claims] == ["supported", "contradicted"]
        assert m.grounding_score == 0.5 and m.hallucinated is True
    assert missing.status == "error" and "missing.jpg" in (missing.reason or "")
    # one extraction (the same question and answer: the reply cache), 2 claims x 3 image sets
    assert responder.calls[CLAIMS_MARKER] == 1 and responder.calls[VERIFY_MARKER] == 6




def test_a_pillow_image_is_sent_as_png(tmp_path: Path) -> None:
    server = SimulatorServer(responders=[GroundingResponder(GroundTruth())], keep_bodies=True)

    async def go(url: str) -> MultiModalMetrics:
        async with MultiModalEvaluator(judge=judge(url)) as ev:
            return await ev.evaluate_vqa_response(Image.new("RGB", (8, 8), "red"), "Colour?",
                                                  "The square is red.")

    with server as url:
        m = asyncio.run(go(url))
        verify = [b for b in server.bodies() if isinstance(b["messages"][0]["content"], list)]
    assert m.status == "ok" and len(verify) == 1
    assert verify[0]["messages"][0]["content"][1]["image_url"]["url"].startswith(
        "data:image/png;base64,")


def test_an_answer_without_claims_is_no_answer_not_zero(judge_url: str) -> None:
    async def go() -> MultiModalMetrics:
        async with MultiModalEvaluator(judge=judge(judge_url)) as ev:
            return await ev.evaluate_vqa_response(DOG, DESCRIBE, "   ")

    m = asyncio.run(go())
    assert m.status == ScoreStatus.NO_ANSWER.value and m.reason == "empty answer"
    assert (m.grounding_score, m.hallucination_rate, m.hallucinated) == (None, None, None)


def test_consistency_asks_the_model_each_paraphrase(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps({
        "images": {"car": str(MEDIA / "tesla.jpg")},
        "answers": [{"image": "car", "question": "How many wheels?", "answer": "2"},
                    {"image": "car", "question": "Count the wheels.", "answer": "Two wheels."},
                    {"image": "car", "question": "Wheels visible?", "answer": "three"}],
        "equivalent": [["2", "Two wheels."]]}))
    from groundscope.config import SimulatorArgs

    server = SimulatorServer(responders=sim_responders(SimulatorArgs(truth=str(truth))))

    async def go(url: str) -> tuple[float, int]:
        model = {"model": "sim", "api_url": url, "api_key": "sk-test-not-a-secret"}
        async with MultiModalEvaluator(judge=judge(url), model=model, media_roots=[MEDIA]) as ev:
            value = await ev.evaluate_consistency(
                MEDIA / "tesla.jpg", ["How many wheels?", "Count the wheels.", "Wheels visible?"])
            return value, ev.usage.by_step["model"].billed.requests

    with server as url:
        value, asked = asyncio.run(go(url))
    # "2" ~ "Two wheels." (judge: same), "three" differs from both: 1 of 3 pairs agree
    assert value == pytest.approx(1 / 3) and asked == 3


def test_bad_input_is_one_clear_error(judge_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"judge: .*strategy"):
        MultiModalEvaluator(judge={"models": [], "strategy": "nonsense"})
    with pytest.raises(ConfigError, match="needs a judge model"):
        MultiModalEvaluator(judge={})
    outside = tmp_path / "dog.jpg"
    outside.write_bytes(DOG.read_bytes())

    async def go() -> None:
        async with MultiModalEvaluator(judge=judge(judge_url)) as ev:
            await ev.evaluate_vqa_response(outside, DESCRIBE, "A dog.")

    with pytest.raises(MediaError, match="outside the allowed media roots"):
        asyncio.run(go())

    async def no_model() -> None:
        async with MultiModalEvaluator(judge=judge(judge_url)) as ev:
            await ev.evaluate_consistency(DOG, ["a?", "b?"])

    with pytest.raises(ConfigError, match="needs model="):
        asyncio.run(no_model())


def test_batch_items_fail_alone_and_requests_stay_bounded(tmp_path: Path) -> None:
    from groundscope.simulator import SimBehaviour

    server = SimulatorServer(behaviour=SimBehaviour(latency_ms=5),
                             responders=[GroundingResponder(GroundTruth())])
    answers = [f"The dog is brown. The sky is blue. It is day {k}." for k in range(6)]

    async def go(url: str) -> list[MultiModalMetrics]:
        async with MultiModalEvaluator(judge=judge(url), media_roots=[MEDIA],
                                       concurrency=2, max_response_bytes=1000) as ev:
            items: list[Any] = [{"image": DOG, "question": DESCRIBE, "answer": a} for a in answers]
            items += [{"image": DOG, "question": DESCRIBE, "answer": "x" * 1001},
                      {"image": DOG, "question": DESCRIBE, "answer": None},
                      {"image": DOG, "question": DESCRIBE, "answer": "A dog.", "colour": "red"}]
            with pytest.raises(ConfigError, match="concurrency"):
                await ev.evaluate_many(items, concurrency=0)
            return await ev.evaluate_many(items)

    with server as url:
        graded = asyncio.run(go(url))
        stats = server.stats()
    assert [m.status for m in graded[:6]] == ["ok"] * 6  # 3 sentences: 3 claims each
    assert all(len(m.claims) == 3 for m in graded[:6])
    too_long, not_text, unknown = graded[6:]
    assert too_long.status == "error" and "1,001 characters, over the limit of 1,000" in str(
        too_long.reason)
    assert not_text.status == "error" and "answer: expected a string" in str(not_text.reason)
    assert unknown.status == "error" and "colour" in str(unknown.reason)
    # 6 extractions; "The dog is brown." and "The sky is blue." are verified once (the reply
    # cache: same claim, same image), "It is day k." six times
    assert stats["requests"] == 6 + 2 + 6
    assert stats["peak_in_flight"] <= 2  # the evaluator's concurrency bounds the judge


def test_judge_keys_never_reach_the_results_and_caches_are_reused(tmp_path: Path) -> None:
    from groundscope.simulator import SimBehaviour

    secret = "sk-evaluator-test-0123456789abcdef"
    hostile = SimulatorServer(behaviour=SimBehaviour(echo_key="error"),
                              responders=[GroundingResponder(GroundTruth())])

    async def grade(url: str, **kw: Any) -> tuple[MultiModalMetrics, dict[str, Any]]:
        cfg = {"models": {"model_id": "j", "api_url": url, "api_key": secret}}
        async with MultiModalEvaluator(judge=cfg, **kw) as ev:
            m = await ev.evaluate_vqa_response(DOG, DESCRIBE, "The dog is brown.")
            claims = ev.usage.by_step.get("claims")
            return m, claims.model_dump() if claims is not None else {}

    with hostile as url:  # every reply: a 401 that echoes the key in many forms
        failed, _ = asyncio.run(grade(url))
    assert failed.status == "judge_failed" and "401" in str(failed.reason)
    assert secret not in repr(failed) and secret[3:] not in repr(failed)

    server = SimulatorServer(responders=[GroundingResponder(GroundTruth())])
    with server as url:
        first, usage1 = asyncio.run(grade(url, cache_dir=tmp_path))
        asked = server.stats()["requests"]
        again, usage2 = asyncio.run(grade(url, cache_dir=tmp_path))  # a new evaluator
        assert server.stats()["requests"] == asked == 2  # extraction + one claim, then none
    assert (first.claims, first.grounding_score) == (again.claims, again.grounding_score)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "claims.jsonl", "verification.jsonl"]
    assert usage1["billed"]["requests"] == 1 and usage2["cached"]["requests"] == 1
    with pytest.raises(ConfigError, match="api_url 'mock'"):
        MultiModalEvaluator(judge={"models": {"model_id": "j", "api_url": "mock"}})


def test_a_failing_model_is_named_when_consistency_cannot_be_scored(judge_url: str) -> None:
    from groundscope.simulator import SimBehaviour

    broken = SimulatorServer(behaviour=SimBehaviour(echo_key="error"))

    async def go(url: str) -> None:
        async with MultiModalEvaluator(judge=judge(judge_url), media_roots=[MEDIA],
                                       model={"model": "m", "api_url": url}) as ev:
            await ev.evaluate_consistency(DOG, ["Is there a dog?", "Do you see a dog?"])

    with broken as url, pytest.raises(GroundscopeError,
                                      match=r"fewer than two answers .*2 model requests failed"):
        asyncio.run(go(url))

    async def one_string() -> None:
        async with MultiModalEvaluator(judge=judge(judge_url)) as ev:
            await ev.evaluate_vqa_response(DOG, DESCRIBE, "A dog.", elements="a dog")

    with pytest.raises(TypeError, match="elements: expected a list of strings"):
        asyncio.run(one_string())
