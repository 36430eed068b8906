"""One sample's path (``groundscope.pipeline``), shared by ``eval``, ``score`` and, later,
distributed workers: called with a client, the scorers and a sample, it returns the
prediction and scores as values and writes nothing; what it reuses of a saved run, and how
a raising scorer is recorded, are the same whichever command calls it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from groundscope.client.chat import ChatClient
from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.pipeline import SampleResult, Saved, evaluate_sample
from groundscope.plan import iter_samples, plan_dataset
from groundscope.redaction import Redactor
from groundscope.rescore import rescore_run
from groundscope.scoring import ScoringContext
from groundscope.simulator import SimulatorServer
from groundscope.store import RunStore
from groundscope.types import Prediction, PredictionStatus, Sample, Score, ScoreStatus
from media_fixtures import image_bytes, write, write_jsonl

SECRET = "sk-pipeline-test-0123456789abcdef"


def _config(root: Path) -> dict[str, Any]:
    write(root, "a.jpg", image_bytes("JPEG", color="red"))
    records = [{"id": f"q{i}", "answer": "a red disc",
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": f"Question {i}: what is shown?"},
                    {"type": "image_url", "image_url": {"url": "a.jpg"}}]}]} for i in range(3)]
    write_jsonl(root / "data.jsonl", records)
    return {"model": "m", "datasets": ["general_vqa"], "work_dir": str(root / "out"),
            "dataset_args": {"general_vqa": {"local_path": str(root),
                                             "metric_list": ["bleu", "rouge"]}}}


@pytest.fixture
def planned(tmp_path: Path) -> tuple[Any, Any, list[Sample]]:
    cfg = load_config({**_config(tmp_path / "data"), "eval_type": "mock"})
    run = plan_dataset(cfg, "general_vqa", ScoringContext.from_config(cfg))
    samples = [s for _, s in iter_samples(cfg, run, strict=True) if not isinstance(s, RecordError)]
    return cfg, run, samples


def _evaluate(url: str, sample: Sample, scorers: Any, **kw: Any) -> SampleResult:
    async def go() -> SampleResult:
        client = ChatClient(url, "m", generation_config=kw.pop("generation_config", None))
        try:
            return await evaluate_sample(sample, 0, scorers, client=client, **kw)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_a_sample_gives_its_prediction_and_scores_as_values(planned, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker process needs: a client, the scorers and a sample in; values out,
    nothing written (the caller owns the run directory)."""
    _, run, samples = planned
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with SimulatorServer(samples) as url:
        result = _evaluate(url, samples[0], run.scorers)
    pred = result.predicted.prediction
    assert pred.status is PredictionStatus.OK and pred.completion is not None
    assert (result.predicted.new, result.predicted.cached, result.predicted.changed) == (True, False, False)
    assert [(s.score.scorer, s.score.status, s.new) for s in result.scores] == [
        ("bleu", ScoreStatus.OK, True), ("rouge", ScoreStatus.OK, True)]
    assert all(s.request_hash == pred.request_hash for s in result.scores)
    assert result.scores[0].keys == run.scorers[0].keys and result.scores[0].score.values
    assert list(cwd.iterdir()) == []
    assert not (tmp_path / "data" / "out").exists()


def test_a_saved_run_is_reused_only_for_the_same_request_and_reference(planned, tmp_path: Path) -> None:
    """Resume: the same request and reference reuse the saved prediction and reviews (no
    request); a changed reference keeps the answer and scores it again; a changed request
    is asked again."""
    _, run, samples = planned
    sample = samples[0]
    server = SimulatorServer(samples)
    with server as url:
        first = _evaluate(url, sample, run.scorers)
        store = RunStore(tmp_path / "run", "m")
        store.append_prediction("general_vqa", sample.subset, sample, first.predicted.prediction)
        for s in first.scores:
            store.append_score("general_vqa", sample.subset, s.score, s.request_hash)
        store.close()
        row = store.load_predictions("general_vqa", sample.subset)[(sample.id, 0)]
        reviews = {k[2]: r for k, r in store.load_reviews("general_vqa", sample.subset).items()}
        saved = Saved(row, reviews)
        assert server.stats()["requests"] == 1

        same = _evaluate(url, sample, run.scorers, saved=saved)
        assert (same.predicted.new, same.predicted.cached, same.predicted.changed) == (False, True, False)
        assert same.predicted.prediction.completion == first.predicted.prediction.completion
        assert [s.new for s in same.scores] == [False, False]
        assert [s.score for s in same.scores] == [s.score for s in first.scores]

        moved = dataclasses.replace(sample, target=("a blue disc",))
        changed = _evaluate(url, moved, run.scorers, saved=saved)
        assert (changed.predicted.new, changed.predicted.cached, changed.predicted.changed) == (
            True, True, True)
        assert [s.new for s in changed.scores] == [True, True]
        assert changed.scores[0].score.values != first.scores[0].score.values
        assert server.stats()["requests"] == 1

        asked = _evaluate(url, sample, run.scorers, saved=saved, generation_config={"seed": 7})
        assert (asked.predicted.new, asked.predicted.cached, asked.predicted.changed) == (True, False, True)
        assert asked.predicted.prediction.request_hash != first.predicted.prediction.request_hash
        assert [s.new for s in asked.scores] == [True, True]
        assert server.stats()["requests"] == 2


@dataclasses.dataclass(frozen=True)
class _Boom:
    """A scorer with a bug whose message quotes a secret."""

    name: str = "boom"
    keys: tuple[str, ...] = ("boom",)

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        raise RuntimeError(f"could not parse {SECRET}")


def test_a_raising_scorer_is_an_error_score_with_secrets_redacted_on_both_paths(planned) -> None:
    _, run, samples = planned
    redact = Redactor([SECRET]).redact
    with SimulatorServer(samples) as url:
        asked = _evaluate(url, samples[0], [_Boom(), *run.scorers], redact=redact)
    row = {"sample_id": samples[0].id, "repeat": 0, "request_hash": "h", "status": "ok",
           "prediction": "a red disc"}
    rescored = asyncio.run(evaluate_sample(samples[0], 0, [_Boom(), *run.scorers], client=None,
                                           saved=Saved(row), redact=redact))
    for result in (asked, rescored):
        boom, *others = result.scores
        assert boom.score.status is ScoreStatus.ERROR and boom.new
        assert boom.score.detail["error"].startswith("RuntimeError: could not parse ")
        assert SECRET not in boom.score.detail["error"]
        assert [s.score.status for s in others] == [ScoreStatus.OK, ScoreStatus.OK]


def test_score_redacts_a_crashing_scorer_as_eval_does(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``groundscope score`` with a judge key: a scorer whose exception quotes the key is an
    ERROR score whose saved error text hides it, as in ``eval``."""
    import groundscope.scoring.text as text

    cfg = _config(tmp_path / "data")
    cfg["dataset_args"]["general_vqa"]["metric_list"] = ["bleu"]
    from groundscope import run_task

    with SimulatorServer() as url:
        run_dir = Path(run_task({**cfg, "api_url": url}).run_dir)

    def boom(prediction: str, reference: str) -> dict[str, float]:
        raise RuntimeError(f"tokenizer choked near {SECRET}")

    monkeypatch.setattr(text, "bleu", boom)
    judge = {"strategy": "rule", "models": [{"model_id": "j", "api_url": "http://127.0.0.1:9/v1",
                                             "api_key": SECRET}]}
    rescore_run(run_dir, judge=judge)
    reviews = [json.loads(line) for f in (run_dir / "reviews").rglob("*.jsonl")
               for line in f.read_text().splitlines()]
    assert len(reviews) == 3 and {r["status"] for r in reviews} == {"error"}
    assert all("tokenizer choked near" in r["detail"]["error"] for r in reviews)
    assert not any(SECRET in line for f in run_dir.rglob("*") if f.is_file()
                   for line in f.read_text(errors="replace").splitlines())


def _reports(run_dir: Path) -> dict[str, Any]:
    def drop_latency(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: drop_latency(v) for k, v in x.items() if "latency" not in k}
        return [drop_latency(v) for v in x] if isinstance(x, list) else x

    return {p.name: drop_latency(json.loads(p.read_text()))
            for p in (run_dir / "reports").rglob("*.json")}


def test_eval_score_and_report_write_the_same_two_report_files(tmp_path: Path) -> None:
    """The one report builder: ``score`` and ``report`` write both files ``eval`` wrote
    (groundscope's and the EvalScope-schema one) again, with the same content."""
    from groundscope import run_task
    from groundscope.report.evalscope import evalscope_report
    from groundscope.report.model import DatasetReport
    from groundscope.rescore import rebuild_report

    with SimulatorServer() as url:
        run_dir = Path(run_task({**_config(tmp_path / "data"), "api_url": url}).run_dir)
    after_eval = _reports(run_dir)
    assert sorted(after_eval) == ["general_vqa.groundscope.json", "general_vqa.json"]
    ours = DatasetReport.model_validate(after_eval["general_vqa.groundscope.json"])
    assert after_eval["general_vqa.json"]["dataset_name"] == "general_vqa"
    assert after_eval["general_vqa.json"]["score"] == evalscope_report(ours)["score"]
    for again in (rescore_run, rebuild_report):
        for path in (run_dir / "reports").rglob("*.json"):
            path.unlink()
        again(run_dir)
        assert _reports(run_dir) == after_eval, again.__name__
