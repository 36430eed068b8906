"""The three wire APIs the simulator speaks: chat completions, Anthropic Messages, OpenAI Responses.

Each :class:`SimAPI` turns its request into the equivalent chat-completions body (checking
the API's own shape as its real server does: a wrong field is a 400 in the API's error
shape), so parsing, the oracle, the responders (judge, grounding) and the faults work on one
form; and renders a reply and an error in its own shape. Replies carry every field the
official SDKs' response types require (``anthropic.types.Message``,
``openai.types.responses.Response``), so they validate strictly.

Routes: ``/v1/chat/completions``, ``/v1/messages``, ``/v1/responses`` (and each without
``/v1``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from groundscope.simulator.generation import check_messages
from groundscope.simulator.wire import (
    BadRequest,
    SimReply,
    SimRequest,
    completion_body,
    error_response,
    json_response,
    reply_tokens,
)

ErrorResponse = Callable[..., web.Response]


@dataclass(frozen=True, slots=True)
class SimAPI:
    """One wire API: its routes, request -> chat body, reply body, error response."""

    name: str
    routes: tuple[str, ...]
    to_chat: Callable[[dict[str, Any], Mapping[str, str]], dict[str, Any]]
    reply: Callable[[SimRequest, SimReply, int], dict[str, Any]]
    error: ErrorResponse


def _chat_as_is(body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    return body


# ---------------------------------------------------------------- Anthropic Messages

_MESSAGES_KEYS = frozenset({"model", "max_tokens", "messages", "system", "temperature", "top_p",
                            "top_k", "stop_sequences", "stream", "metadata", "thinking", "tools",
                            "tool_choice", "service_tier", "container"})
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                     403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                     429: "rate_limit_error", 529: "overloaded_error"}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def _anthropic_block(block: Any, where: str) -> dict[str, Any]:
    kind = block.get("type") if isinstance(block, Mapping) else None
    if kind == "text":
        if not isinstance(block.get("text"), str) or not block["text"]:
            raise BadRequest(f"{where}.text: text content blocks must be non-empty")
        return {"type": "text", "text": block["text"]}
    if kind != "image":
        raise BadRequest(f"{where}.type: Input tag {kind!r} found using 'type' does not match "
                         "any of the expected tags: 'text', 'image', ...")
    source = block.get("source")
    stype = source.get("type") if isinstance(source, Mapping) else None
    if stype == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    if stype != "base64" or not isinstance(source.get("data"), str):
        raise BadRequest(f"{where}.source: a base64 source with string data, or a url source")
    if source.get("media_type") not in _IMAGE_TYPES:
        raise BadRequest(f"{where}.source.media_type: Input should be 'image/jpeg', "
                         "'image/png', 'image/gif' or 'image/webp'")
    url = f"data:{source['media_type']};base64,{source['data']}"
    return {"type": "image_url", "image_url": {"url": url}}


def _anthropic_system(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list) and all(isinstance(b, Mapping) and b.get("type") == "text"
                                        and isinstance(b.get("text"), str) for b in system):
        return "\n\n".join(b["text"] for b in system)
    raise BadRequest("system: Input should be a valid string or a list of text blocks")


def messages_to_chat(body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """An Anthropic Messages request as a chat body (400s as the Messages API words them)."""
    if not headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required")
    unknown = sorted(set(body) - _MESSAGES_KEYS)
    if unknown:
        raise BadRequest(f"{unknown[0]}: Extra inputs are not permitted")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest("max_tokens: Field required (a positive integer)")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float)
                                    or not 0 <= temperature <= 1):
        raise BadRequest("temperature: Input should be less than or equal to 1")
    check_messages(body, str(headers.get("anthropic-version")))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required (a non-empty list)")
    chat: list[dict[str, Any]] = []
    if "system" in body:
        chat.append({"role": "system", "content": _anthropic_system(body["system"])})
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if role not in ("user", "assistant"):
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = msg.get("content")
        if isinstance(content, str):
            chat.append({"role": role, "content": content})
        elif isinstance(content, list):
            parts = [_anthropic_block(b, f"messages.{i}.content.{j}") for j, b in enumerate(content)]
            chat.append({"role": role, "content": parts})
        else:
            raise BadRequest(f"messages.{i}.content: Input should be a string or a list of blocks")
    out = {k: body[k] for k in ("model", "max_tokens", "temperature", "top_p", "stream",
                                "thinking") if k in body}
    return {**out, "messages": chat}


def messages_reply(req: SimRequest, reply: SimReply, prompt_tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sim"})
    content.append({"type": "text", "text": reply.content, "citations": None})
    out_tokens, thinking = reply_tokens(reply)
    return {
        "id": f"msg_sim_{req.key[:12]}_{req.attempt}", "type": "message", "role": "assistant",
        "model": req.body["model"], "content": content,
        "stop_reason": _STOP_REASONS.get(reply.finish_reason, reply.finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": out_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens_details": {"thinking_tokens": thinking}},
    }


def messages_error(status: int, message: str, kind: str = "", code: str | None = None,
                   param: str | None = None,
                   headers: Mapping[str, str] | None = None) -> web.Response:
    etype = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body = {"type": "error", "error": {"type": etype, "message": message},
            "request_id": "req_sim"}
    return json_response(body, status, headers)


# ---------------------------------------------------------------- OpenAI Responses

_RESPONSES_KEYS = frozenset({"model", "input", "instructions", "max_output_tokens", "temperature",
                             "top_p", "stream", "store", "reasoning", "text", "truncation",
                             "metadata", "tools", "tool_choice", "parallel_tool_calls",
                             "previous_response_id", "service_tier", "top_logprobs", "user",
                             "include", "background", "prompt_cache_key", "safety_identifier"})
_DETAILS = frozenset({"low", "high", "auto", "original"})


def _responses_part(part: Any, role: str, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, Mapping) else None
    text_kind = "output_text" if role == "assistant" else "input_text"
    if kind == text_kind and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and role != "assistant":
        if not isinstance(part.get("image_url"), str):
            raise BadRequest(f"Missing required parameter: '{where}.image_url'.")
        if part.get("detail", "auto") not in _DETAILS:
            raise BadRequest(f"Invalid value for '{where}.detail'.")
        return {"type": "image_url", "image_url": {"url": part["image_url"]}}
    raise BadRequest(f"Invalid value: {kind!r}. Supported values for {role} content are: "
                     f"'{text_kind}'" + (", 'input_image'" if role != "assistant" else "") + ".")


def _responses_item(item: Any, i: int) -> dict[str, Any]:
    role = item.get("role") if isinstance(item, Mapping) else None
    if item.get("type", "message") != "message" or role not in (
            "user", "assistant", "system", "developer"):
        raise BadRequest(f"Invalid 'input[{i}]': a message item with a valid role.")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise BadRequest(f"Invalid 'input[{i}].content': a string or a list of parts.")
    return {"role": role, "content": [_responses_part(p, role, f"input[{i}].content[{j}]")
                                      for j, p in enumerate(content)]}


def responses_to_chat(body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """A Responses API request as a chat body (400s as the Responses API words them)."""
    unknown = sorted(set(body) - _RESPONSES_KEYS)
    if unknown:
        raise BadRequest(f"Unknown parameter: '{unknown[0]}'.", param=unknown[0])
    max_out = body.get("max_output_tokens")
    if max_out is not None and (not isinstance(max_out, int) or max_out < 16):
        raise BadRequest("Invalid 'max_output_tokens': integer below minimum value. Expected a "
                         "value >= 16.", param="max_output_tokens")
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(items, list) or not items:
        raise BadRequest("Missing required parameter: 'input'.", param="input")
    chat = [_responses_item(item, i) for i, item in enumerate(items)]
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest("Invalid 'instructions': expected a string.", param="instructions")
        chat.insert(0, {"role": "system", "content": instructions})
    out = {k: body[k] for k in ("model", "temperature", "top_p", "stream") if k in body}
    if max_out is not None:
        out["max_tokens"] = max_out
    return {**out, "messages": chat}


def responses_reply(req: SimRequest, reply: SimReply, prompt_tokens: int) -> dict[str, Any]:
    body = req.body
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        output.append({"type": "reasoning", "id": f"rs_sim_{req.key[:12]}",
                       "summary": [{"type": "summary_text", "text": reply.reasoning}]})
    refused = reply.finish_reason == "content_filter"  # a refusal part, as the API words it
    done = reply.finish_reason == "stop" or refused
    part = ({"type": "refusal", "refusal": reply.content} if refused else
            {"type": "output_text", "text": reply.content, "annotations": []})
    output.append({"type": "message", "id": f"msg_sim_{req.key[:12]}", "role": "assistant",
                   "status": "completed" if done else "incomplete", "content": [part]})
    reason = {"length": "max_output_tokens"}.get(reply.finish_reason, reply.finish_reason)
    out_tokens, reasoning = reply_tokens(reply)
    return {
        "id": f"resp_sim_{req.key[:12]}_{req.attempt}", "object": "response",
        "created_at": int(time.time()), "status": "completed" if done else "incomplete",
        "model": body["model"], "output": output,
        "incomplete_details": None if done else {"reason": reason},
        "error": None, "instructions": None, "max_output_tokens": body.get("max_tokens"),
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": prompt_tokens,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": out_tokens,
                  "output_tokens_details": {"reasoning_tokens": reasoning},
                  "total_tokens": prompt_tokens + out_tokens},
    }


CHAT = SimAPI("openai_api", ("/v1/chat/completions", "/chat/completions"), _chat_as_is,
              completion_body, error_response)
MESSAGES = SimAPI("anthropic_api", ("/v1/messages", "/messages"), messages_to_chat,
                  messages_reply, messages_error)
RESPONSES = SimAPI("openai_responses_api", ("/v1/responses", "/responses"), responses_to_chat,
                   responses_reply, error_response)
