"""The Anthropic Messages API (``--eval-type anthropic_api``): request build and reply parse, pure.

:data:`MESSAGES` is the :class:`~groundscope.client.wire.WireAPI` that
:class:`~groundscope.client.chat.ChatClient` (retries, concurrency, size cap, redirect
refusal, redaction) speaks for this API.

Request: ``POST {base}/v1/messages`` (a base ending in ``/v1`` gets ``/messages``, one
ending in ``/messages`` is kept: the Anthropic SDK's rule) with headers ``x-api-key: <key>``
(when a key is given; URL user-info is HTTP Basic auth, as for chat) and
``anthropic-version:`` :data:`ANTHROPIC_VERSION`. The version is pinned to ``2023-06-01``,
the one every Messages API server knows: under ``2026-10-21`` (the default of the anthropic
SDK >= 2.0) ``temperature`` / ``top_p`` / ``top_k`` are refused, and groundscope sends
``temperature`` (0 unless configured).

Body: ``model``, ``max_tokens`` (required by the API: ``generation_config.max_tokens``,
default :data:`DEFAULT_MAX_TOKENS` as EvalScope), ``messages`` (user / assistant turns),
``system`` (every system / developer message joined by a blank line, top-level), and of
the generation config only the Messages API's own keys (:data:`GENERATION_KEYS`; ``stop``
becomes ``stop_sequences``) plus ``extra_body``'s keys; others (``seed``, ``n``, penalties,
...) are not sent, since the API refuses unknown fields. Images are ``image`` blocks: base64
(``image/jpeg|png|gif|webp``; another type is ``unsupported_media``) or, for an http(s)
image, a ``url`` source. Audio and video have no block: the sample fails with
``unsupported_media`` before anything is read or sent.

Reply: ``text`` blocks joined are the answer, ``thinking`` blocks the reasoning;
``stop_reason`` maps onto the chat vocabulary (``end_turn`` / ``stop_sequence`` -> ``stop``,
``max_tokens`` / ``model_context_window_exceeded`` -> ``length``, ``refusal`` ->
``content_filter``, ``tool_use`` -> ``tool_calls``; others kept); usage ``prompt_tokens`` =
``input_tokens`` + ``cache_creation_input_tokens`` + ``cache_read_input_tokens`` (the
cache counters are outside ``input_tokens`` here, inside ``prompt_tokens`` for OpenAI);
``cached_tokens`` = ``cache_read_input_tokens``, ``reasoning_tokens`` =
``output_tokens_details.thinking_tokens``.

Errors (``{"type": "error", "error": {"type", "message"}}``): ``rate_limit_error`` (429),
``overloaded_error`` (529), ``api_error`` (500) and timeouts are retried; a 429 for a spend
limit (``enforced_spend_limit_reached``) is ``spend_limit`` and not retried; 413
``request_too_large`` is ``request_too_large``; ``prompt is too long`` is ``context_length``;
other 4xx (401 ``authentication_error`` ...) are ``http_<status>``, not retried.

>>> from groundscope.types import Message
>>> body = build_body([Message("system", "Be brief."), Message("user", "Hi")], "claude", {})
>>> body["system"], body["max_tokens"], body["messages"]
('Be brief.', 4096, [{'role': 'user', 'content': 'Hi'}])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from pydantic import SecretStr, StrictStr, ValidationError

from groundscope import media
from groundscope.client.http_errors import http_error
from groundscope.client.openai import effective_config, endpoint_auth
from groundscope.client.reply import LaxModel, TokenCount, empty_reply, malformed, token_usage
from groundscope.client.wire import WireAPI, endpoint_url, image_url, system_text, unsupported
from groundscope.errors import ConfigError, ModelError, ResponseError
from groundscope.types import Completion, MediaPart, Message, Usage

API = "anthropic_api"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
GENERATION_KEYS = frozenset({"max_tokens", "temperature", "top_p", "top_k", "stop_sequences",
                             "thinking", "metadata", "service_tier"})
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "model_context_window_exceeded": "length", "refusal": "content_filter",
                "tool_use": "tool_calls"}


# ---------------------------------------------------------------- request


def endpoint(api_url: str, api_key: SecretStr | str | None) -> tuple[str, dict[str, str]]:
    """``(URL, headers)``: ``x-api-key`` for a key, Basic auth for URL user-info (not both),
    and the pinned ``anthropic-version``."""
    key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key or ""
    _, basic = endpoint_auth(api_url, None)  # validates the URL; user-info -> Basic auth
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if basic is not None:
        if key and key != "EMPTY":
            raise ConfigError("api_url: has credentials (user:password@) and an api_key is set "
                              "too; give one of them")
        headers["Authorization"] = basic
    elif key:
        headers["x-api-key"] = key
    return endpoint_url(api_url, "/messages", add_version=True), headers


def image_block(part: MediaPart) -> dict[str, Any]:
    """An ``image`` block: a base64 source from the encoded data URL, or a ``url`` source."""
    url = image_url(part.media, API)
    if not url.startswith("data:"):
        return {"type": "image", "source": {"type": "url", "url": url}}
    header, _, data = url.partition(",")
    media_type = header.removeprefix("data:").removesuffix(";base64")
    if media_type not in IMAGE_TYPES:
        raise unsupported(API, f"{media_type} images are not accepted (only "
                               f"{', '.join(sorted(IMAGE_TYPES))}): {media.describe(part.media)}")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _content(msg: Message) -> str | list[dict[str, Any]]:
    if isinstance(msg.content, str):
        return msg.content
    blocks: list[dict[str, Any]] = []
    for part in msg.content:
        if isinstance(part, MediaPart):
            blocks.append(image_block(part))
        elif part.text:  # the API refuses empty text blocks
            blocks.append({"type": "text", "text": part.text})
    return blocks


def wire_messages(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)``: system / developer texts joined for the top-level ``system``;
    user and assistant turns as Messages API turns."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role in ("system", "developer"):
            system.append(system_text(msg, API))
        elif msg.role in ("user", "assistant"):
            turns.append({"role": msg.role, "content": _content(msg)})
        else:
            raise unsupported(API, f"{msg.role!r} messages are not supported by this API",
                              "unsupported_message")
    return ("\n\n".join(system) if system else None), turns


def build_body(messages: Sequence[Message], model: str,
               generation_config: Mapping[str, Any] | None,
               fetched: Mapping[str, bytes] | None = None) -> dict[str, Any]:
    """The Messages API request body (see the module docstring); audio has no form here, so
    ``fetched`` is always None."""
    given = dict(generation_config or {})
    config = effective_config(given)
    if "thinking" in config and "temperature" not in given:
        config.pop("temperature", None)  # extended thinking refuses a temperature but 1
    if "stop" in config and "stop_sequences" not in config:
        stop = config["stop"]
        config["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    system, turns = wire_messages(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS}
    body.update((k, v) for k, v in config.items() if k in GENERATION_KEYS)
    body["messages"] = turns
    if system is not None:
        body["system"] = system
    extra = config.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    return body


# ---------------------------------------------------------------- reply


class Block(LaxModel):
    type: StrictStr
    text: StrictStr | None = None
    thinking: StrictStr | None = None


class OutputDetails(LaxModel):
    thinking_tokens: TokenCount | None = None


class MessagesUsage(LaxModel):
    input_tokens: TokenCount | None = None
    output_tokens: TokenCount | None = None
    cache_creation_input_tokens: TokenCount | None = None
    cache_read_input_tokens: TokenCount | None = None
    output_tokens_details: OutputDetails | None = None

    def usage(self) -> Usage:
        """The prompt is the sum of three counts: it saturates (``types.Usage``)."""
        prompt = ((self.input_tokens or 0) + (self.cache_creation_input_tokens or 0)
                  + (self.cache_read_input_tokens or 0))
        details = self.output_tokens_details
        return token_usage(prompt, self.output_tokens, None,
                           reasoning=details.thinking_tokens if details else None,
                           cached=self.cache_read_input_tokens)


class MessagesReply(LaxModel):
    """The part of a Messages API reply groundscope reads."""

    type: StrictStr | None = None
    model: StrictStr | None = None
    content: list[Block] | None = None
    stop_reason: StrictStr | None = None
    usage: MessagesUsage | None = None


def parse_reply(raw: bytes) -> Completion:
    """The ``Completion`` of a 200 Messages API body; a body that breaks the reply model is
    a retryable ``malformed_response``, an error object a ``ResponseError``."""
    try:
        reply = MessagesReply.model_validate_json(raw)
    except ValidationError as err:
        raise malformed(err) from None
    if reply.content is None or reply.type == "error":
        raise empty_reply(raw, "content")
    text = "".join(b.text or "" for b in reply.content if b.type == "text")
    thoughts = [b.thinking for b in reply.content if b.type == "thinking" and b.thinking]
    finish = STOP_REASONS.get(reply.stop_reason or "", reply.stop_reason)
    if finish == "content_filter" and not text:
        raise ResponseError("the model refused to answer (stop_reason refusal)",
                            kind="content_filter", status=200)
    return Completion(text=text, model=reply.model or "", finish_reason=finish,
                      usage=reply.usage.usage() if reply.usage is not None else Usage(),
                      reasoning="\n".join(thoughts) if thoughts else None)


# ---------------------------------------------------------------- errors


def map_error(status: int, raw: bytes, retry_after: str | None,
              redact: Callable[[str], str] = str) -> ModelError:
    """A non-200 reply as an error: the chat mapping, plus the Messages API's own kinds."""
    err = http_error(status, raw, retry_after, redact)
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        payload = None
    inner = payload.get("error") if isinstance(payload, dict) else None
    inner = inner if isinstance(inner, dict) else {}
    details = inner.get("details") if isinstance(inner.get("details"), dict) else {}
    if status == 429 and details.get("error_code") == "enforced_spend_limit_reached":
        return ResponseError(str(err), kind="spend_limit", status=status)
    if status == 413 or inner.get("type") == "request_too_large":
        return ResponseError(str(err), kind="request_too_large", status=status)
    return err


MESSAGES = WireAPI(API, endpoint, build_body, parse_reply, map_error)
