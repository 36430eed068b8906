"""The OpenAI Responses API (``--eval-type openai_responses_api``): request build and reply
parse, pure.

:data:`RESPONSES` is the :class:`~groundscope.client.wire.WireAPI` that
:class:`~groundscope.client.chat.ChatClient` (retries, concurrency, size cap, redirect
refusal, redaction) speaks for this API.

Request: ``POST {base}/responses`` (``/v1/responses`` for a URL without a path; a URL ending
in ``/responses`` is kept), authenticated exactly as chat (``Authorization: Bearer <key>``,
or URL user-info as Basic auth). Body: ``model``; ``input``, a list of message items
(user turns with ``input_text`` / ``input_image`` parts, an image as a ``data:`` URL or its
http(s) URL with ``detail``, ``auto`` unless the dataset says; assistant turns as text);
``instructions``, every system / developer message joined by a blank line; the generation
config as chat sends it (temperature 0 unless set) where the Responses API has the key
(:data:`GENERATION_KEYS`: ``max_tokens`` becomes ``max_output_tokens``, ``reasoning_effort``
becomes ``reasoning.effort``), plus ``extra_body``'s keys; ``store: false`` unless the
config sets ``store`` (groundscope never reads a stored response back). Audio and video have
no part in this API: the sample fails with ``unsupported_media`` before anything is read.

Reply: the ``output_text`` parts of ``message`` items joined are the answer; a ``refusal``
part is a refusal, recorded as Anthropic's is (finish ``content_filter``; with no other
text, a ``content_filter`` error), and never scored as text; ``reasoning`` items' summary
and content texts the reasoning. ``status`` ``completed`` -> finish ``stop``; ``incomplete``
-> ``incomplete_details.reason``
(``max_output_tokens`` -> ``length``, ``content_filter`` kept: an empty filtered answer is a
``content_filter`` error); ``failed`` -> the response's error (``server_error`` /
``rate_limit_exceeded`` retried as ``response_failed``, others not); any other status is
``response_status``. Usage: ``input_tokens`` (``input_tokens_details.cached_tokens``
of them from the prompt cache) / ``output_tokens`` (``output_tokens_details.reasoning_tokens``
of them reasoning) / ``total_tokens``. Error replies have the chat API's shape and mapping.

>>> from groundscope.types import Message
>>> body = build_body([Message("system", "Be brief."), Message("user", "Hi")], "gpt", {})
>>> body["instructions"], body["input"], body["store"]
('Be brief.', [{'role': 'user', 'content': [{'type': 'input_text', 'text': 'Hi'}]}], False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr, StrictStr, ValidationError

from groundscope.client.http_errors import error_kind, http_error, truncate
from groundscope.client.openai import effective_config, endpoint_auth
from groundscope.client.reply import (
    CompletionDetails,
    LaxModel,
    PromptDetails,
    TokenCount,
    malformed,
    token_usage,
)
from groundscope.client.wire import WireAPI, endpoint_url, image_url, system_text, unsupported
from groundscope.errors import ModelError, ResponseError, RetryableError
from groundscope.types import Completion, MediaPart, Message, Usage

API = "openai_responses_api"
GENERATION_KEYS = frozenset({"max_output_tokens", "temperature", "top_p", "reasoning", "text",
                             "truncation", "store", "metadata", "service_tier", "top_logprobs",
                             "user", "prompt_cache_key", "safety_identifier"})
_RETRIED_FAILURES = frozenset({"server_error", "rate_limit_exceeded", "vector_store_timeout"})


# ---------------------------------------------------------------- request


def endpoint(api_url: str, api_key: SecretStr | str | None) -> tuple[str, dict[str, str]]:
    """``(URL, headers)``: the chat API's authentication, posted to ``.../responses``."""
    _, authorization = endpoint_auth(api_url, api_key)
    url = endpoint_url(api_url, "/responses")
    return url, {"Authorization": authorization} if authorization else {}


def _user_parts(msg: Message) -> list[dict[str, Any]]:
    if isinstance(msg.content, str):
        return [{"type": "input_text", "text": msg.content}]
    parts: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, MediaPart):
            parts.append({"type": "input_image", "image_url": image_url(part.media, API),
                          "detail": part.media.detail or "auto"})
        else:
            parts.append({"type": "input_text", "text": part.text})
    return parts


def wire_input(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input items)``: system / developer texts joined; user turns with
    ``input_*`` parts; assistant turns as plain text (media there have no form)."""
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role in ("system", "developer"):
            system.append(system_text(msg, API))
        elif msg.role == "user":
            items.append({"role": "user", "content": _user_parts(msg)})
        elif msg.role == "assistant":
            if msg.media():
                raise unsupported(API, "an assistant message cannot carry media")
            items.append({"role": "assistant", "content": msg.text()})
        else:
            raise unsupported(API, f"{msg.role!r} messages are not supported by this API",
                              "unsupported_message")
    return ("\n\n".join(system) if system else None), items


def build_body(messages: Sequence[Message], model: str,
               generation_config: Mapping[str, Any] | None,
               fetched: Mapping[str, bytes] | None = None) -> dict[str, Any]:
    """The Responses API request body (see the module docstring); audio has no form here, so
    ``fetched`` is always None."""
    config = effective_config(generation_config)
    if "max_tokens" in config:
        config.setdefault("max_output_tokens", config["max_tokens"])
    if "reasoning_effort" in config:
        reasoning = config.get("reasoning")
        reasoning = dict(reasoning) if isinstance(reasoning, Mapping) else {}
        config["reasoning"] = {"effort": config["reasoning_effort"], **reasoning}
    instructions, items = wire_input(messages)
    body: dict[str, Any] = {"model": model, "input": items}
    if instructions is not None:
        body["instructions"] = instructions
    body["store"] = False
    body.update((k, v) for k, v in config.items() if k in GENERATION_KEYS)
    extra = config.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    return body


# ---------------------------------------------------------------- reply


class Part(LaxModel):
    type: StrictStr | None = None
    text: StrictStr | None = None
    refusal: StrictStr | None = None


class OutputItem(LaxModel):
    type: StrictStr
    content: list[Part] | None = None
    summary: list[Part] | None = None


class Incomplete(LaxModel):
    reason: StrictStr | None = None


class Failure(LaxModel):
    code: StrictStr | None = None
    message: StrictStr | None = None


class ResponsesUsage(LaxModel):
    input_tokens: TokenCount | None = None
    output_tokens: TokenCount | None = None
    total_tokens: TokenCount | None = None
    input_tokens_details: PromptDetails | None = None
    output_tokens_details: CompletionDetails | None = None

    def usage(self) -> Usage:
        cached, reasoning = self.input_tokens_details, self.output_tokens_details
        return token_usage(self.input_tokens, self.output_tokens, self.total_tokens,
                           reasoning=reasoning.reasoning_tokens if reasoning else None,
                           cached=cached.cached_tokens if cached else None)


class ResponsesReply(LaxModel):
    """The part of a Responses API reply groundscope reads."""

    model: StrictStr | None = None
    status: StrictStr | None = None
    output: list[OutputItem] | None = None
    incomplete_details: Incomplete | None = None
    error: Failure | None = None
    usage: ResponsesUsage | None = None

    def _parts(self, kind: str) -> list[Part]:
        return [p for item in self.output or () if item.type == "message"
                for p in item.content or () if p.type == kind]

    def text(self) -> str:
        return "".join(p.text or "" for p in self._parts("output_text"))

    def refused(self) -> bool:
        """Whether a message carries a ``refusal`` part (the model declined to answer)."""
        return bool(self._parts("refusal"))

    def reasoning(self) -> str | None:
        texts = [p.text for item in self.output or () if item.type == "reasoning"
                 for p in [*(item.summary or ()), *(item.content or ())] if p.text]
        return "\n".join(texts) if texts else None


def _failed(reply: ResponsesReply) -> ModelError:
    code = reply.error.code if reply.error else None
    message = (reply.error.message if reply.error else None) or code or "no error given"
    text = f"the response failed: {truncate(message)}"
    if code in _RETRIED_FAILURES:
        return RetryableError(text, kind="response_failed", status=200)
    payload = {"error": {"code": code, "message": message}}
    return ResponseError(text, kind=error_kind(payload, message, "response_failed"), status=200)


def _finish(reply: ResponsesReply) -> str:
    if reply.status != "incomplete":
        return "stop"
    reason = reply.incomplete_details.reason if reply.incomplete_details else None
    return "length" if reason == "max_output_tokens" else reason or "incomplete"


def parse_reply(raw: bytes) -> Completion:
    """The ``Completion`` of a 200 Responses API body (see the module docstring)."""
    try:
        reply = ResponsesReply.model_validate_json(raw)
    except ValidationError as err:
        raise malformed(err) from None
    if reply.status == "failed" or (reply.output is None and reply.error is not None):
        raise _failed(reply)
    if reply.status not in ("completed", "incomplete", None):
        raise ResponseError(f"the response is {truncate(reply.status or '')!r}, not completed",
                            kind="response_status", status=200)
    if reply.output is None:
        raise RetryableError("malformed response: no output", kind="malformed_response",
                             status=200)
    text, finish = reply.text(), "content_filter" if reply.refused() else _finish(reply)
    if finish == "content_filter" and not text:
        raise ResponseError("the reply was blocked by a content filter", kind="content_filter",
                            status=200)
    return Completion(text=text, model=reply.model or "", finish_reason=finish,
                      usage=reply.usage.usage() if reply.usage is not None else Usage(),
                      reasoning=reply.reasoning())


RESPONSES = WireAPI(API, endpoint, build_body, parse_reply, http_error)
