"""What goes on the wire, compared with EvalScope (issue 13 items 3, 4, 6, 11, 12).

Tool-calling transcripts are forwarded verbatim; ``--api-key EMPTY`` is sent as
``Bearer EMPTY``; a video's ``fps`` is sent beside its part as a float; ``eval_config`` says
where VLMEvalKit's layouts went; image parts carry ``detail: auto``, no body has ``stream``,
and ``temperature: 0`` is added whenever the config names none (the one kept difference,
``docs/evalscope_differences_wire.md``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_cli
from groundscope.client.chat import ChatClient
from groundscope.client.openai import build_body, request_hash
from groundscope.config import TaskConfig, load_config
from groundscope.dataset import FormatContext, vqa
from groundscope.errors import ConfigError
from groundscope.rowcodec import message_to_json, sample_from_json, sample_to_json
from groundscope.simulator import SimulatorServer
from groundscope.types import Message, Origin, Sample
from media_fixtures import make_media_dir

TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You can call tools.", "name": "setup"},
    {"role": "user", "content": "What is the weather in Paris?", "name": "alice"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_9f", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":  \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_9f", "name": "get_weather", "content": "18 C, sunny"},
    {"role": "user", "content": "So, shorts or coat?"},
]


@pytest.fixture
def ds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_media_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def convert(record: dict[str, Any], ds: Path) -> Sample:
    return vqa.record_to_sample(record, Origin(ds / "data.jsonl", 1),
                                FormatContext("general_vqa", "data", ds))


# ------------------------------------------------------------------ item 3: tool messages


def test_a_tool_calling_transcript_is_sent_verbatim(ds: Path) -> None:
    sample = convert({"messages": TRANSCRIPT, "answer": "shorts"}, ds)
    sent = build_body(sample.messages, "m", {})["messages"]
    expected = [dict(m) for m in TRANSCRIPT]
    expected[2]["content"] = ""  # a null assistant content goes as "", as EvalScope sends it
    assert sent == expected
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{\"city\":  \"Paris\"}"  # not re-serialised
    assert sample.question == "So, shorts or coat?"


async def test_the_simulator_answers_a_tool_transcript(ds: Path) -> None:
    sample = convert({"messages": TRANSCRIPT, "answer": "shorts"}, ds)
    server = SimulatorServer([sample], keep_bodies=True)
    async with server as url, ChatClient(url, "m") as client:
        completion = await client.complete(sample.messages)
        (body,) = server.bodies()
    assert completion.text == "shorts"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][3]["tool_call_id"] == "call_9f"


def test_tool_keys_are_part_of_the_request_hash(ds: Path) -> None:
    base = convert({"messages": TRANSCRIPT}, ds).messages
    other_call = json.loads(json.dumps(TRANSCRIPT))
    other_call[2]["tool_calls"][0]["function"]["arguments"] = "{\"city\": \"Lyon\"}"
    renamed = json.loads(json.dumps(TRANSCRIPT))
    renamed[1]["name"] = "bob"
    hashes = {request_hash(base, "m", {})}
    hashes |= {request_hash(convert({"messages": t}, ds).messages, "m", {})
               for t in (other_call, renamed)}
    assert len(hashes) == 3
    # a message without tool keys hashes as before this change (resume keeps old runs)
    plain = (Message("user", "hi"),)
    doc = {"config": {"temperature": 0}, "messages": [["user", "hi"]], "model": "m"}
    assert request_hash(plain, "m", {}) == hashlib.sha256(
        json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()).hexdigest()


def test_saved_samples_keep_the_tool_keys(ds: Path) -> None:
    sample = convert({"messages": TRANSCRIPT, "answer": "shorts"}, ds)
    saved = json.loads(json.dumps({"sample_id": sample.id, "sample": sample_to_json(sample)}))
    assert saved["sample"]["messages"][2]["tool_calls"] == TRANSCRIPT[2]["tool_calls"]
    back = sample_from_json(saved, "general_vqa", "data")
    assert back.messages == sample.messages
    assert message_to_json(Message("user", "hi")) == {"role": "user", "content": "hi"}


# ------------------------------------------------------------------ item 4: --api-key EMPTY


@pytest.mark.parametrize("key", ["EMPTY", "sk-anything"])
async def test_the_api_key_is_sent_as_given_even_empty(key: str) -> None:
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m", api_key=key) as client:
        await client.complete((Message("user", "hi"),))
        (record,) = server.requests()
    assert record["auth_sha256"] == hashlib.sha256(f"Bearer {key}".encode()).hexdigest()[:16]


def test_cli_api_key_empty_reaches_the_server(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}],
                                "answer": "hello"}) + "\n")
    server = SimulatorServer()
    with server as url:
        proc = run_cli("eval", "--model", "m", "--api-url", url, "--api-key", "EMPTY",
                       "--datasets", "general_vqa", "--dataset-args",
                       json.dumps({"general_vqa": {"local_path": str(data)}}),
                       "--work-dir", str(tmp_path / "out"), "--no-progress", cwd=tmp_path)
        records = server.requests()
    assert proc.returncode == 0, proc.stderr
    assert [r["auth_sha256"] for r in records] == [
        hashlib.sha256(b"Bearer EMPTY").hexdigest()[:16]]


# ------------------------------------------------------------------ item 6: video fps


def test_video_fps_is_sent_beside_the_part_as_a_float(ds: Path) -> None:
    record = {
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What happens?"},
            {"type": "video_url", "video_url": {"url": "media/clip.mp4", "fps": 2}},
            {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}, "fps": 0.5},
        ]}, {"role": "user", "content": "And in <video 1>?"}],
        "videos": [{"url": "https://example.com/w.mp4", "fps": "4", "start": 1.0, "nframes": 8}],
    }
    sent = build_body(convert(record, ds).messages, "m", {})["messages"]
    local, remote = sent[0]["content"][1:]
    column = sent[1]["content"][1]  # "And in ", the video, "?"
    assert (local["fps"], remote["fps"], column["fps"]) == (2.0, 0.5, 4.0)
    assert all(isinstance(p["fps"], float) for p in (local, remote, column))
    assert column == {"type": "video_url", "video_url": {"url": "https://example.com/w.mp4"},
                      "fps": 4.0}  # start / nframes are not sent (EvalScope neither)
    assert local["video_url"]["url"].startswith("data:video/mp4;base64,")


def test_video_fps_is_part_of_the_request_hash(ds: Path) -> None:
    def with_fps(fps: Any) -> str:
        video = {"url": "https://example.com/v.mp4", **({"fps": fps} if fps else {})}
        record = {"messages": [{"role": "user", "content": "What in <video 1>?"}], "video_1": video}
        return request_hash(convert(record, ds).messages, "m", {})

    assert len({with_fps(None), with_fps(1), with_fps(2)}) == 3
    assert with_fps(2) == with_fps(2.0)


# ------------------------------------------------------------------ item 11: eval_config

EVAL_CONFIG = ("config: 'eval_config' is VLMEvalKit's (eval_backend VLMEvalKit) and not used: "
               "its TSV layouts are the datasets legacy_mcq (multiple choice) and legacy_vqa, "
               "e.g. datasets: [legacy_mcq], dataset_args: {legacy_mcq: {local_path: "
               "data/my_mcq.tsv}}")


def test_eval_config_points_at_the_legacy_datasets() -> None:
    base = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"]}
    with pytest.raises(ConfigError) as info:
        load_config({**base, "eval_config": {"model": ["qwen"], "data": ["MMBench"]}})
    assert str(info.value) == EVAL_CONFIG
    assert "did you mean" not in str(info.value)
    with pytest.raises(ConfigError) as built:  # a TaskConfig built in code says the same
        TaskConfig(**base, eval_config="vlm.yaml")
    assert str(built.value) == EVAL_CONFIG


def test_cli_eval_config_is_one_line_with_an_example_and_exit_2(tmp_path: Path) -> None:
    proc = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa",
                   "--eval-config", "vlm.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"groundscope: error: {EVAL_CONFIG}\n"
    assert not (tmp_path / "outputs").exists()


# ------------------------------------------------------------------ item 12: smaller defaults


def test_image_parts_carry_detail_auto_unless_the_record_sets_one(ds: Path) -> None:
    record = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "media/dog.jpg"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/c.jpg", "detail": "low"}},
        {"type": "text", "text": "Same animal?"}]}]}
    first, second, _ = build_body(convert(record, ds).messages, "m", {})["messages"][0]["content"]
    assert first["image_url"]["detail"] == "auto"
    assert second["image_url"] == {"url": "https://example.com/c.jpg", "detail": "low"}


@pytest.mark.parametrize(("config", "sent"), [
    ({}, {"temperature": 0}),
    ({"max_tokens": 64}, {"max_tokens": 64, "temperature": 0}),  # kept: EvalScope sends none
    ({"temperature": 0.7}, {"temperature": 0.7}),
    ({"temperature": None, "max_tokens": 64}, {"max_tokens": 64}),  # the server's default
    ({"stream": True}, {"temperature": 0}),
])
def test_no_stream_key_and_temperature_zero_unless_named(config: dict[str, Any],
                                                         sent: dict[str, Any]) -> None:
    body = build_body((Message("user", "hi"),), "m", config)
    assert {k: v for k, v in body.items() if k not in ("model", "messages")} == sent

