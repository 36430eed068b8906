"""Correctness at the wire (issue 22, section 3): a Responses refusal is a refusal, and the
simulator is a faithful stand-in: output limits with a ``length`` finish, Anthropic thinking
and its sampling rules per ``anthropic-version``, and a model list with unknown models
refused. Every test runs the real client (or raw HTTP) against the simulator on loopback."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from groundscope.client.apis import wire_api
from groundscope.client.chat import ChatClient
from groundscope.client.retry import RetryPolicy
from groundscope.errors import ResponseError
from groundscope.simulator import SimBehaviour, SimReply, SimRequest, SimulatorServer
from groundscope.types import Message

LONG = "The picture shows a brown dog running across a wide green field. " * 8
ONCE = RetryPolicy(max_retries=0)
APIS = ("openai_api", "anthropic_api", "openai_responses_api")


def answer(text: str, finish: str = "stop") -> Any:
    def respond(req: SimRequest) -> SimReply:
        return SimReply(text, finish_reason=finish)

    return respond


def client(url: str, api: str, **config: Any) -> ChatClient:
    return ChatClient(url, "sim-model", retry=ONCE, wire=wire_api(api), generation_config=config)


async def ask(url: str, api: str, **config: Any) -> Any:
    async with client(url, api, **config) as c:
        return await c.complete([Message("user", "What is in the picture?")])


async def test_a_responses_refusal_is_a_refusal_never_the_answer() -> None:
    refusal = "I can't help with identifying people in images."
    async with SimulatorServer(responders=[answer(refusal, "content_filter")]) as url:
        with pytest.raises(ResponseError) as err:
            await ask(url, "openai_responses_api")
        got = await ask(url, "anthropic_api")  # the same refusal over Anthropic's wire
        assert got.finish_reason == "content_filter"
    assert err.value.kind == "content_filter" and refusal not in str(err.value)


async def test_chat_structured_refusal_is_a_content_filter_error() -> None:
    from groundscope.client.reply import parse_completion

    raw = (b'{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "No."},'
           b' "finish_reason": "stop"}]}')
    with pytest.raises(ResponseError) as err:
        parse_completion(raw)
    assert err.value.kind == "content_filter"


@pytest.mark.parametrize("api", APIS)
async def test_the_output_limit_cuts_the_answer_with_a_length_finish(api: str) -> None:
    async with SimulatorServer(responders=[answer(LONG)]) as url:
        cut = await ask(url, api, max_tokens=16)
        whole = await ask(url, api, max_tokens=1000)
    assert cut.finish_reason == "length" and cut.text == LONG[:64]
    assert whole.finish_reason == "stop" and whole.text == LONG


async def _post(url: str, body: dict[str, Any], version: str = "2023-06-01") -> tuple[int, Any]:
    headers = {"anthropic-version": version, "x-api-key": "k"}
    async with aiohttp.ClientSession() as s, s.post(f"{url}/messages", json=body,
                                                    headers=headers) as r:
        return r.status, await r.json()


async def test_anthropic_thinking_is_answered_with_a_thinking_block() -> None:
    async with SimulatorServer(responders=[answer("A dog.")]) as url:
        thinking = {"type": "enabled", "budget_tokens": 1024}
        got = await ask(url, "anthropic_api", max_tokens=2048, thinking=thinking)
        plain = await ask(url, "anthropic_api")
        status, body = await _post(url, {"model": "m", "max_tokens": 2048, "thinking": thinking,
                                         "messages": [{"role": "user", "content": "Hi"}]})
    assert got.text == "A dog." and got.reasoning and plain.reasoning is None
    assert status == 200 and [b["type"] for b in body["content"]] == ["thinking", "text"]


@pytest.mark.parametrize(("body", "version", "message"), [
    ({"temperature": 0}, "2026-10-21", "temperature: Extra inputs are not permitted"),
    ({"top_k": 5}, "2026-10-21", "top_k: Extra inputs are not permitted"),
    ({"temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 1024}}, "2023-06-01",
     "`temperature` may only be set to 1 when thinking is enabled"),
    ({"thinking": {"type": "enabled", "budget_tokens": 512}}, "2023-06-01", "greater than or equal to 1024"),
    ({"thinking": {"type": "enabled", "budget_tokens": 4096}}, "2023-06-01", "`max_tokens` must be greater"),
])
async def test_anthropic_refuses_sampling_as_the_pinned_version_does(
        body: dict[str, Any], version: str, message: str) -> None:
    base = {"model": "m", "max_tokens": 2048, "messages": [{"role": "user", "content": "Hi"}]}
    async with SimulatorServer(responders=[answer("A dog.")]) as url:
        status, reply = await _post(url, {**base, **body}, version)
        ok, _ = await _post(url, {**base, "temperature": 0})  # 2023-06-01 accepts it
        thinking_at_one, _ = await _post(url, {**base, "temperature": 1, "thinking": {
            "type": "enabled", "budget_tokens": 1024}})
    assert status == 400 and reply["error"]["type"] == "invalid_request_error"
    assert message in reply["error"]["message"]
    assert ok == 200 and thinking_at_one == 200


@pytest.mark.parametrize("api", APIS)
async def test_an_unknown_model_is_refused_given_a_model_list(api: str) -> None:
    sim = SimulatorServer(behaviour=SimBehaviour(models=("sim-model", "other")),
                          responders=[answer("A dog.")])
    async with sim as url:
        assert (await ask(url, api)).text == "A dog."
        with pytest.raises(ResponseError) as err:
            async with ChatClient(url, "typo-model", retry=ONCE, wire=wire_api(api)) as c:
                await c.complete([Message("user", "Hi")])
        async with aiohttp.ClientSession() as s, s.get(f"{url}/models") as r:
            listed = [m["id"] for m in (await r.json())["data"]]
    assert err.value.status == 404 and "typo-model" in str(err.value)
    assert listed == ["sim-model", "other"]


def test_simulate_takes_a_model_list_and_a_gateway_style() -> None:
    from groundscope.cli import _sim_behaviour
    from groundscope.cliargs import build_parser

    ns = build_parser().parse_args(["simulate", "--datasets", "general_vqa", "--models",
                                    "a, b", "--gateway", "litellm"])
    behaviour = _sim_behaviour(ns)
    assert behaviour.models == ("a", "b") and behaviour.gateway == "litellm"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--datasets", "x", "--models", ","])
