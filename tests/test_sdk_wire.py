"""The wire formats checked against the official ``anthropic`` and ``openai`` Python SDKs
(test-only dependencies):

(a) the SDK clients, pointed at the simulator on loopback, parse its replies (and its errors)
    into their typed objects, and the raw replies pass the SDKs' strict response models;
(b) what groundscope sends (captured by a loopback server) validates against the SDKs'
    request param types, and carries the headers, the top-level system prompt, ``max_tokens``
    and the image block shapes the APIs document.

The SDKs' request param types are ``TypedDict``s whose ``Iterable`` fields pydantic checks
lazily; :func:`materialise` walks every such iterator so each nested message, block and part
is validated (a negative control shows the check can fail).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from api_support import MESSAGE_OK, RESPONSE_OK, Scripted
from groundscope import run_task
from groundscope.simulator import SimBehaviour, SimReply, SimRequest, SimulatorServer
from groundscope.simulator.wire import bytes_id

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
from anthropic.types import Message, TextBlock, ThinkingBlock  # noqa: E402
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: E402
from openai.types.responses import Response  # noqa: E402
from openai.types.responses.response_create_params import (  # noqa: E402
    ResponseCreateParamsNonStreaming,
)

ROOT = Path(__file__).resolve().parents[1]
DOG = ROOT / "examples" / "media" / "dog.jpg"
KEY = "sk-sdk-test-2b7d9e"
SYSTEMS = {"You are a careful visual assistant.", "You are a medical AI assistant."}  # set, own
ARGS = {"general_vqa": {"local_path": str(ROOT / "examples" / "vqa"),
                        "subset_list": ["example_openai"],
                        "system_prompt": "You are a careful visual assistant."}}


def materialise(value: Any) -> Any:
    """``value`` with every lazily validated iterator consumed (and so validated). A block the
    SDK's union read as one of its models (anthropic 2.17 reads a text block as ``TextBlock``)
    is compared as the fields it was given."""
    if isinstance(value, BaseModel):
        return materialise(value.model_dump(exclude_unset=True))
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [materialise(v) for v in value]
    return value


def seen_by(replies: dict[str, SimReply]) -> tuple[list[SimRequest], Any]:
    """A responder answering by the first user text, keeping the requests it saw."""
    seen: list[SimRequest] = []

    def respond(req: SimRequest) -> SimReply | None:
        seen.append(req)
        return replies.get(req.texts[-1])

    return seen, respond


# ------------------------------------------------------------------ (a) SDK clients vs simulator


async def test_anthropic_sdk_parses_the_simulator_messages() -> None:
    seen, respond = seen_by({"What is it?": SimReply("A dog.", reasoning="Fur, four legs."),
                             "Go on": SimReply("The dog is", finish_reason="length")})
    data = base64.b64encode(DOG.read_bytes()).decode()
    async with SimulatorServer(responders=[respond]) as url:
        client = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY,
                                          max_retries=0)
        async with client:
            msg = await client.messages.create(
                model="claude-sim", max_tokens=64, system="Be brief.",
                messages=[{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                                 "data": data}},
                    {"type": "text", "text": "What is it?"}]}])
            raw = await client.messages.with_raw_response.create(
                model="claude-sim", max_tokens=64,
                messages=[{"role": "user", "content": "Go on"}])
    assert isinstance(msg, Message)
    thinking, text = msg.content
    assert isinstance(thinking, ThinkingBlock) and thinking.thinking == "Fur, four legs."
    assert isinstance(text, TextBlock) and text.text == "A dog."
    assert (msg.stop_reason, msg.role, msg.model) == ("end_turn", "assistant", "claude-sim")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    strict = Message.model_validate_json(raw.http_response.content)  # every required field
    assert (strict.stop_reason, strict.content[0].text) == ("max_tokens", "The dog is")
    assert seen[0].texts == ("Be brief.", "What is it?")  # system first, as the chat form
    assert seen[0].media_ids == (bytes_id(DOG.read_bytes()),)  # the base64 block decoded


async def test_openai_sdk_parses_the_simulator_responses() -> None:
    seen, respond = seen_by({"What is it?": SimReply("A dog.", reasoning="Fur."),
                             "Go on": SimReply("The dog is", finish_reason="length")})
    data_url = "data:image/jpeg;base64," + base64.b64encode(DOG.read_bytes()).decode()
    async with SimulatorServer(responders=[respond]) as url:
        client = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
        async with client:
            resp = await client.responses.create(
                model="gpt-sim", instructions="Be brief.", max_output_tokens=64,
                input=[{"role": "user", "content": [
                    {"type": "input_text", "text": "What is it?"},
                    {"type": "input_image", "image_url": data_url, "detail": "auto"}]}])
            raw = await client.responses.with_raw_response.create(model="gpt-sim", input="Go on")
    assert isinstance(resp, Response)
    assert resp.output_text == "A dog." and resp.status == "completed"
    assert [item.type for item in resp.output] == ["reasoning", "message"]
    assert resp.output[0].summary[0].text == "Fur."
    assert resp.usage is not None and resp.usage.total_tokens == (
        resp.usage.input_tokens + resp.usage.output_tokens)
    strict = Response.model_validate_json(raw.http_response.content)  # every required field
    assert strict.status == "incomplete" and strict.incomplete_details.reason == "max_output_tokens"
    assert seen[0].texts == ("Be brief.", "What is it?")
    assert seen[0].media_ids == (bytes_id(DOG.read_bytes()),)


async def test_the_sdks_read_the_simulator_errors_in_their_api_shape() -> None:
    async with SimulatorServer(behaviour=SimBehaviour(rate_429=1.0)) as url:
        claude = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY,
                                          max_retries=0)
        gpt = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
        async with claude, gpt:
            with pytest.raises(anthropic.RateLimitError) as limited:
                await claude.messages.create(model="m", max_tokens=8,
                                             messages=[{"role": "user", "content": "hi"}])
            with pytest.raises(openai.RateLimitError):
                await gpt.responses.create(model="m", input="hi")
    assert limited.value.body["error"]["type"] == "rate_limit_error"
    async with SimulatorServer() as url:
        claude = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY,
                                          max_retries=0)
        async with claude:
            with pytest.raises(anthropic.BadRequestError) as bad:
                await claude.messages.create(model="m", max_tokens=8, messages=[
                    {"role": "user", "content": [{"type": "image", "source": {
                        "type": "base64", "media_type": "image/bmp", "data": "AAAA"}}]}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    assert "media_type" in bad.value.body["error"]["message"]


# ------------------------------------------------------------------ (b) what groundscope sends


def test_request_params_validation_can_fail() -> None:
    """The negative control: a wrong nested block is caught once the iterators are walked."""
    adapter = TypeAdapter(MessageCreateParamsNonStreaming)
    bad = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "x"}}]}]}
    adapter.validate_python(bad)  # lazily: passes
    with pytest.raises(ValidationError):
        materialise(adapter.validate_python(bad))
    with pytest.raises(ValidationError):
        materialise(TypeAdapter(ResponseCreateParamsNonStreaming).validate_python(
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_audio"}]}]}))


def _run(api: str, url: str, tmp_path: Path) -> None:
    report = run_task({"eval_type": api, "api_url": url, "api_key": KEY, "model": "sdk-check",
                       "datasets": ["general_vqa"], "dataset_args": ARGS, "limit": 5,
                       "work_dir": str(tmp_path), "generation_config": {"max_tokens": 256}})
    assert report.dataset("general_vqa").row("rouge-l-r").num == 5


def test_anthropic_requests_validate_against_the_sdk_params(tmp_path: Path) -> None:
    server = Scripted([(200, MESSAGE_OK, {})])
    with server as url:
        _run("anthropic_api", url, tmp_path)
    adapter = TypeAdapter(MessageCreateParamsNonStreaming)
    images = 0
    for path, headers, body in server.seen:
        assert path == "/v1/messages"
        assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
        assert "Authorization" not in headers
        # temperature is a 2023-06-01 field; SDK 2.x types follow 2026-10-21, which has none
        assert body.pop("temperature") == 0
        assert materialise(adapter.validate_python(body)) == body  # every key known and valid
        assert body["max_tokens"] == 256 and body["system"] in SYSTEMS  # top-level, a string
        assert all(m["role"] in ("user", "assistant") for m in body["messages"])
        for msg in body["messages"]:
            for block in msg["content"] if isinstance(msg["content"], list) else ():
                if block["type"] == "image":
                    images += 1
                    source = block["source"]
                    assert set(source) == {"type", "media_type", "data"}
                    assert source["type"] == "base64"
                    assert source["media_type"] in ("image/jpeg", "image/png")
                    base64.b64decode(source["data"], validate=True)
    assert len(server.seen) == 5 and images >= 3


def test_responses_requests_validate_against_the_sdk_params(tmp_path: Path) -> None:
    server = Scripted([(200, RESPONSE_OK, {})])
    with server as url:
        _run("openai_responses_api", url, tmp_path)
    adapter = TypeAdapter(ResponseCreateParamsNonStreaming)
    images = 0
    for path, headers, body in server.seen:
        assert path == "/v1/responses" and headers["Authorization"] == f"Bearer {KEY}"
        assert materialise(adapter.validate_python(body)) == body
        assert body["instructions"] in SYSTEMS
        assert body["max_output_tokens"] == 256 and body["store"] is False
        for item in body["input"]:
            for part in item["content"]:
                if part["type"] == "input_image":
                    images += 1
                    assert part["image_url"].startswith(("data:image/jpeg;base64,",
                                                         "data:image/png;base64,"))
                    assert part["detail"] in ("auto", "high")  # the record's own, else auto
    assert len(server.seen) == 5 and images >= 3


# ------------------------------------------------------------------ (c) stream: true, as SSE


async def test_the_sdks_consume_the_simulators_streams() -> None:
    """``stream: true`` is answered with each API's server-sent events, which the official
    SDKs' stream readers accumulate into the same answer as the plain reply."""
    _, respond = seen_by({"What is it?": SimReply("A brown dog on green grass, running.",
                                                  reasoning="Fur, four legs, a tail.")})
    ask = [{"role": "user", "content": "What is it?"}]
    async with SimulatorServer(responders=[respond]) as url:
        oa = openai.AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
        an = anthropic.AsyncAnthropic(base_url=url.removesuffix("/v1"), api_key=KEY,
                                      max_retries=0)
        async with oa, an:
            chunks = [c async for c in await oa.chat.completions.create(
                model="gpt-sim", messages=ask, stream=True,
                stream_options={"include_usage": True})]
            async with an.messages.stream(model="claude-sim", max_tokens=64,
                                          messages=ask) as stream:
                message = await stream.get_final_message()
            async with oa.responses.stream(model="gpt-sim", input="What is it?") as stream:
                response = await stream.get_final_response()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "A brown dog on green grass, running."
    assert chunks[-1].usage is not None and chunks[-2].choices[0].finish_reason == "stop"
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == text and message.stop_reason == "end_turn"
    assert message.content[0].thinking == "Fur, four legs, a tail."
    assert response.output_text == text and response.status == "completed"
