"""The simulator's wire half: request parsing and validation, the responder interface, reply JSON.

Pure functions over the OpenAI chat-completions JSON (plus the tiny aiohttp response
helpers). A media part is reduced to its id (sha256 of the decoded bytes, or the URL
itself), so nothing downstream ever holds a base64 payload.
"""

from __future__ import annotations

import binascii
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web
from pybase64 import b64decode

# the chat API's part types: no "audio_url" (OpenAI has none; remote audio goes as input_audio)
_PART_TYPES = frozenset({"text", "image_url", "input_audio", "video_url"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_MEDIA_TOKENS = {"image_url": 256, "input_audio": 128, "video_url": 1024}


def bytes_id(data: bytes) -> str:
    """The media id of raw bytes: the first 16 hex digits of their sha256."""
    return hashlib.sha256(data).hexdigest()[:16]


class Behaviour(Protocol):
    """What a responder reads of the server's behaviour knobs (``oracle.SimBehaviour``),
    named here so that the wire half does not import the oracle."""

    @property
    def seed(self) -> int: ...

    def correct(self, key: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One parsed chat request, as a responder sees it."""

    body: Mapping[str, Any]
    texts: tuple[str, ...]
    media_ids: tuple[str, ...]
    key: str
    text_key: str
    attempt: int
    behaviour: Behaviour


@dataclass(frozen=True, slots=True)
class SimReply:
    content: str
    reasoning: str | None = None
    finish_reason: str = "stop"


Responder = Callable[[SimRequest], SimReply | None]


class BadRequest(Exception):
    """An invalid request: becomes an OpenAI-style 400 (a subclass may set another status)."""

    status = 400

    def __init__(self, message: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.code, self.param = code, param


def _decode_data_url(url: str) -> bytes:
    header, sep, payload = url.partition(",")
    if not sep:
        raise BadRequest("invalid data URL: no comma")
    if header.endswith(";base64"):
        try:
            return b64decode(payload, validate=True)
        except binascii.Error:
            raise BadRequest("invalid base64 in a data URL") from None
    return unquote_to_bytes(payload)


def _media_of(part: Mapping[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    """(media id, stripped copy of the part) for one media part of the wire request."""
    inner = part.get(kind)
    field = "data" if kind == "input_audio" else "url"
    if not isinstance(inner, Mapping) or not isinstance(inner.get(field), str):
        raise BadRequest(f"content part {kind!r} needs a string {kind}.{field}")
    value: str = inner[field]
    if value.startswith("data:"):
        data = _decode_data_url(value)
    elif kind == "input_audio":
        try:
            data = b64decode(value, validate=True)
        except binascii.Error:
            raise BadRequest("input_audio.data is not valid base64") from None
    else:
        return value, dict(part)
    mid = bytes_id(data)
    stripped = {**inner, field: f"<{len(data)} bytes sha256:{mid}>"}
    return mid, {**part, kind: stripped}


def parse_messages(messages: Any) -> tuple[list[str], list[str], list[Any], int]:
    """(texts, media ids, messages without base64, estimated prompt tokens)."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array", param="messages")
    texts: list[str] = []
    ids: list[str] = []
    stripped: list[Any] = []
    tokens = 0
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping) or msg.get("role") not in _ROLES:
            raise BadRequest(f"messages[{i}] needs a valid 'role'", param=f"messages[{i}]")
        content = msg.get("content")
        tokens += 4
        if content is None or isinstance(content, str):
            texts.append(content or "")
            tokens += math.ceil(len(content or "") / 4)
            stripped.append(msg)
            continue
        if not isinstance(content, list):
            raise BadRequest(f"messages[{i}].content must be a string or an array")
        parts: list[Any] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in _PART_TYPES:
                raise BadRequest(f"Invalid content part type: {kind!r}", param=f"messages[{i}]")
            if kind == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise BadRequest(f"messages[{i}]: a text part needs a string 'text'")
                texts.append(text)
                tokens += math.ceil(len(text) / 4)
                parts.append(part)
            else:
                mid, clean = _media_of(part, kind)
                ids.append(mid)
                tokens += _MEDIA_TOKENS[kind]
                parts.append(clean)
        stripped.append({**msg, "content": parts})
    return texts, ids, stripped, tokens


def check_params(body: Mapping[str, Any]) -> None:
    """Reject what a real endpoint rejects: no model, out-of-range settings."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("you must provide a model parameter", param="model")
    if body.get("stream") not in (None, True, False):
        raise BadRequest("Invalid 'stream': expected a boolean.", param="stream")
    for name, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        value = body.get(name)
        if value is not None and (
            not isinstance(value, int | float) or not low <= value <= high
        ):
            raise BadRequest(f"Invalid '{name}': must be between {low:g} and {high:g}.", param=name)
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("Invalid 'max_tokens': must be a positive integer.", param="max_tokens")


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type="application/json"
    )


def error_response(status: int, message: str, kind: str, code: str | None = None,
           param: str | None = None, headers: Mapping[str, str] | None = None) -> web.Response:
    err = {"message": message, "type": kind, "param": param, "code": code}
    return json_response({"error": err}, status, headers)


def completion_body(req: SimRequest, reply: SimReply, prompt_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    completion_tokens, reasoning_tokens = reply_tokens(reply)
    return {
        "id": f"chatcmpl-sim-{req.key[:12]}-{req.attempt}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.body["model"],
        "system_fingerprint": "groundscope-sim",
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason,
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}},
    }


def reply_tokens(reply: SimReply) -> tuple[int, int]:
    """``(completion tokens, reasoning tokens of them)``: about 4 characters a token, the
    reasoning counted inside the completion as the APIs count it."""
    reasoning = math.ceil(len(reply.reasoning) / 4) if reply.reasoning else 0
    return max(1, math.ceil(len(reply.content) / 4)) + reasoning, reasoning


