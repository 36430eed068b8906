"""The judge panel and the judged scorers, against the simulator's judge mode on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from groundscope.config import JudgeConfig
from groundscope.errors import ConfigError
from groundscope.scoring import build_scorers, metric_names, primary_metric
from groundscope.scoring.base import ScoringContext
from groundscope.scoring.judged import JudgedAccuracy, RecallScorer
from groundscope.simulator import JudgeResponder, SimulatorServer
from groundscope.types import (
    AnswerKind,
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

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def sample(sid: str = "s1", target: tuple[str, ...] = ("Dog",), **kw: Any) -> Sample:
    base: dict[str, Any] = dict(id=sid, dataset="general_vqa", subset="t",
                                messages=(Message("user", "What animal is this?"),),
                                origin=Origin(Path("f.jsonl"), 1), target=target,
                                question="What animal is this?")
    base.update(kw)
    return Sample(**base)


def pred(text: str, sid: str = "s1") -> Prediction:
    return Prediction(sid, "h", PredictionStatus.OK, Completion(text))


def judge_cfg(*urls: str, **kw: Any) -> JudgeConfig:
    models = [{"model_id": f"judge-{i}", "api_url": u, "api_key": "sk-judge-SECRET",
               "generation_config": {"max_tokens": 256}} for i, u in enumerate(urls)]
    return JudgeConfig(strategy=kw.pop("strategy", "llm"), models=models, **kw)


async def score_all(cfg: JudgeConfig, items: list[tuple[Sample, Prediction]],
                    tmp_path: Path, **ctx_kw: Any) -> list[Score]:
    ctx = ScoringContext(run_dir=tmp_path, judge=cfg, judge_concurrency=4, **ctx_kw)
    (scorer,) = build_scorers(["acc"], ctx)
    assert isinstance(scorer, JudgedAccuracy)
    try:
        return list(await asyncio.gather(*(scorer.score(s, p) for s, p in items)))
    finally:
        await ctx.aclose()


def test_verdicts_votes_and_request_body(tmp_path: Path) -> None:
    responder = JudgeResponder()
    with SimulatorServer(responders=[responder], keep_bodies=True) as url:
        srv_items = [(sample("1"), pred("It is a dog.", "1")), (sample("2"), pred("A cat", "2")),
                     (sample("3", ("Dog", "Puppy")), pred("puppy", "3"))]
        scores = asyncio.run(score_all(judge_cfg(url), srv_items, tmp_path))
        bodies = [b for b in _bodies(url) if "messages" in b]
    assert [s.status for s in scores] == [ScoreStatus.OK] * 3
    assert [s.values["accuracy"] for s in scores] == [1.0, 0.0, 1.0]
    assert scores[0].extracted == "A" and scores[0].detail["verdict"] == "A"
    assert scores[0].detail["votes"][0]["judge"] == "judge-0"
    assert "reference answer" in scores[0].detail["reasoning"]
    assert responder.calls == 3
    body = bodies[0]
    assert body["model"] == "judge-0" and body["temperature"] == 0 and body["max_tokens"] == 256
    text = body["messages"][0]["content"]
    assert "<question>\nWhat animal is this?\n</question>" in text
    assert "<predicted_answer>\nIt is a dog.\n</predicted_answer>" in text
    assert (tmp_path / "cache" / "judge.jsonl").read_text().count("\n") == 3


def _bodies(url: str) -> list[dict]:
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/_sim/bodies") as resp:
        return json.loads(resp.read())


def test_garbage_is_retried_then_judge_failed(tmp_path: Path) -> None:
    responder = JudgeResponder(malformed=1.0)
    with SimulatorServer(responders=[responder]) as url:
        cfg = judge_cfg(url, max_repairs=2)
        scores = asyncio.run(score_all(cfg, [(sample(), pred("a dog"))], tmp_path))
    (score,) = scores
    assert score.status is ScoreStatus.JUDGE_FAILED and dict(score.values) == {}
    assert responder.calls == 3  # one try + max_repairs repairs, then it gives up
    (vote,) = score.detail["votes"]
    assert vote["verdict"] is None and vote["attempts"] == 3
    assert "no usable verdict after 3 replies" in vote["error"]
    assert score.detail["judge_failed"] == "no judge gave a verdict"


def test_one_repair_turn_recovers(tmp_path: Path) -> None:
    responder = JudgeResponder(malformed_tries=1, think=True)
    with SimulatorServer(responders=[responder], keep_bodies=True) as url:
        scores = asyncio.run(score_all(judge_cfg(url), [(sample(), pred("dog"))], tmp_path))
        bodies = _bodies(url)
    (score,) = scores
    assert score.status is ScoreStatus.OK and score.values["accuracy"] == 1.0
    assert score.detail["votes"][0]["attempts"] == 2
    retry = bodies[-1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == "The predicted answer looks right to me."  # quoted back
    assert "could not be used: no JSON object" in retry[2]["content"]


def test_majority_vote_and_ties(tmp_path: Path) -> None:
    honest, liar = JudgeResponder(), JudgeResponder(noise=1.0)
    with SimulatorServer(responders=[honest]) as good, SimulatorServer(responders=[liar]) as bad:
        items = [(sample("1"), pred("dog", "1")), (sample("2"), pred("cat", "2"))]
        three = asyncio.run(score_all(judge_cfg(good, good, bad), items, tmp_path / "3"))
        two = asyncio.run(score_all(judge_cfg(good, bad), items, tmp_path / "2"))
    assert [s.values["accuracy"] for s in three] == [1.0, 0.0]  # 2 honest out-vote 1 liar
    assert [v["verdict"] for v in three[0].detail["votes"]] == ["A", "A", "B"]
    assert all(s.status is ScoreStatus.JUDGE_FAILED for s in two)
    assert two[0].detail["judge_failed"] == "tie between judges"


def test_multimodal_judge_sees_the_images(tmp_path: Path) -> None:
    img = MediaRef(Modality.IMAGE, "dog.jpg", base_dir=EXAMPLES / "media")
    s = sample(messages=(Message("user", (TextPart("What animal is this?"), MediaPart(img))),))
    with SimulatorServer(responders=[JudgeResponder()], keep_bodies=True) as url:
        (score,) = asyncio.run(score_all(judge_cfg(url, multimodal=True), [(s, pred("dog"))],
                                         tmp_path))
        (body,) = _bodies(url)
    assert score.values["accuracy"] == 1.0
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_unauthorised_judge_fails_fast_and_key_is_scrubbed(tmp_path: Path) -> None:
    hits = 0

    async def deny(request: web.Request) -> web.Response:
        nonlocal hits
        hits += 1
        msg = f"Incorrect API key provided: {request.headers['Authorization'][7:]}"
        return web.json_response({"error": {"message": msg}}, status=401)

    async def main() -> list[Score]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", deny)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            ctx = ScoringContext(run_dir=tmp_path, judge=judge_cfg(f"http://127.0.0.1:{port}/v1"))
            (scorer,) = build_scorers(["acc"], ctx)
            first = await scorer.score(sample("0"), pred("dog", "0"))
            later = [await scorer.score(sample(str(i)), pred("dog", str(i))) for i in range(1, 5)]
            await ctx.aclose()
            return [first, *later]
        finally:
            await runner.cleanup()

    scores = asyncio.run(main())
    assert all(s.status is ScoreStatus.JUDGE_FAILED for s in scores)
    assert hits == 1  # after a 401 the judge is not asked again in this run
    assert "judge unavailable" in scores[-1].detail["votes"][0]["error"]
    text = json.dumps([dict(s.detail) for s in scores])
    assert "sk-judge-SECRET" not in text and "http_401" in text


def test_mock_judge_without_a_simulator_url_is_a_config_error(tmp_path: Path) -> None:
    """Scoring never starts a simulator: whoever runs the scorers hands its URL over."""
    cfg = JudgeConfig(strategy="llm", models=[{"model_id": "j", "api_url": "mock"}])
    with pytest.raises(ConfigError, match=r"judge 'j': api_url 'mock'.*mock_url is unset"):
        asyncio.run(score_all(cfg, [(sample(), pred("dog"))], tmp_path))
    responder = JudgeResponder()
    with SimulatorServer(responders=[responder]) as url:
        scores = asyncio.run(score_all(cfg, [(sample(), pred("dog"))], tmp_path, mock_url=url))
    assert scores[0].values["accuracy"] == 1.0 and responder.calls == 1


def test_human_label_recorded_and_empty_answer_shortcut(tmp_path: Path) -> None:
    cfg = judge_cfg("mock", human_label_field="gold")
    items = [(sample("1", metadata={"gold": "no"}), pred("dog", "1")),
             (sample("2", metadata={"human_label": "yes"}), pred("   ", "2"))]
    responder = JudgeResponder()
    with SimulatorServer(responders=[responder]) as url:
        scores = asyncio.run(score_all(cfg, items, tmp_path, mock_url=url))
    assert scores[0].detail["human_label"] == "incorrect" and scores[0].values["accuracy"] == 1.0
    assert scores[1].values["accuracy"] == 0.0 and scores[1].detail["votes"] == []
    assert scores[1].detail["human_label"] == "correct"
    assert responder.calls == 1  # the empty answer was not sent


def test_choices_errors_and_missing_references_do_not_call_the_judge(tmp_path: Path) -> None:
    responder = JudgeResponder()
    mcq = sample("m", ("B",), answer_kind=AnswerKind.CHOICE, choices=("A", "B"))
    errored = Prediction("e", "h", PredictionStatus.ERROR, error="boom")
    with SimulatorServer(responders=[responder]) as url:
        scores = asyncio.run(score_all(judge_cfg(url), [
            (mcq, pred("ANSWER: B", "m")), (sample("e"), errored), (sample("n", ()), pred("x", "n"))],
            tmp_path))
    assert scores[0].values["accuracy"] == 1.0 and scores[0].extracted == "B"
    assert [s.status for s in scores[1:]] == [ScoreStatus.ERROR, ScoreStatus.NO_ANSWER]
    assert responder.calls == 0


def test_metric_switch_and_primary_metric() -> None:
    llm = judge_cfg("http://x/v1")
    assert metric_names(("BLEU", "Rouge"), None, llm) == ["accuracy"]
    assert metric_names(("BLEU", "Rouge"), ["BLEU", "acc"], llm) == ["BLEU", "acc"]
    assert metric_names(("BLEU", "Rouge"), None, judge_cfg("http://x/v1", strategy="llm_recall")) \
        == ["BLEU", "Rouge"]
    assert metric_names(("BLEU", "Rouge"), None, JudgeConfig(strategy="auto")) == ["BLEU", "Rouge"]
    assert metric_names(("acc",), None, llm) == ["acc"]
    scorers = build_scorers(["accuracy"], ScoringContext(judge=llm))
    assert primary_metric("rouge-l-r", scorers) == "accuracy"
    assert primary_metric("rouge-l-r", build_scorers(["BLEU", "Rouge"])) == "rouge-l-r"
    # rule / auto never build a judge; llm_recall wraps only the scorer of ROUGE-L recall
    assert type(build_scorers(["acc"], ScoringContext(judge=JudgeConfig()))[0]).__name__ \
        == "ChoiceScorer"
    recall = build_scorers(["BLEU", "Rouge"],
                           ScoringContext(judge=judge_cfg("http://x/v1", strategy="llm_recall")))
    assert [type(s).__name__ for s in recall] == ["ReferenceScorer", "RecallScorer"]
    assert recall[1].name == "rouge" and "rouge-l-r" in recall[1].keys


class _Panel:
    """A stand-in panel: a fixed verdict, counting calls."""

    def __init__(self, label: str | None) -> None:
        self.label, self.calls = label, 0

    async def decide(self, s: Sample, text: str):
        from groundscope.scoring.judge import Outcome, Vote

        self.calls += 1
        return Outcome(self.label, (Vote("j", self.label),),
                       None if self.label else "no judge gave a verdict")


def test_llm_recall_only_raises_rule_misses() -> None:
    (rouge,) = build_scorers(["Rouge"])
    exact, miss = (sample(), pred("Dog")), (sample(target=("black dog",)), pred("a dog"))

    def run(label: str | None, item: tuple[Sample, Prediction]) -> tuple[Score, int]:
        panel = _Panel(label)
        scorer = RecallScorer(rouge, "rouge-l-r", panel)  # type: ignore[arg-type]
        return asyncio.run(scorer.score(*item)), panel.calls

    kept, calls = run("B", exact)  # rule already > 0.99: the judge is not asked
    assert kept.values["rouge-l-r"] == 1.0 and calls == 0
    rule_value = asyncio.run(rouge.score(*miss)).values["rouge-l-r"]
    assert 0 < rule_value < 1
    raised, calls = run("A", miss)
    assert raised.values["rouge-l-r"] == 1.0 and calls == 1
    assert raised.values["rouge-l-p"] == asyncio.run(rouge.score(*miss)).values["rouge-l-p"]
    assert raised.detail["rule_value"] == rule_value
    lowered, _ = run("B", miss)  # the judge never lowers a rule score
    assert lowered.values["rouge-l-r"] == rule_value
    failed, _ = run(None, miss)  # a failed judge keeps the rule score, says so in detail
    assert failed.status is ScoreStatus.OK and failed.values["rouge-l-r"] == rule_value
    assert failed.detail["judge_failed"] == "no judge gave a verdict"


def test_responder_ignores_other_requests_and_is_deterministic() -> None:
    from groundscope.simulator import SimBehaviour, SimRequest

    def req(content: str, model: str = "j") -> SimRequest:
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        return SimRequest(body, (content,), (), "k", "t", 1, SimBehaviour())

    from groundscope.scoring.judge_prompt import judge_prompt

    noisy = JudgeResponder(noise=0.5, seed=3)
    assert noisy(req("What animal is this?")) is None and noisy.calls == 0
    prompts = [judge_prompt(f"q{i}", ["dog"], "dog") for i in range(200)]
    first = [noisy(req(p)).content for p in prompts]
    assert first == [noisy(req(p)).content for p in prompts]  # same seed, same verdicts
    flipped = sum('"verdict":"B"' in r for r in first)
    assert 60 < flipped < 140  # about half of the correct answers flipped
    other = [noisy(req(p, model="k")).content for p in prompts]
    assert other != first  # another judge model errs on other samples


@pytest.mark.parametrize("bad", ["mock", "ftp://x", "localhost:8000"])
def test_judge_urls_are_checked_before_any_request(bad: str) -> None:
    from groundscope.config import load_config
    from groundscope.errors import ConfigError

    with pytest.raises(ConfigError, match=r"judge\.models\[0\]\.api_url"):
        load_config({"datasets": ["general_vqa"], "api_url": "http://x/v1",
                     "judge": {"strategy": "llm", "models": {"model_id": "j", "api_url": bad}}})


def test_judge_requests_use_the_runs_retry_delays(tmp_path: Path) -> None:
    """``--retry-base-delay`` / ``--retry-max-delay`` apply to judge requests as to the
    model's (they were fixed at 0.5 s / 30 s: a run or ``score`` against a judge answering
    garbage waited out the default backoff whatever the run asked)."""
    from groundscope.config import TaskConfig

    cfg = TaskConfig(model="m", api_url="http://127.0.0.1:9/v1", datasets=["general_vqa"],
                     judge=judge_cfg("http://127.0.0.1:9/v1"), retry_base_delay=0.01,
                     retry_max_delay=0.02, max_retries=3)
    ctx = ScoringContext.from_config(cfg, tmp_path)
    responder = JudgeResponder()
    with SimulatorServer(responders=[responder]) as url:
        ctx.judge = judge_cfg(url)
        (scorer,) = build_scorers(["acc"], ctx)

        async def one() -> Score:
            try:
                return await scorer.score(sample(), pred("a dog"))
            finally:
                await ctx.aclose()

        assert asyncio.run(one()).status is ScoreStatus.OK
    (client,) = ctx.judge_clients
    assert (client.retry.max_retries, client.retry.base_delay, client.retry.max_delay) == (3, 0.01, 0.02)


def test_a_judge_behind_a_gateway_answering_hintless_429s_is_waited_out(tmp_path: Path) -> None:
    """A judge endpoint answering 429 with no hint, 6 times over, with ``max_retries`` 2:
    the run's ``rate_limit_budget`` keeps the judge request going as it does the model's
    (it gave up after 3 attempts: judge_failed), and the judge gate's pause is capped by
    ``retry_max_delay`` as the model's is."""
    from groundscope.config import TaskConfig
    from groundscope.simulator import SimBehaviour

    cfg = TaskConfig(model="m", api_url="http://127.0.0.1:9/v1", datasets=["general_vqa"],
                     judge=judge_cfg("http://127.0.0.1:9/v1"), retry_base_delay=0.0,
                     retry_max_delay=0.0, max_retries=2, rate_limit_budget=60.0)
    ctx = ScoringContext.from_config(cfg, tmp_path)
    behaviour = SimBehaviour(rate_429=1.0, max_faults_per_key=6, gateway="hintless")
    with SimulatorServer(behaviour=behaviour, responders=[JudgeResponder()]) as url:
        ctx.judge = judge_cfg(url)
        (scorer,) = build_scorers(["acc"], ctx)

        async def one() -> Score:
            try:
                return await scorer.score(sample(), pred("a dog"))
            finally:
                await ctx.aclose()

        assert asyncio.run(one()).status is ScoreStatus.OK
    (client,) = ctx.judge_clients
    assert client.retry.rate_limit_budget == 60.0
