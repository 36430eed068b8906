"""``stream: true``: the reply as server-sent events, in each API's own event vocabulary.

The whole reply is computed first (as for a plain JSON answer), then written as the events
its API streams, which the official SDKs consume (``tests/test_sdk_wire.py``):

- chat completions: ``data:`` chunks (``chat.completion.chunk``: the role, reasoning and
  content deltas, the finish reason; a usage chunk when ``stream_options.include_usage``),
  then ``data: [DONE]``;
- Anthropic Messages: ``message_start``, per block ``content_block_start`` /
  ``content_block_delta`` (``thinking_delta`` + ``signature_delta``, ``text_delta``) /
  ``content_block_stop``, ``message_delta`` (stop reason, output tokens), ``message_stop``;
- OpenAI Responses: ``response.created``, per output item ``response.output_item.added``,
  for a message part ``response.content_part.added``, ``response.output_text.delta`` /
  ``.done`` (``response.refusal.*`` for a refusal), ``response.content_part.done``, then
  ``response.output_item.done``, and ``response.completed`` (``response.incomplete``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from aiohttp import web

from groundscope.simulator.wire import json_response

PIECE = 24  # characters per delta


def _pieces(text: str) -> list[str]:
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def _event(data: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def _chat(body: Mapping[str, Any], reply: dict[str, Any]) -> Iterator[bytes]:
    choice = reply["choices"][0]
    message = choice["message"]
    base = {k: reply[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _event({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                            "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    if message.get("reasoning_content"):
        yield from (chunk({"reasoning_content": p}) for p in _pieces(message["reasoning_content"]))
    yield from (chunk({"content": p}) for p in _pieces(message.get("content") or ""))
    yield chunk({}, choice["finish_reason"])
    options = body.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        yield _event({**base, "choices": [], "usage": reply["usage"]})
    yield b"data: [DONE]\n\n"


def _messages(reply: dict[str, Any]) -> Iterator[bytes]:
    start = {**reply, "content": [], "stop_reason": None,
             "usage": {**reply["usage"], "output_tokens": 1}}
    yield _event({"type": "message_start", "message": start}, "message_start")
    for i, block in enumerate(reply["content"]):
        kind = block["type"]
        empty = ({"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking"
                 else {"type": "text", "text": "", "citations": None})
        yield _event({"type": "content_block_start", "index": i, "content_block": empty},
                     "content_block_start")
        for piece in _pieces(block[kind]):
            delta = {"type": f"{kind}_delta", kind: piece}
            yield _event({"type": "content_block_delta", "index": i, "delta": delta},
                         "content_block_delta")
        if kind == "thinking":
            delta = {"type": "signature_delta", "signature": block["signature"]}
            yield _event({"type": "content_block_delta", "index": i, "delta": delta},
                         "content_block_delta")
        yield _event({"type": "content_block_stop", "index": i}, "content_block_stop")
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    yield _event({"type": "message_delta", "delta": delta,
                  "usage": {"output_tokens": reply["usage"]["output_tokens"]}}, "message_delta")
    yield _event({"type": "message_stop"}, "message_stop")


def _responses(reply: dict[str, Any]) -> Iterator[bytes]:
    seq = iter(range(10**6))

    def event(name: str, **data: Any) -> bytes:
        return _event({"type": name, **data, "sequence_number": next(seq)}, name)

    yield event("response.created",
                response={**reply, "status": "in_progress", "output": [], "usage": None,
                          "incomplete_details": None})
    for i, item in enumerate(reply["output"]):
        parts = item.get("content") if item["type"] == "message" else None
        shell = {**item, "content": []} if parts is not None else item
        yield event("response.output_item.added", output_index=i,
                    item={**shell, "status": "in_progress"} if parts is not None else shell)
        for j, part in enumerate(parts or ()):
            where = {"item_id": item["id"], "output_index": i, "content_index": j}
            field, kind = (("refusal", "refusal") if part["type"] == "refusal"
                           else ("text", "output_text"))
            yield event("response.content_part.added", **where,
                        part={**copy.deepcopy(part), field: ""})
            extra = {} if kind == "refusal" else {"logprobs": []}
            for piece in _pieces(part[field]):
                yield event(f"response.{kind}.delta", **where, delta=piece, **extra)
            yield event(f"response.{kind}.done", **where, **{field: part[field]}, **extra)
            yield event("response.content_part.done", **where, part=part)
        yield event("response.output_item.done", output_index=i, item=item)
    done = "response.completed" if reply["status"] == "completed" else "response.incomplete"
    yield event(done, response=reply)


def reply_response(api: str, body: Mapping[str, Any], reply: dict[str, Any],
                   headers: Mapping[str, str]) -> web.Response:
    """The reply as JSON, or, when the request asked ``stream: true``, as SSE."""
    if body.get("stream") is not True:
        return json_response(reply, headers=headers)
    events = (_messages(reply) if api == "anthropic_api" else
              _responses(reply) if api == "openai_responses_api" else _chat(body, reply))
    return web.Response(body=b"".join(events), headers={**headers, "Cache-Control": "no-cache"},
                        content_type="text/event-stream")
