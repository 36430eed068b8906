"""Untrusted configs and judge fan-out (issue 12, items 13-15).

- values at the edges, as flags (``groundscope eval`` subprocesses against a loopback
  simulator), as YAML files and as ``TaskConfig`` data: each is a one-line error naming its
  field, exit code 2, before any request and before a run directory exists;
- ``limit`` has one rule, the same with and without ``shuffle``;
- configs are read within bounds: a billion-laughs YAML, an alias cycle, an oversize file,
  deep nesting, a damaged run ``config.json``;
- the judge fan-out is bounded and every cut is reported: an answer of 5,000 claims, claims
  of 2,000 characters and of 1 MB, a record of 100 expected elements, a group of 60
  paraphrases; media, messages, options and subsets per record / dataset are capped.

The hostile inputs live in tests/untrusted/config/ (small files, and make_corpus.py for the
big ones).
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from cli_support import EXAMPLES, ROOT, run_cli
from groundscope import run_task
from groundscope.cli import main
from groundscope.config import TaskConfig, load_config
from groundscope.errors import ConfigError, RecordError
from groundscope.plan import iter_samples, plan_dataset
from groundscope.report.table import render_summary
from groundscope.scoring.grounding_prompt import (
    CLAIMS_MARKER,
    COMPLETENESS_MARKER,
    EQUIVALENCE_MARKER,
    VERIFY_MARKER,
    quoted,
)
from groundscope.simulator import SimulatorServer
from groundscope.simulator.grounding import GroundingResponder, GroundTruth, ScriptedAnswers
from media_fixtures import write_jsonl

CORPUS = Path(__file__).parent / "untrusted" / "config"
MAKE = runpy.run_path(str(CORPUS / "make_corpus.py"))
VQA = {"general_vqa": {"local_path": str(EXAMPLES / "vqa")}}
EDGE_CASES: dict[str, dict[str, Any]] = yaml.safe_load((CORPUS / "edge_values.yaml").read_text())


@pytest.fixture(scope="module")
def server():
    """A loopback model: any request it receives is counted."""
    sim = SimulatorServer()
    sim.start()
    yield sim
    sim.stop()


# ------------------------------------------------------------------ item 15: flags

# (flag, value, what the one line names, what it says)
FLAGS = [
    ("--limit", "1e30", "limit:", "at most 2**53"),
    ("--limit", "0", "limit:", "must be a record count >= 1"),
    ("--limit", "-1", "limit:", "must be a record count >= 1"),
    ("--limit", "0.0", "limit:", "must be a record count >= 1"),
    ("--limit", "1.0", "limit:", "1.0 is ambiguous"),
    ("--limit", "1.5", "limit:", "must be a record count >= 1"),
    ("--limit", "nan", "limit:", "must be a record count >= 1"),
    ("--seed", "99999999999999999999999", "seed:", "less than or equal to 4294967295"),
    ("--seed", "-1", "seed:", "greater than or equal to 0"),
    ("--timeout", "inf", "timeout:", "finite number"),
    ("--timeout", "nan", "timeout:", "finite number"),
    ("--timeout", "0", "timeout:", "greater than 0"),
    ("--eval-batch-size", "0", "eval_batch_size:", "greater than or equal to 1"),
    ("--eval-batch-size", "-3", "eval_batch_size:", "greater than or equal to 1"),
    ("--eval-batch-size", str(10**9), "eval_batch_size:", "less than or equal to 4096"),
    ("--repeats", "0", "repeats:", "greater than or equal to 1"),
    ("--repeats", str(10**9), "repeats:", "less than or equal to 1000"),
    ("--max-retries", "-1", "max_retries:", "greater than or equal to 0"),
    ("--retry-base-delay", "inf", "retry_base_delay:", "finite number"),
    ("--max-error-rate", "2", "max_error_rate:", "less than or equal to 1"),
    ("--max-image-pixels", "0", "max_image_pixels:", "greater than or equal to 1"),
    ("--max-media-per-record", "100000", "max_media_per_record:", "less than or equal to 1024"),
    ("--seed", "1.5", "argument --seed:", "invalid int value"),
    ("--generation-config", "max_tokens=99999999999999999999999", "generation_config:",
     "out of the 64-bit range"),
    ("--generation-config", '{"stop": ' + "[" * 50_000 + "]" * 50_000 + "}",
     "argument --generation-config:", "nested deeper than 64 levels"),
    ("--config", str(CORPUS / "billion_laughs.yaml"), "billion_laughs.yaml:",
     "once YAML aliases are expanded"),
]


def _eval(args: list[str], work: Path, url: str) -> subprocess.CompletedProcess[str]:
    """``groundscope eval ARGS``; a run that does not end is a result too (code None)."""
    argv = [sys.executable, "-m", "groundscope", "eval", "--model", "m", "--api-url", url,
            "--datasets", "general_vqa", "--dataset-args", json.dumps(VQA),
            "--work-dir", str(work), "--no-progress", *args]
    try:
        return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, None, "", "still running after 120 s")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def flag_runs(server, tmp_path_factory) -> dict[int, tuple[subprocess.CompletedProcess[str], Path]]:
    """Every FLAGS case as its own ``groundscope eval`` process (a few at a time)."""
    root = tmp_path_factory.mktemp("flags")
    server.reset()

    def one(i: int) -> tuple[subprocess.CompletedProcess[str], Path]:
        flag, value, _, _ = FLAGS[i]
        work = root / f"case{i}"
        return _eval([flag, value], work, server.base_url), work

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(range(len(FLAGS)), pool.map(one, range(len(FLAGS))), strict=True))


@pytest.mark.parametrize("i", range(len(FLAGS)), ids=[f"{f}={v[:20]}" for f, v, _, _ in FLAGS])
def test_a_flag_at_the_edge_is_one_line_and_exit_2_before_any_request(flag_runs, server, i):
    proc, work = flag_runs[i]
    _, _, field, problem = FLAGS[i]
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("groundscope: error: "), proc.stderr[:2000]
    assert field in lines[0] and problem in lines[0], lines[0]
    assert not work.exists()  # no run directory, no config.json
    assert server.stats()["requests"] == 0  # no case sent anything


def test_report_seed_out_of_range_is_one_line(tmp_path: Path) -> None:
    proc = run_cli("report", "a", "b", "--seed", "-1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "groundscope: error: argument --seed: must be in 0..4294967295, got -1"]


def test_a_json_flag_over_1_mib_is_refused_unread(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    # argv cannot carry 1 MiB on Linux (128 KiB per argument): the same parser, in process
    huge = json.dumps({"general_vqa": {"local_path": "x", "system_prompt": "y" * (1 << 20)}})
    with pytest.raises(SystemExit) as stop:
        main(["eval", "--datasets", "general_vqa", "--dataset-args", huge,
              "--work-dir", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["groundscope: error: argument --dataset-args: over 1048576 characters "
                   "(1 MiB); refused"]


# ------------------------------------------------------------------ item 15: YAML, TaskConfig


def _base(**extra: Any) -> dict[str, Any]:
    return {"eval_type": "mock", "datasets": ["general_vqa"], "dataset_args": VQA, **extra}


def _merged(case: dict[str, Any]) -> dict[str, Any]:
    data = _base()
    for key, value in case["config"].items():
        data[key] = value
    return data


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_an_edge_value_in_a_yaml_config_is_one_line_naming_its_field(name: str,
                                                                      tmp_path: Path) -> None:
    case = EDGE_CASES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(_merged(case)))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{case['field']}: ") and "\n" not in message, message
    assert case["problem"] in message, message


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_an_edge_value_in_a_task_config_names_its_field(name: str) -> None:
    case = EDGE_CASES[name]
    with pytest.raises(ValidationError) as err:
        TaskConfig.model_validate(_merged(case))
    first = err.value.errors()[0]
    assert ".".join(str(p) for p in first["loc"]).startswith(case["field"])
    assert first["type"] != "extra_forbidden"  # a known field, refused for its value
    assert case["problem"] in first["msg"], first["msg"]


def test_yaml_cases_through_the_command_line_write_nothing(server, tmp_path: Path) -> None:
    server.reset()
    for name in ("limit_zero", "limit_zero_shuffled", "timeout_inf", "seed_huge"):
        data = {**_merged(EDGE_CASES[name]), "eval_type": "openai_api", "model": "m",
                "api_url": server.base_url, "work_dir": str(tmp_path / name)}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        proc = run_cli("eval", "--config", str(path), "--no-progress", cwd=ROOT)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[-2000:]
        assert f"error: {EDGE_CASES[name]['field']}: " in proc.stderr
        assert not (tmp_path / name).exists()
    assert server.stats()["requests"] == 0


def test_values_just_inside_the_edges_are_valid() -> None:
    cfg = load_config(_base(limit="1e3", seed=2**32 - 1, timeout=86_400, repeats=1000,
                            eval_batch_size=4096, max_retries=100))
    assert (cfg.limit, cfg.seed, cfg.repeats) == (1000, 2**32 - 1, 1000)
    assert load_config(_base(limit=5.0, seed=0)).limit == 5
    assert load_config(_base(limit=0.25)).limit == 0.25


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{k}", "messages": [{"role": "user", "content": f"Question {k}?"}],
             "answer": "yes", "paraphrases": [f"Question {k}, again?", f"And {k}?"]}
            for k in range(n)]


@pytest.mark.parametrize("limit", [2, 0.5])
def test_limit_keeps_the_same_number_of_records_with_and_without_shuffle(
        tmp_path: Path, limit: int | float) -> None:
    write_jsonl(tmp_path / "s.jsonl", _records(4))  # 4 records of 3 questions each
    got = {}
    for shuffle in (False, True):
        args = {"general_vqa": {"local_path": str(tmp_path), "shuffle": shuffle}}
        cfg = load_config(_base(dataset_args=args, limit=limit))
        samples = [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vqa"), strict=False)]
        assert not any(isinstance(s, RecordError) for s in samples)
        got[shuffle] = samples
    for samples in got.values():  # 2 whole records: a paraphrase group is never split
        assert len(samples) == 6 and len({s.origin.line for s in samples}) == 2
    assert [s.id for s in got[False]][:3] == ["r0#p0", "r0#p1", "r0#p2"]


# ------------------------------------------------------------------ item 14: config bounds


def test_a_billion_laughs_yaml_is_refused_with_bounded_memory() -> None:
    path = CORPUS / "billion_laughs.yaml"
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as err:
            load_config(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(err.value) == (f"{path}: more than 100000 values once YAML aliases are expanded "
                              "(an alias bomb?); refused")
    assert peak < 16 * 2**20, peak  # the graph is measured, never expanded


def test_a_yaml_alias_cycle_is_refused() -> None:
    path = CORPUS / "alias_cycle.yaml"
    with pytest.raises(ConfigError, match=r"alias_cycle\.yaml: a YAML alias refers to its own "
                                          r"anchor \(a cycle\); refused$"):
        load_config(path)


def test_an_oversize_or_deep_config_file_is_refused(tmp_path: Path) -> None:
    big = MAKE["oversize_config"](tmp_path)
    with pytest.raises(ConfigError, match=r"oversize\.yaml: config file is over 1048576 bytes"):
        load_config(big)
    deep = MAKE["deep_json"](tmp_path)
    with pytest.raises(ConfigError, match=r"deep\.json: nested deeper than 64 levels; refused$"):
        load_config(deep)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("finished")
    run_task(_base(limit=1, work_dir=str(work), no_timestamp=True))
    return work


@pytest.mark.parametrize("content,problem", [
    ('{"eval_type": "mock", "datasets": ["general_vqa"], "generation_config": {"pad": "'
     + "x" * (2 << 20) + '"}}', "run config is over 1048576 bytes (1 MiB); refused"),
    ('{"generation_config": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "nested deeper than 64 levels; refused"),
    ('{"eval_type": "mock", "datasets": [', "not valid JSON"),
], ids=["oversize", "deep", "torn"])
def test_a_damaged_run_config_is_one_line_for_report_and_score(
        finished_run: Path, tmp_path: Path, content: str, problem: str) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "config.json").write_text(content)
    for command in ("report", "score"):
        proc = run_cli(command, str(run), cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert len(proc.stderr.splitlines()) == 1 and problem in proc.stderr, proc.stderr[-2000:]


# ------------------------------------------------------------------ item 13: judge fan-out


@pytest.fixture(scope="module")
def fanout(tmp_path_factory):
    """The fan-out dataset, and a loopback server playing the model and the grounding judge."""
    root = tmp_path_factory.mktemp("fanout")
    data, truth_path = MAKE["fanout"](root)
    truth = GroundTruth.load(truth_path)
    judge = GroundingResponder(truth)
    sim = SimulatorServer(responders=[judge, ScriptedAnswers(truth)], keep_bodies=True)
    sim.start()
    yield data, sim, judge
    sim.stop()


def _fanout_run(fanout, work: Path, subset: str, metric: str, **grounding: Any):
    data, sim, judge = fanout
    sim.reset()
    judge.calls.clear()
    cfg = {"model": "m", "api_url": sim.base_url, "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(data), "subset_list": [subset],
                                            "metric_list": [metric]}},
           "judge": {"models": {"model_id": "judge", "api_url": sim.base_url},
                     "grounding": {"metrics": [metric], **grounding}},
           "work_dir": str(work), "no_timestamp": True}
    report = run_task(cfg)
    rows = [json.loads(line) for p in (work / "reviews").rglob("*.jsonl")
            for line in p.read_text().splitlines()]
    rows = [r for r in rows if r["scorer"] in (metric, "consistency_group")]
    return report.dataset("general_vqa"), {r["sample_id"]: r for r in rows}, dict(judge.calls)


def _prompts(sim: SimulatorServer, marker: str) -> list[str]:
    out = []
    for body in sim.bodies():
        content = body["messages"][0]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        if text.startswith(marker):
            out.append(text)
    return out


def test_claims_per_answer_and_claim_length_are_bounded_and_reported(fanout, tmp_path) -> None:
    rep, reviews, calls = _fanout_run(fanout, tmp_path, "grounding", "grounding")
    # 3 extractions (the 1 MB one: first reply + 2 repairs), 32 + 2 verifications; before:
    # 5,000 + 5 + 1 verification requests, one carrying the 1 MB claim
    assert calls == {CLAIMS_MARKER: 5, VERIFY_MARKER: 34}
    sent = [c for p in _prompts(fanout[1], VERIFY_MARKER) for c in quoted(p, "claim")]
    assert len(sent) == 34 and max(map(len, sent)) <= 500
    assert max(len(json.dumps(b)) for b in fanout[1].bodies()) < 700_000  # never 1 MB
    many = reviews["many-claims"]["detail"]
    assert (many["n_claims"], many["claims_extracted"], many["claims_over_limit"]) == (32, 5000, 4968)
    long = reviews["long-claims"]
    assert long["status"] == "ok" and long["detail"]["claims_too_long"] == 3
    assert [c["claim"] for c in long["detail"]["claims"]] == ["The dog is brown.",
                                                              "The grass is green."]
    huge = reviews["huge-claim"]
    assert huge["status"] == "judge_failed"
    assert "over the limit of 262144 (judge.max_reply_chars)" in huge["detail"]["judge_failed"]
    extra = rep.extra["grounding"]
    assert extra["bounds"] == {"max_claims": 32, "max_claim_chars": 500, "max_elements": 64,
                               "max_group_size": 16, "max_reply_chars": 262144,
                               "max_retries": 2}
    assert extra["overall"]["cut"]["claims_over_max_claims"] == 4968
    assert extra["overall"]["cut"]["claims_over_max_claim_chars"] == 3
    assert extra["overall"]["cut"]["answers_with_claims_cut"] == 2
    note = ("claims not verified in 2 answer(s): 4968 over max_claims (32), "
            "3 longer than max_claim_chars (500)")
    assert f"bounded: {note}" in render_summary([rep])
    html = (tmp_path / "report.html").read_text()
    assert "Bounded judge work" in html and note in html


def test_the_claim_bounds_follow_their_settings(fanout, tmp_path) -> None:
    rep, reviews, calls = _fanout_run(fanout, tmp_path, "grounding", "grounding",
                                      max_claims=4, max_claim_chars=3000)
    assert calls[VERIFY_MARKER] == 4 + 4  # the long claims are valid now; 4 of 5 kept
    assert reviews["long-claims"]["detail"]["claims_over_limit"] == 1
    assert rep.extra["grounding"]["bounds"]["max_claims"] == 4


def test_expected_elements_per_record_are_bounded(fanout, tmp_path) -> None:
    rep, reviews, calls = _fanout_run(fanout, tmp_path, "completeness", "completeness")
    assert COMPLETENESS_MARKER not in calls  # before: one request quoting 100 elements
    row = reviews["many-elements"]
    assert row["status"] == "no_answer" and row["detail"]["too_many_elements"] == 100
    assert rep.extra["grounding"]["overall"]["cut"]["records_over_max_elements"] == 1
    assert "1 record(s) over max_elements (64) not scored" in render_summary([rep])


def test_a_paraphrase_group_is_scored_on_its_first_members(fanout, tmp_path) -> None:
    rep, reviews, calls = _fanout_run(fanout, tmp_path, "consistency", "consistency")
    assert calls == {EQUIVALENCE_MARKER: 16 * 15 // 2}  # before: 60 * 59 / 2 = 1,770
    group = reviews["group:paraphrased"]
    assert group["status"] == "ok" and group["values"]["consistency"] == 0.0
    assert len(group["detail"]["members"]) == 16 and group["detail"]["members_over_limit"] == 44
    assert rep.extra["grounding"]["overall"]["cut"]["group_members_over_max_group_size"] == 44
    assert "44 paraphrase group member(s) over max_group_size (16)" in render_summary([rep])


def test_references_compared_per_answer_are_bounded(fanout, tmp_path) -> None:
    rep, reviews, calls = _fanout_run(fanout, tmp_path, "references", "consistency")
    # 1 answer pair, then each of the 2 answers against its first 16 of 20 references
    assert calls == {EQUIVALENCE_MARKER: 1 + 2 * 16}  # before: 1 + 2 * 20
    group = reviews["group:referenced"]
    assert group["values"]["consistent_correct"] == 0.0
    assert group["detail"]["references_over_limit"] == 2 * 4
    assert rep.extra["grounding"]["overall"]["cut"]["references_over_max_references"] == 8
    assert "8 reference(s) over 16 per answer not compared" in render_summary([rep])


# ------------------------------------------------------------------ item 13: sibling fan-outs


def _image_part() -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "dog.jpg"}}


def _load(tmp_path: Path, dataset: str, name: str, **cfg: Any) -> list[Any]:
    args = {dataset: {"local_path": str(tmp_path), "subset_list": [name]}}
    config = load_config({"eval_type": "mock", "datasets": [dataset], "dataset_args": args,
                          **cfg})
    return [s for _, s in iter_samples(config, plan_dataset(config, dataset), strict=False)]


def test_media_per_record_is_bounded_before_any_medium_is_read(tmp_path: Path) -> None:
    import shutil

    shutil.copyfile(EXAMPLES / "media" / "dog.jpg", tmp_path / "dog.jpg")
    parts = [{"type": "text", "text": "Compare."}, *[_image_part() for _ in range(65)]]
    write_jsonl(tmp_path / "parts.jsonl", [{"id": "p", "messages": [
        {"role": "user", "content": parts}]}])
    placeholders = "".join(f"<image {k}>" for k in range(1, 66))
    write_jsonl(tmp_path / "listed.jsonl", [{"id": "l", "images": ["dog.jpg"] * 65,
                                             "messages": [{"role": "user",
                                                           "content": placeholders}]}])
    write_jsonl(tmp_path / "mcq.jsonl", [{"id": "m", "question": f"Which? {placeholders}",
                                          "options": ["a", "b"], "answer": "A",
                                          "images": ["dog.jpg"] * 65}])
    for dataset, name in (("general_vqa", "parts"), ("general_vqa", "listed"),
                          ("general_vmcq", "mcq")):
        (item,) = _load(tmp_path, dataset, name)
        assert isinstance(item, RecordError) and item.field == "<media>", item
        assert item.problem == "65 media, over the limit of 64 per record (max_media_per_record)"
        (ok,) = _load(tmp_path, dataset, name, max_media_per_record=65)
        assert not isinstance(ok, RecordError) and len(ok.media()) == 65


def test_messages_options_and_subsets_are_capped(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": f"q{k}"} for k in range(257)]
    write_jsonl(tmp_path / "talk.jsonl", [{"id": "t", "messages": turns}])
    (item,) = _load(tmp_path, "general_vqa", "talk")
    assert isinstance(item, RecordError) and item.problem == "257 messages, over the limit of 256"
    write_jsonl(tmp_path / "opts.jsonl", [{"id": "o", "question": "Which?", "answer": "A",
                                           "options": [f"o{k}" for k in range(101)]}])
    (item,) = _load(tmp_path, "general_vmcq", "opts")
    assert isinstance(item, RecordError) and item.problem == "101 options, over the limit of 100"
    many = tmp_path / "many"
    many.mkdir()
    for k in range(1001):
        (many / f"s{k}.jsonl").write_text("")
    cfg = load_config(_base(dataset_args={"general_vqa": {"local_path": str(many)}}))
    with pytest.raises(ConfigError, match=r"1001 subset files, over the limit of 1000"):
        plan_dataset(cfg, "general_vqa")


@pytest.mark.parametrize("where, config", [
    ("rpm", {"rpm": True}),
    ("eval_batch_size", {"eval_batch_size": True}),
    ("judge.models[0].rpm", {"judge": {"models": {"model_id": "j", "api_url": "mock",
                                                  "rpm": True}}}),
    ("judge.models[0].tpm", {"judge": {"models": {"model_id": "j", "api_url": "mock",
                                                  "tpm": False}}}),
    ("timeout", {"timeout": True}),
    ("pricing.m.input", {"pricing": {"m": {"input": True, "output": 1.0}}}),
])
def test_a_boolean_is_no_number(where: str, config: dict[str, Any]) -> None:
    """``rpm: true`` in a YAML file is a slip: pydantic read it as 1 (a run throttled to one
    request a minute, silently). It is one line naming the key."""
    base = {"model": "m", "api_url": "http://127.0.0.1:1/v1", "datasets": ["general_vqa"]}
    with pytest.raises(ConfigError) as err:
        load_config({**base, **config})
    word = "false" if where.endswith("tpm") else "true"
    assert str(err.value) == f"{where}: a number is expected, not {word}"
