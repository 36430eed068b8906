"""The Anthropic Messages and OpenAI Responses wire modules (pure), then the one client policy
(retries, errors, headers, size cap, redirects) speaking them to real loopback servers."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from PIL import Image

from api_support import MESSAGE_OK, Scripted, anthropic_error
from groundscope.client import anthropic, responses
from groundscope.client.apis import API_NAMES, wire_api
from groundscope.client.chat import ChatClient
from groundscope.client.openai import CHAT
from groundscope.client.retry import NO_RETRY, RetryPolicy
from groundscope.errors import ConfigError, ModelError, ResponseError, RetryableError
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.types import MediaPart, MediaRef, Message, Modality, TextPart

pytestmark = pytest.mark.usefixtures("tmp_media_root")  # media named by tmp_path paths
FAST = RetryPolicy(max_retries=5, base_delay=0.0, max_delay=0.0)
KEY = "sk-ant-test-5c1e9a7f3b"


def ask(png: Path, *, detail: str | None = None) -> tuple[Message, ...]:
    parts = (TextPart("What is this?"), MediaPart(MediaRef(Modality.IMAGE, str(png), detail=detail)),
             MediaPart(MediaRef(Modality.IMAGE, "https://example.org/cat.jpg")))
    return (Message("system", "Be brief."), Message("system", "Answer in English."),
            Message("user", parts), Message("assistant", "A dot."), Message("user", "Sure?"))


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


# ------------------------------------------------------------------ anthropic: request


def test_anthropic_body_has_top_level_system_max_tokens_and_image_blocks(png: Path) -> None:
    body = anthropic.build_body(ask(png), "claude-x", {})
    assert body["model"] == "claude-x"
    assert body["max_tokens"] == 4096  # required by the API; EvalScope's default
    assert body["system"] == "Be brief.\n\nAnswer in English."
    assert body["temperature"] == 0
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": b64(png)}},
            {"type": "image", "source": {"type": "url", "url": "https://example.org/cat.jpg"}}]},
        {"role": "assistant", "content": "A dot."},
        {"role": "user", "content": "Sure?"},
    ]
    assert "stream" not in body


def test_anthropic_sends_only_the_messages_api_settings() -> None:
    config = {"max_tokens": 64, "temperature": 0.5, "top_k": 5, "stop": "END", "seed": 3,
              "n": 2, "frequency_penalty": 0.1, "logprobs": True, "stream": True,
              "extra_body": {"metadata": {"user_id": "u1"}}}
    body = anthropic.build_body([Message("user", "hi")], "m", config)
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "m", "max_tokens": 64, "temperature": 0.5, "top_k": 5,
        "stop_sequences": ["END"], "metadata": {"user_id": "u1"}}


def test_anthropic_thinking_goes_without_the_default_temperature() -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = anthropic.build_body([Message("user", "hi")], "m", {"thinking": thinking})
    assert body["thinking"] == thinking and "temperature" not in body
    set_by_user = anthropic.build_body([Message("user", "hi")], "m",
                                       {"thinking": thinking, "temperature": 1})
    assert set_by_user["temperature"] == 1


@pytest.mark.parametrize("build", [anthropic.build_body, responses.build_body])
@pytest.mark.parametrize("kind", [Modality.AUDIO, Modality.VIDEO])
def test_audio_and_video_are_unsupported_media_before_anything_is_read(
        build: Callable[..., Any], kind: Modality, tmp_path: Path) -> None:
    missing = tmp_path / "not-there.bin"  # never opened: the refusal comes first
    msg = Message("user", (TextPart("Listen"), MediaPart(MediaRef(kind, str(missing)))))
    with pytest.raises(ModelError) as err:
        build([msg], "m", {})
    assert err.value.kind == "unsupported_media"
    assert not isinstance(err.value, RetryableError)
    assert "openai_api" in str(err.value)


@pytest.mark.parametrize("build", [anthropic.build_body, responses.build_body])
def test_a_role_the_api_has_no_turn_for_is_unsupported_message(build: Callable[..., Any]) -> None:
    with pytest.raises(ModelError, match="'tool' messages") as err:
        build([Message("user", "hi"), Message("tool", "42")], "m", {})  # type: ignore[arg-type]
    assert err.value.kind == "unsupported_message"


def test_anthropic_refuses_an_image_type_it_does_not_accept(tmp_path: Path) -> None:
    bmp = tmp_path / "x.bmp"
    Image.new("RGB", (4, 3)).save(bmp)
    msg = Message("user", (MediaPart(MediaRef(Modality.IMAGE, str(bmp))),))
    with pytest.raises(ModelError, match="image/bmp") as err:
        anthropic.build_body([msg], "m", {})
    assert err.value.kind == "unsupported_media"


@pytest.mark.parametrize(("url", "expected"), [
    ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
    ("https://api.anthropic.com/", "https://api.anthropic.com/v1/messages"),
    ("https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"),
    ("https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/messages"),
    ("https://dashscope.aliyuncs.com/apps/anthropic",
     "https://dashscope.aliyuncs.com/apps/anthropic/v1/messages"),
    ("http://127.0.0.1:8000/v1?x=1", "http://127.0.0.1:8000/v1/messages?x=1"),
])
def test_anthropic_endpoint_follows_the_sdk_rule(url: str, expected: str) -> None:
    assert anthropic.endpoint(url, KEY)[0] == expected


def test_anthropic_headers_carry_the_key_and_the_pinned_version() -> None:
    _, headers = anthropic.endpoint("https://h/v1", KEY)
    assert headers == {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    assert anthropic.endpoint("https://h/v1", None)[1] == {"anthropic-version": "2023-06-01"}
    url, basic = anthropic.endpoint("https://u:pw@h/v1", None)
    assert url == "https://h/v1/messages"
    assert basic["Authorization"] == "Basic " + base64.b64encode(b"u:pw").decode()
    with pytest.raises(ConfigError, match="credentials"):
        anthropic.endpoint("https://u:pw@h/v1", KEY)
    with pytest.raises(ConfigError, match="http"):
        anthropic.endpoint("ftp://h/v1", KEY)


# ------------------------------------------------------------------ anthropic: reply


def test_anthropic_reply_text_reasoning_stop_reason_and_usage() -> None:
    raw = orjson.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "thinking", "thinking": "Look at it.", "signature": "s"},
                    {"type": "redacted_thinking", "data": "zzz"},
                    {"type": "text", "text": "A red "}, {"type": "tool_use", "id": "t", "name": "f",
                                                          "input": {}},
                    {"type": "text", "text": "dot."}],
        "stop_reason": "max_tokens", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 4, "cache_creation_input_tokens": 3,
                  "cache_read_input_tokens": 20}})
    c = anthropic.parse_reply(raw)
    assert (c.text, c.reasoning, c.model, c.finish_reason) == ("A red dot.", "Look at it.",
                                                              "claude-x", "length")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (33, 4, 37)


@pytest.mark.parametrize(("native", "ours"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "tool_calls"),
    ("model_context_window_exceeded", "length"), ("pause_turn", "pause_turn"), (None, None)])
def test_anthropic_stop_reasons_map_onto_the_chat_vocabulary(native: str | None, ours: str | None) -> None:
    raw = orjson.dumps({"type": "message", "content": [{"type": "text", "text": "x"}],
                        "stop_reason": native})
    assert anthropic.parse_reply(raw).finish_reason == ours


def test_anthropic_refusal_and_error_in_a_200_are_response_errors() -> None:
    refusal = orjson.dumps({"type": "message", "content": [], "stop_reason": "refusal"})
    with pytest.raises(ResponseError) as err:
        anthropic.parse_reply(refusal)
    assert err.value.kind == "content_filter"
    empty = anthropic.parse_reply(orjson.dumps({"type": "message", "content": [],
                                                "stop_reason": "end_turn"}))
    assert empty.text == ""  # an empty end_turn is an (empty) answer
    error = orjson.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                     "message": "prompt is too long: 9 > 5"}})
    with pytest.raises(ResponseError) as err:
        anthropic.parse_reply(error)
    assert err.value.kind == "context_length"


@pytest.mark.parametrize(("status", "body", "kind", "retryable"), [
    (429, {"type": "rate_limit_error", "message": "slow down"}, "http_429", True),
    (529, {"type": "overloaded_error", "message": "Overloaded"}, "http_529", True),
    (500, {"type": "api_error", "message": "oops"}, "http_500", True),
    (401, {"type": "authentication_error", "message": "invalid x-api-key"}, "http_401", False),
    (403, {"type": "permission_error", "message": "no"}, "http_403", False),
    (413, {"type": "request_too_large", "message": "Request exceeds the maximum size"},
     "request_too_large", False),
    (400, {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > "
                                                      "200000 maximum"}, "context_length", False),
    (429, {"type": "rate_limit_error", "message": "spend limit",
           "details": {"error_code": "enforced_spend_limit_reached"}}, "spend_limit", False),
])
def test_anthropic_error_kinds(status: int, body: dict, kind: str, retryable: bool) -> None:
    raw = orjson.dumps({"type": "error", "error": body, "request_id": "req_1"})
    err = anthropic.map_error(status, raw, "3", str)
    assert (err.kind, isinstance(err, RetryableError), err.status) == (kind, retryable, status)
    assert body["message"] in str(err)
    if retryable:
        assert err.retry_after == 3.0


# ------------------------------------------------------------------ responses: request


def test_responses_body_has_input_parts_instructions_and_mapped_settings(png: Path) -> None:
    config = {"max_tokens": 100, "top_p": 0.5, "seed": 4, "stop": ["x"],
              "reasoning_effort": "low", "extra_body": {"truncation": "auto"}}
    body = responses.build_body(ask(png, detail="high"), "gpt-x", config)
    assert body["instructions"] == "Be brief.\n\nAnswer in English."
    assert body["input"] == [
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{b64(png)}",
             "detail": "high"},
            {"type": "input_image", "image_url": "https://example.org/cat.jpg", "detail": "auto"}]},
        {"role": "assistant", "content": "A dot."},
        {"role": "user", "content": [{"type": "input_text", "text": "Sure?"}]},
    ]
    rest = {k: v for k, v in body.items() if k not in ("input", "instructions")}
    assert rest == {"model": "gpt-x", "store": False, "max_output_tokens": 100, "temperature": 0,
                    "top_p": 0.5, "reasoning": {"effort": "low"}, "truncation": "auto"}


def test_responses_store_can_be_turned_on() -> None:
    assert responses.build_body([Message("user", "hi")], "m", {"store": True})["store"] is True


@pytest.mark.parametrize(("url", "expected"), [
    ("https://api.openai.com/v1", "https://api.openai.com/v1/responses"),
    ("https://api.openai.com", "https://api.openai.com/v1/responses"),
    ("http://h:8/v1/responses/", "http://h:8/v1/responses"),
    ("http://h:8/proxy?k=1", "http://h:8/proxy/responses?k=1"),
])
def test_responses_endpoint_and_bearer_auth(url: str, expected: str) -> None:
    assert responses.endpoint(url, KEY) == (expected, {"Authorization": f"Bearer {KEY}"})


# ------------------------------------------------------------------ responses: reply


def _response(**over: Any) -> bytes:
    body = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-x",
            "output": [
                {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text",
                                                               "text": "Think."}],
                 "content": [{"type": "reasoning_text", "text": "More."}]},
                {"type": "message", "id": "m", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "A red ", "annotations": []},
                             {"type": "output_text", "text": "dot.", "annotations": []}]}],
            "usage": {"input_tokens": 12, "output_tokens": 30, "total_tokens": 42,
                      "output_tokens_details": {"reasoning_tokens": 20}}}
    return orjson.dumps({**body, **over})


def test_responses_reply_text_reasoning_usage() -> None:
    c = responses.parse_reply(_response())
    assert (c.text, c.reasoning, c.model, c.finish_reason) == ("A red dot.", "Think.\nMore.",
                                                              "gpt-x", "stop")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (12, 30, 42)


def test_responses_incomplete_and_failed() -> None:
    cut = responses.parse_reply(_response(status="incomplete",
                                          incomplete_details={"reason": "max_output_tokens"}))
    assert cut.finish_reason == "length" and cut.text == "A red dot."
    filtered = _response(status="incomplete", incomplete_details={"reason": "content_filter"},
                         output=[])
    with pytest.raises(ResponseError) as err:
        responses.parse_reply(filtered)
    assert err.value.kind == "content_filter"
    with pytest.raises(RetryableError) as retry:
        responses.parse_reply(_response(status="failed", output=[],
                                        error={"code": "server_error", "message": "boom"}))
    assert retry.value.kind == "response_failed"
    with pytest.raises(ResponseError) as final:
        responses.parse_reply(_response(status="failed", output=[],
                                        error={"code": "invalid_image", "message": "bad image"}))
    assert final.value.kind == "response_failed" and "bad image" in str(final.value)
    with pytest.raises(ResponseError) as queued:
        responses.parse_reply(_response(status="queued"))
    assert queued.value.kind == "response_status"


# ------------------------------------------------------------------ the policy over each API


def test_every_eval_type_has_a_wire_api() -> None:
    assert API_NAMES == ("openai_api", "anthropic_api", "openai_responses_api")
    assert wire_api("openai_api") is CHAT
    assert all(wire_api(name).name == name for name in API_NAMES)
    assert repr(ChatClient("http://h/v1", "m", wire=wire_api("anthropic_api"))).endswith(
        "api='anthropic_api')")


async def test_anthropic_overload_and_rate_limit_are_retried_then_answered() -> None:
    server = Scripted([(529, anthropic_error("overloaded_error"), {}),
                       (429, anthropic_error("rate_limit_error"), {"retry-after": "0"}),
                       (200, MESSAGE_OK, {})])
    attempts: list[str] = []
    async with server as url, ChatClient(url, "claude-x", api_key=KEY, retry=FAST,
                                         wire=wire_api("anthropic_api")) as client:
        c = await client.complete([Message("user", "hi")],
                                  on_retry=lambda n, err, d: attempts.append(err.kind))
    assert c.text == "fine" and c.usage.total_tokens == 6
    assert attempts == ["http_529", "http_429"]
    path, headers, body = server.seen[0]
    assert path == "/v1/messages"
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers
    assert body["max_tokens"] == 4096


async def test_anthropic_authentication_error_is_not_retried() -> None:
    server = Scripted([(401, anthropic_error("authentication_error"), {})])
    async with server as url, ChatClient(url, "claude-x", api_key=KEY, retry=FAST,
                                         wire=wire_api("anthropic_api")) as client:
        with pytest.raises(ResponseError) as err:
            await client.complete([Message("user", "hi")])
    assert (err.value.kind, err.value.attempts, len(server.seen)) == ("http_401", 1, 1)
    assert "authentication_error (scripted)" in str(err.value)


async def test_responses_rate_limit_is_retried_and_a_failed_response_fails_the_sample() -> None:
    failed = {"object": "response", "status": "failed", "output": [],
              "error": {"code": "invalid_prompt", "message": "flagged"}}
    server = Scripted([(429, {"error": {"message": "Rate limit", "type": "requests",
                                        "code": "rate_limit_exceeded"}}, {}),
                       (200, failed, {})])
    async with server as url, ChatClient(url, "gpt-x", api_key=KEY, retry=FAST,
                                         wire=wire_api("openai_responses_api")) as client:
        with pytest.raises(ResponseError) as err:
            await client.complete([Message("user", "hi")])
    assert (err.value.kind, err.value.attempts) == ("response_failed", 2)
    path, headers, _ = server.seen[0]
    assert path == "/v1/responses" and headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("api", ["anthropic_api", "openai_responses_api"])
async def test_the_policy_bounds_apply_to_every_api(api: str) -> None:
    """The reply size cap and the refusal of redirects are the client's, whatever the API."""
    big = SimulatorServer(behaviour=SimBehaviour(reply_bytes=300_000))
    async with big as url, ChatClient(url, "m", retry=NO_RETRY, max_response_bytes=100_000,
                                      wire=wire_api(api)) as client:
        with pytest.raises(ResponseError) as err:
            await client.complete([Message("user", "hi")])
    assert err.value.kind == "response_too_large"
    assert big.requests()[0]["path"] == ("/v1/messages" if api == "anthropic_api"
                                         else "/v1/responses")
    moved = SimulatorServer(behaviour=SimBehaviour(redirect_to="http://127.0.0.2:9/v1/x"))
    async with moved as url, ChatClient(url, "m", retry=NO_RETRY, wire=wire_api(api)) as client:
        with pytest.raises(ResponseError) as err:
            await client.complete([Message("user", "hi")])
    assert err.value.kind == "redirect"


@pytest.mark.parametrize("api", ["anthropic_api", "openai_responses_api"])
async def test_simulator_faults_in_each_api_shape_are_retried(api: str) -> None:
    server = SimulatorServer(behaviour=SimBehaviour(rate_429=0.5, rate_500=0.5, retry_after_s=0,
                                                    max_faults_per_key=2))
    async with server as url, ChatClient(url, "m", retry=FAST, wire=wire_api(api)) as client:
        c = await client.complete([Message("user", "hi")])
    assert c.text
    statuses = [r["status"] for r in server.requests()]
    assert statuses[-1] == 200 and len(statuses) == 3 and set(statuses[:2]) <= {429, 500}
