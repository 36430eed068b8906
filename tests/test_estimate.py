"""``--dry-run`` estimates a run before any request: nothing reaches the endpoint, the model's
request count is the real run's, each judge step's upper bound holds against a real run on the
simulator (every strategy, grounding with votes and two models, the hostile fan-out corpus),
image tokens follow OpenAI's tile rule on real image bytes, prices give costs."""

from __future__ import annotations

import contextvars
import json
import math
import runpy
import urllib.request
import wave
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXAMPLES, dataset_samples, run_cli
from groundscope import media, run_task
from groundscope.client.apis import wire_api
from groundscope.client.charge import estimate_tokens
from groundscope.config import SimulatorArgs, load_config
from groundscope.estimate import Estimate, estimate, estimate_json, render_estimate
from groundscope.estimate.tokens import TokenCounter, completion_cap
from groundscope.pricing import Price
from groundscope.scoring.grounding_prompt import (
    CLAIMS_MARKER,
    COMPLETENESS_MARKER,
    EQUIVALENCE_MARKER,
    VERIFY_BATCH_MARKER,
    VERIFY_MARKER,
)
from groundscope.scoring.judge_prompt import JUDGE_MARKER
from groundscope.simulator import Oracle, SimBehaviour, SimulatorServer, sim_responders
from groundscope.tokens import image_tokens, text_tokens
from groundscope.types import MediaPart, MediaRef, Message, Modality, TextPart
from media_fixtures import image_bytes, wav_bytes, write, write_jsonl

MARKERS = {JUDGE_MARKER: "correctness", CLAIMS_MARKER: "claims", VERIFY_MARKER: "verification",
           VERIFY_BATCH_MARKER: "verification",
           COMPLETENESS_MARKER: "completeness", EQUIVALENCE_MARKER: "equivalence"}
VQA = {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}
MCQ = {"local_path": str(EXAMPLES / "mcq"), "subset_list": ["example"]}
GROUNDING = {"local_path": str(EXAMPLES / "grounding"), "subset_list": ["scenes", "questions"],
             "metric_list": ["grounding", "completeness", "consistency"]}
TRUTH = str(EXAMPLES / "grounding" / "truth.json")
MAKE = runpy.run_path(str(Path(__file__).parent / "untrusted" / "config" / "make_corpus.py"))


def _server(datasets: dict[str, dict[str, Any]], truth: str | None = None) -> SimulatorServer:
    """The model and every judge on one loopback simulator (as a mock run's own)."""
    samples = [s for name, args in datasets.items()  # the samples matter here, not the metrics
               for s in dataset_samples(name, {name: {k: v for k, v in args.items()
                                                      if k != "metric_list"}})]
    return SimulatorServer(Oracle.from_samples(samples), SimBehaviour(accuracy=0.7, seed=1),
                           responders=sim_responders(SimulatorArgs(truth=truth)))


def _on_wire(server: SimulatorServer) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Requests received by (step, model): first attempts, and all (repair turns too); the
    step is read off the prompt's marker, a repair turn is a request of more than one message."""
    first: Counter[tuple[str, str]] = Counter()
    every: Counter[tuple[str, str]] = Counter()
    for record in server.requests():
        messages = record["body"]["messages"]
        content = messages[0]["content"]
        text = content if isinstance(content, str) else content[0].get("text", "")
        key = (next((s for m, s in MARKERS.items() if text.startswith(m)), "model"),
               record["model"])
        every[key] += 1
        first[key] += len(messages) == 1 or key[0] == "model"
    return first, every


def _run_and_compare(cfg: dict[str, Any], server: SimulatorServer
                     ) -> tuple[Estimate, Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Estimate, then run against the simulator: the model's requests are the estimate's,
    every step's first attempts are within its bound, and all its requests within the bound
    with repairs."""
    est = estimate(cfg)
    assert server.stats()["requests"] == 0  # estimating sent nothing
    run_task(cfg)
    first, every = _on_wire(server)
    assert every[("model", "m")] == est.row("model").requests  # exact
    bounds = {(r.step, r.model_id): r for r in est.rows}
    assert set(every) <= set(bounds), (every, bounds)
    for key, n in every.items():
        assert first[key] <= bounds[key].requests, (key, first[key], bounds[key])
        assert n <= bounds[key].requests_with_repairs, (key, n, bounds[key])
    return est, first, every


def _cfg(url: str, work: Path, datasets: dict[str, dict[str, Any]], judge: dict[str, Any],
         **extra: Any) -> dict[str, Any]:
    return {"model": "m", "api_url": url, "datasets": list(datasets), "dataset_args": datasets,
            "judge": judge, "work_dir": str(work), "no_timestamp": True, "ignore_errors": True,
            **extra}


@pytest.mark.parametrize("strategy", ["llm", "llm_recall", "rule"])
def test_judge_strategies_bounds_hold_and_model_requests_are_exact(strategy: str,
                                                                   tmp_path: Path) -> None:
    datasets = {"general_vqa": VQA, "general_vmcq": MCQ}
    server = _server(datasets)
    with server as url:
        judges = [{"model_id": f"judge-{k}", "api_url": url} for k in "ab"]
        cfg = _cfg(url, tmp_path, datasets, {"strategy": strategy, "models": judges},
                   limit=6, repeats=2)
        est, sent, _ = _run_and_compare(cfg, server)
    vqa, mcq = est.datasets
    assert (vqa.samples, mcq.samples, est.row("model").requests) == (6, 3, 18)
    if strategy == "rule":  # no judge: no judge row, no judge request
        assert [r.step for r in est.rows] == ["model"] and set(sent) == {("model", "m")}
        return
    for judge in ("judge-a", "judge-b"):  # free-form samples only: choices match by letter
        assert est.row("correctness", judge).requests == 6 * 2
        assert est.row("correctness", judge).requests_with_repairs == 6 * 2 * 3  # max_repairs 2
        assert sent[("correctness", judge)] > 0
    if strategy == "llm":  # every free-form answer is judged once; the second repeat's
        # answer is the same (the simulator is deterministic): served from the judge cache
        assert sent[("correctness", "judge-a")] + sent[("correctness", "judge-b")] == 12


def test_grounding_bounds_hold_with_votes_and_two_models(tmp_path: Path) -> None:
    server = _server({"general_vqa": GROUNDING}, truth=TRUTH)
    with server as url:
        models = [{"model_id": f"g-{k}", "api_url": url} for k in "12"]
        judge = {"models": models, "grounding": {"votes": 3, "max_claims": 4}}
        est, sent, _ = _run_and_compare(_cfg(url, tmp_path, {"general_vqa": GROUNDING}, judge),
                                        server)
    (count,) = est.datasets
    assert (count.records, count.samples) == (13, 16)  # paraphrases: a record, several samples
    assert est.row("claims").requests == 16  # every sample has an image
    for model in ("g-1", "g-2"):  # 16 samples x 4 claims x 3 votes, each model
        assert est.row("verification", model).requests == 16 * 4 * 3
        assert sent[("verification", model)] > 0
    assert est.row("completeness").requests == 4  # the records listing elements
    assert sent[("claims", "g-1")] > 0 and sent[("equivalence", "g-1")] > 0


def test_batch_verification_bound_is_one_request_per_answer_and_vote(tmp_path: Path) -> None:
    server = _server({"general_vqa": GROUNDING}, truth=TRUTH)
    with server as url:
        models = [{"model_id": f"g-{k}", "api_url": url} for k in "12"]
        judge = {"models": models, "max_repairs": 1,
                 "grounding": {"votes": 3, "max_claims": 4, "verify": "batch"}}
        est, sent, _ = _run_and_compare(_cfg(url, tmp_path, {"general_vqa": GROUNDING}, judge),
                                        server)
    for model in ("g-1", "g-2"):  # 16 answers x 3 votes; a broken batch falls back per claim
        row = est.row("verification", model)
        assert row.requests == 16 * 3
        assert row.requests_with_repairs == (16 * 3 + 16 * 3 * 4) * 2
        assert 0 < sent[("verification", model)] <= row.requests


def test_fan_out_corpus_bounds_hold(tmp_path: Path) -> None:
    """The hostile fan-out corpus (5,000 claims, 100 elements, 59 paraphrases, 20 references):
    every step stays within its bound, and the bounds are the documented formulas."""
    data, truth = MAKE["fanout"](tmp_path / "corpus")
    args = {"local_path": str(data), "metric_list": ["grounding", "completeness", "consistency"]}
    server = _server({"general_vqa": args}, truth=str(truth))
    with server as url:
        judge = {"models": {"model_id": "judge", "api_url": url}}
        est, _, every = _run_and_compare(_cfg(url, tmp_path / "run", {"general_vqa": args},
                                              judge), server)
    assert every[("claims", "judge")] > est.row("claims").requests  # repairs happened, bounded
    assert est.row("verification").requests == est.row("claims").requests * 32  # max_claims
    assert est.row("completeness").requests == 0  # 100 elements > max_elements: not scored
    # a 60-member group: its first 16 (max_group_size) -> 120 pairs; the referenced group of
    # 2 members with 16 of 20 references each: 1 pair + 2 x 16 reference checks
    assert est.row("equivalence").requests == 120 + 1 + 2 * 16


def test_dry_run_sends_nothing_and_writes_nothing(tmp_path: Path) -> None:
    server = _server({"general_vqa": VQA})
    with server as url:
        judge = json.dumps({"strategy": "llm", "models": {"model_id": "j", "api_url": url}})
        args = json.dumps({"general_vqa": VQA})
        common = ("eval", "--model", "m", "--api-url", url, "--datasets", "general_vqa",
                  "--dataset-args", args, "--judge", judge, "--work-dir", str(tmp_path / "out"),
                  "--generation-config", "max_tokens=32", "--media-root", str(EXAMPLES / "media"))
        table = run_cli(*common, "--dry-run", cwd=tmp_path)
        machine = run_cli(*common, "--dry-run", "--json", cwd=tmp_path)
        with urllib.request.urlopen(url.removesuffix("/v1") + "/_sim/stats") as reply:
            stats = json.loads(reply.read())
    assert table.returncode == 0 and machine.returncode == 0, table.stderr + machine.stderr
    assert stats["requests"] == 0
    assert not (tmp_path / "out").exists()
    shown = json.loads(machine.stdout)
    assert shown["config"]["model"] == "m"
    steps = {s["step"]: s for s in shown["estimate"]["steps"]}
    n = len(dataset_samples("general_vqa", {"general_vqa": VQA}))
    assert steps["model"]["requests"] == n and steps["model"]["bound"] == "exact"
    assert steps["correctness"]["requests"] == n and steps["correctness"]["bound"] == "upper"
    assert steps["model"]["completion_tokens_max"] == 32 * n
    # the table shows the same numbers
    lines = table.stdout.splitlines()
    model_line = next(line for line in lines if line.startswith("model "))
    judge_line = next(line for line in lines if line.startswith("correctness "))
    assert f" {n} " in model_line and f"~{steps['model']['prompt_tokens']:,}" in model_line
    assert f"≤ {n} " in judge_line and f"≤ {3 * n}" in judge_line  # with 2 repairs each
    assert f"≤ {32 * n:,}" in model_line


def test_json_flag_needs_dry_run(tmp_path: Path) -> None:
    proc = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--json",
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "groundscope: error: --json: only with --dry-run"


SIZES = {"square.png": ((1024, 1024), "high", 765), "tall.png": ((2048, 4096), None, 1105),
         "big.jpg": ((4000, 3000), "low", 85), "small.png": ((300, 200), "auto", 255)}


def _image_dataset(root: Path) -> Path:
    data = root / "images"
    records = []
    for name, ((w, h), detail, _) in SIZES.items():
        write(data, name, image_bytes("JPEG" if name.endswith("jpg") else "PNG", (w, h)))
        part: dict[str, Any] = {"url": name, **({"detail": detail} if detail else {})}
        records.append({"id": name, "answer": "a disc", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": part}]}]})
    write_jsonl(data / "sized.jsonl", records)
    return data


def test_image_tokens_follow_the_tile_rule_on_real_image_bytes(tmp_path: Path) -> None:
    data = _image_dataset(tmp_path)
    for (w, h), detail, tokens in SIZES.values():
        assert image_tokens(w, h, detail) == tokens
    est = estimate({"eval_type": "mock", "datasets": ["general_vqa"],
                    "dataset_args": {"general_vqa": {"local_path": str(data)}}})
    assert est.media.images == 4 and est.media.image_tokens == sum(t for *_, t in SIZES.values())
    text = 3 + 3 + text_tokens("What is this?")  # reply priming, one message, its text
    assert est.row("model").prompt_tokens == 4 * text + est.media.image_tokens


def test_an_image_size_is_read_from_its_header_only(tmp_path: Path) -> None:
    """A PNG cut after its header still has a size: no pixel is decoded."""
    whole = image_bytes("PNG", (1500, 900))
    path = write(tmp_path, "cut.png", whole[:100])
    with media.media_roots_in_force([tmp_path]):
        size = media.probe(MediaRef(Modality.IMAGE, str(path)))
    assert (size.width, size.height, size.nbytes) == (1500, 900, 100)


def test_audio_seconds_from_a_wav_header(tmp_path: Path) -> None:
    path = write(tmp_path, "tone.wav", wav_bytes(seconds=1.5, rate=16000))
    with wave.open(str(path)) as w:
        seconds = w.getnframes() / w.getframerate()
    with media.media_roots_in_force([tmp_path]):
        assert media.probe(MediaRef(Modality.AUDIO, str(path))).seconds == pytest.approx(seconds)
    example = EXAMPLES / "media" / "sample.wav"
    with wave.open(str(example)) as w, media.media_roots_in_force([example.parent]):
        got = media.probe(MediaRef(Modality.AUDIO, str(example))).seconds
        assert got == pytest.approx(w.getnframes() / w.getframerate())


def test_cost_where_priced(tmp_path: Path) -> None:
    cfg = load_config({
        "eval_type": "mock", "datasets": ["general_vqa"], "dataset_args": {"general_vqa": VQA},
        "generation_config": {"max_tokens": 100},
        "judge": {"strategy": "llm", "models": [
            {"model_id": "priced-judge", "api_url": "mock",
             "generation_config": {"max_tokens": 50}},
            {"model_id": "free-judge", "api_url": "mock"}]},
        "pricing": {"groundscope-sim": {"input": 2.5, "output": 10.0},
                    "priced-judge": {"input": 1.0, "output": 4.0}}})
    est = estimate(cfg)
    model, judge = est.row("model"), est.row("correctness", "priced-judge")
    assert model.completion_tokens == 100 * model.requests
    assert est.cost(model) == pytest.approx(Price(input=2.5, output=10.0).cost(
        model.prompt_tokens, 100 * model.requests))
    assert est.cost(judge) == pytest.approx(
        (judge.prompt_tokens * 1.0 + judge.requests * 50 * 4.0) / 1e6)
    assert est.cost(est.row("correctness", "free-judge")) is None
    totals = estimate_json(est)["totals"]
    assert totals["cost"] == pytest.approx(est.cost(model) + est.cost(judge), abs=1e-6)
    assert totals["unpriced_models"] == ["free-judge"]
    assert totals["completion_tokens_max"] is None  # free-judge sends no cap
    table = render_estimate(est)
    assert f"{est.cost(model):,.4f}" in table and f"{est.cost(judge):,.4f}" in table
    assert "Not priced (no cost shown): free-judge" in table


def test_text_tokens_count_cjk_apart() -> None:
    assert text_tokens("abcd" * 10) == 10
    assert text_tokens("图片里有什么") == 6
    assert text_tokens("a" * 5) == math.ceil(5 / 4)


def test_video_frames_and_max_image_side_change_the_media_tokens(tmp_path: Path) -> None:
    """With ``video_frames`` N a video is N frames of at most 768 px (or max_image_side);
    ``max_image_side`` counts an image at its downscaled size (read from its header)."""
    big = write(tmp_path, "big.png", image_bytes("PNG", size=(2048, 1024)))
    image = MediaRef(Modality.IMAGE, str(big))
    video = MediaRef(Modality.VIDEO, str(EXAMPLES / "media" / "sample.mp4"))

    def check() -> None:  # in a copy of the context: the roots set here do not leak
        media.set_media_roots([tmp_path, EXAMPLES])
        plain = TokenCounter()
        framed = TokenCounter(settings=media.MediaSettings(video_frames=4, max_image_side=512))
        assert plain.medium(image) == image_tokens(2048, 1024, None)
        assert framed.medium(image) == image_tokens(512, 256, None) < plain.medium(image)
        assert plain.medium(video) == 6120
        assert framed.medium(video) == 4 * image_tokens(512, 512, None)

    contextvars.copy_context().run(check)


@pytest.mark.parametrize("api", ["openai_api", "anthropic_api", "openai_responses_api"])
def test_the_gate_charges_a_body_what_the_dry_run_counts_for_its_messages(tmp_path: Path,
                                                                         api: str) -> None:
    """One token estimate: the body each API builds from real messages (CJK text, a real WAV,
    images of unknown size at detail low (not sent to Anthropic's API) and auto) is charged
    the dry-run's prompt tokens for those messages, plus the completion cap."""
    wav = write(tmp_path, "tone.wav", wav_bytes(seconds=2.5, rate=16000))
    audio = [MediaPart(MediaRef(Modality.AUDIO, str(wav)))] if api == "openai_api" else []
    low = None if api == "anthropic_api" else "low"
    messages = (Message("system", "Answer briefly."),
                Message("user", (TextPart("这是什么动物？ What animal is this?"),
                                 MediaPart(MediaRef(Modality.IMAGE, "https://x/a.png", detail=low)),
                                 MediaPart(MediaRef(Modality.IMAGE, "https://x/b.png")), *audio)))
    config = {"max_tokens": 64, **({"n": 2} if api == "openai_api" else {})}
    with media.media_roots_in_force([tmp_path]):
        body = wire_api(api).body(messages, "m", config, None)
        counted = TokenCounter().prompt(messages)
    assert counted > 3 + 2 * 3 + 765 + image_tokens(None, None, low)  # texts and audio count
    assert estimate_tokens(body) == counted + completion_cap(config, api)
