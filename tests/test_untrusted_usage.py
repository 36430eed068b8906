"""Untrusted usage counters (tests/untrusted/usage/usage_values.json): a reply whose
reasoning / cached counter is negative, huge or not an integer is a retryable
``malformed_response`` in every wire module (never summed); a counter above its total is
held to it; absent details are 0. A run directory's saved usage (prediction rows, review
rows, response-cache lines) is checked where read: a bad row is one line naming it, a bad
cache line is skipped, and neither reaches a total."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import dataset_samples, run_cli
from groundscope import run_task
from groundscope.client import anthropic, responses
from groundscope.client.cache import ResponseCache
from groundscope.client.reply import parse_completion
from groundscope.errors import RetryableError, StoreError
from groundscope.rows import read_rows
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.types import MAX_TOKEN_COUNT, Completion, Usage

VALUES = json.loads((Path(__file__).parent / "untrusted" / "usage" / "usage_values.json").read_text())
REFUSED: dict[str, Any] = VALUES["refused"]
ACCEPTED: dict[str, Any] = VALUES["accepted"]


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # json: integers beyond 64 bits too


def chat(usage: dict[str, Any]) -> bytes:
    return _dumps({"model": "m", "choices": [{"message": {"content": "ok"},
                                                    "finish_reason": "stop"}], "usage": usage})


def resp(usage: dict[str, Any]) -> bytes:
    return _dumps({"object": "response", "status": "completed", "model": "m",
                         "output": [{"type": "message", "content": [
                             {"type": "output_text", "text": "ok"}]}], "usage": usage})


def msgs(usage: dict[str, Any]) -> bytes:
    return _dumps({"type": "message", "role": "assistant", "model": "m",
                         "stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}],
                         "usage": usage})


# (parser, reply body with the value as the reasoning counter, ... as the cached counter)
WIRES = {
    "chat": (parse_completion,
             lambda v: chat({"prompt_tokens": 100, "completion_tokens": 50,
                             "completion_tokens_details": {"reasoning_tokens": v}}),
             lambda v: chat({"prompt_tokens": 100, "completion_tokens": 50,
                             "prompt_tokens_details": {"cached_tokens": v}})),
    "responses": (responses.parse_reply,
                  lambda v: resp({"input_tokens": 100, "output_tokens": 50,
                                  "output_tokens_details": {"reasoning_tokens": v}}),
                  lambda v: resp({"input_tokens": 100, "output_tokens": 50,
                                  "input_tokens_details": {"cached_tokens": v}})),
    "anthropic": (anthropic.parse_reply,
                  lambda v: msgs({"input_tokens": 60, "output_tokens": 50,
                                  "cache_read_input_tokens": 40,
                                  "output_tokens_details": {"thinking_tokens": v}}),
                  lambda v: msgs({"input_tokens": 60, "output_tokens": 50,
                                  "cache_read_input_tokens": v})),
}


def test_every_wire_reads_reasoning_and_cached_tokens() -> None:
    for name, (parse, reasoning, cached) in WIRES.items():
        u = parse(reasoning(7)).usage
        assert (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens) == (100, 50, 7), name
        u = parse(cached(40)).usage
        assert (u.prompt_tokens, u.cached_tokens, u.total_tokens) == (100, 40, 150), name


def test_absent_details_are_zero() -> None:
    for body in (chat({"prompt_tokens": 3}), resp({"input_tokens": 3}),
                 msgs({"input_tokens": 3}), chat({"prompt_tokens": 3, "prompt_tokens_details": None})):
        parse = {b"choices": parse_completion, b"object": responses.parse_reply}
        fn = next((f for k, f in parse.items() if k in body), anthropic.parse_reply)
        u = fn(body).usage
        assert (u.prompt_tokens, u.reasoning_tokens, u.cached_tokens) == (3, 0, 0)


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_hostile_counter_is_a_malformed_reply(wire: str, case: str) -> None:
    parse, reasoning, cached = WIRES[wire]
    for body in (reasoning(REFUSED[case]), cached(REFUSED[case])):
        with pytest.raises(RetryableError) as err:
            parse(body)
        assert err.value.kind == "malformed_response"


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_in_range_counters_are_held_to_their_totals(wire: str) -> None:
    parse, reasoning, cached = WIRES[wire]
    for case, value in ACCEPTED.items():
        u = parse(reasoning(value)).usage
        assert 0 <= u.reasoning_tokens <= u.completion_tokens == 50, case
        u = parse(cached(value)).usage
        assert 0 <= u.cached_tokens <= u.prompt_tokens, case
    assert parse(reasoning(2**31 - 1)).usage.reasoning_tokens == 50  # more than it answered


def _prediction_row(usage: Any) -> dict[str, Any]:
    return {"sample_id": "s1", "repeat": 0, "dataset": "general_vqa", "subset": "x",
            "status": "ok", "request_hash": "h", "prediction": "ok", "usage": usage,
            "sample": {"origin": "x.jsonl:1", "messages": [{"role": "user", "content": "q"}]}}


def _review_row(usage: Any) -> dict[str, Any]:
    return {"sample_id": "s1", "repeat": 0, "scorer": "grounding", "status": "ok",
            "values": {}, "usage": usage}


def _write(path: Path, row: dict[str, Any]) -> Path:
    path.write_text(json.dumps(row) + "\n")
    return path


def test_saved_rows_with_the_new_counters_are_read(tmp_path: Path) -> None:
    row = _prediction_row({"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13,
                           "reasoning_tokens": 2, "cached_tokens": 5})
    assert next(iter(read_rows(_write(tmp_path / "p.jsonl", row), "prediction")))["usage"] == row["usage"]
    review = _review_row({"claims": {"j": {"billed": {"requests": 1, "prompt_tokens": 9},
                                           "cached": {"requests": 2}}}})
    assert next(iter(read_rows(_write(tmp_path / "r.jsonl", review), "review")))["usage"]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_hostile_saved_usage_is_one_line_naming_the_row(tmp_path: Path, case: str) -> None:
    value = REFUSED[case]
    bad_prediction = _prediction_row({"prompt_tokens": 1, "reasoning_tokens": value})
    with pytest.raises(StoreError, match=r"p\.jsonl:1: usage\.reasoning_tokens"):
        list(read_rows(_write(tmp_path / "p.jsonl", bad_prediction), "prediction"))
    bad_review = _review_row({"claims": {"j": {"billed": {"prompt_tokens": value}}}})
    with pytest.raises(StoreError, match=r"r\.jsonl:1: usage\.claims\.j\.billed\.prompt_tokens"):
        list(read_rows(_write(tmp_path / "r.jsonl", bad_review), "review"))


def test_review_usage_of_another_shape_is_refused(tmp_path: Path) -> None:
    for usage in ([1, 2], {"claims": [1]}, {"claims": {"j": {"billed": {}, "spent": 1}}}):
        with pytest.raises(StoreError, match=r"r\.jsonl:1: usage"):
            list(read_rows(_write(tmp_path / "r.jsonl", _review_row(usage)), "review"))


def test_hostile_cache_lines_are_skipped_not_summed(tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    good = {"key": "k0", "model": "j", "completion": {"text": "{}", "usage": [3, 4, 7, 1, 2]}}
    old = {"key": "k1", "model": "j", "completion": {"text": "{}", "usage": [3, 4, 7]}}
    lines = [good, old]
    for i, value in enumerate(REFUSED.values()):
        lines.append({"key": f"bad{i}", "model": "j",
                      "completion": {"text": "{}", "usage": [value, 1, 1]}})
    lines.append({"key": "long", "model": "j", "completion": {"text": "{}", "usage": [1] * 6}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cache = ResponseCache(path)
    assert len(cache) == 2
    assert cache.get("k0") == Completion("{}", usage=Usage(3, 4, 7, 1, 2))
    assert cache.get("k1") == Completion("{}", usage=Usage(3, 4, 7))


@pytest.mark.slow
@pytest.mark.parametrize("api", ["openai_api", "anthropic_api", "openai_responses_api"])
def test_a_run_with_the_largest_counts_stays_readable(api: str, tmp_path: Path) -> None:
    """Every count of every reply is 2**31 - 1 (Anthropic's prompt is the sum of three of
    them): what the run writes, its own reader takes back. ``report`` and ``--use-cache``
    succeed, report.html is written, and each saved count is held to the bound."""
    records = [{"id": f"q{i}", "answer": "yes", "messages": [{"role": "user", "content": f"q{i}?"}]}
               for i in range(2)]
    (tmp_path / "text.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    args = {"general_vqa": {"local_path": str(tmp_path), "subset_list": ["text"]}}
    run = tmp_path / "run"
    task = {"eval_type": api, "model": "m", "api_key": "sk-u", "datasets": ["general_vqa"],
            "dataset_args": args, "work_dir": str(run), "no_timestamp": True}
    server = SimulatorServer(dataset_samples("general_vqa", args),
                             SimBehaviour(accuracy=1.0, usage_count=MAX_TOKEN_COUNT))
    with server as url:
        run_task({**task, "api_url": url})
        assert (run / "report.html").is_file()
        (run / "report.html").unlink()
        rebuilt = run_cli("report", str(run), cwd=tmp_path)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert (run / "report.html").is_file()
        (tmp_path / "task.json").write_text(json.dumps({**task, "api_url": url}))
        resumed = run_cli("eval", "--config", "task.json", "--use-cache", str(run),
                          "--no-progress", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
    rows = list(read_rows(next((run / "predictions").rglob("*.jsonl")), "prediction"))
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert all(r["usage"]["prompt_tokens"] == r["usage"]["total_tokens"] == MAX_TOKEN_COUNT
               for r in rows)
