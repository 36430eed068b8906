"""OpenAI chat-completions: request building and response parsing (pure) + the aiohttp sender.

The pure half (:func:`wire_messages`, :func:`build_body`, :func:`request_hash`,
:func:`parse_completion`) knows the wire format and nothing about I/O. :class:`ChatClient`
owns one pooled keep-alive session, the timeout and the retry policy, and maps every
failure onto the exception tree::

    HTTP 429 / 408 / 5xx, timeout, connection error, malformed JSON -> RetryableError
    other 4xx, a body without choices, an empty content-filtered reply -> ResponseError
    a medium that cannot be read (raised before sending)             -> MediaError

``ResponseError.kind`` is ``context_length`` / ``content_filter`` when the server says so,
else ``http_<status>``. The API key goes into the ``Authorization`` header and nowhere else:
not into messages, logs or ``repr``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from pydantic import SecretStr

from groundscope import media
from groundscope.client.http_errors import (
    _error_kind,
    _truncate,
    error_message,
    http_error,
)
from groundscope.client.retry import OnRetry, RetryPolicy, call_with_retry
from groundscope.errors import ConfigError, ResponseError, RetryableError
from groundscope.types import Completion, MediaPart, Message, TextPart, Usage

log = logging.getLogger(__name__)

_RESERVED_KEYS = frozenset({"model", "messages", "stream"})


# ---------------------------------------------------------------- pure: request building


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in OpenAI wire form; media are read and encoded here (``media.wire_part``)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.content
        if isinstance(content, str):
            out.append({"role": msg.role, "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "text": part.text})
            else:
                parts.append(media.wire_part(part.media))
        out.append({"role": msg.role, "content": parts})
    return out


def effective_config(generation_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The generation settings actually sent: ``None`` values dropped, temperature 0 default.

    ``model``, ``messages`` and ``stream`` are not generation settings and are dropped.
    """
    config = {
        k: v
        for k, v in (generation_config or {}).items()
        if v is not None and k not in _RESERVED_KEYS
    }
    config.setdefault("temperature", 0)
    return config


def build_body(
    messages: Sequence[Message], model: str, generation_config: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The chat-completions request body. Unknown generation keys pass through."""
    body: dict[str, Any] = {"model": model, "messages": wire_messages(messages)}
    body.update(effective_config(generation_config))
    body["stream"] = False
    return body


def _canonical_content(content: str | tuple[Any, ...]) -> Any:
    if isinstance(content, str):
        return content
    items: list[Any] = []
    for part in content:
        if isinstance(part, MediaPart):
            ref = part.media
            items.append([str(ref.kind), media.fingerprint(ref), ref.format, ref.detail])
        else:
            items.append(part.text)
    return items


def request_hash(
    messages: Sequence[Message], model: str, generation_config: Mapping[str, Any] | None
) -> str:
    """sha256 of the request's content: roles, texts, media identities, model, config.

    Media enter by ``media.fingerprint`` (never their base64), so hashing is cheap. The
    config enters as sent (:func:`effective_config`), so ``{}`` and ``{"temperature": 0}``
    hash alike.
    """
    doc = {
        "model": model,
        "messages": [[m.role, _canonical_content(m.content)] for m in messages],
        "config": effective_config(generation_config),
    }
    raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(raw).hexdigest()


# ---------------------------------------------------------------- pure: response parsing


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "".join(texts)
    return str(content)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    total = int(raw.get("total_tokens") or prompt + completion)
    return Usage(prompt, completion, total)


def parse_completion(payload: Any) -> Completion:
    """A ``Completion`` from a chat-completions response body.

    Raises ``ResponseError`` when there is no choice (an ``error`` object's message is
    quoted), and with kind ``content_filter`` when the reply was filtered to nothing.
    """
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        detail = error_message(payload) if isinstance(payload, Mapping) else ""
        msg = "response has no choices" + (f": {detail}" if detail else "")
        raise ResponseError(msg, kind=_error_kind(payload, detail, "no_choices"))
    choice = choices[0]
    message = choice.get("message") or {}
    text = _content_text(message.get("content"))
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    finish = choice.get("finish_reason")
    if finish == "content_filter" and not text:
        raise ResponseError("the reply was blocked by a content filter", kind="content_filter")
    return Completion(
        text=text,
        model=str(payload.get("model") or ""),
        finish_reason=finish,
        usage=_usage(payload.get("usage")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


# ---------------------------------------------------------------- the sender


def normalise_url(api_url: str) -> str:
    """The chat-completions endpoint from a base URL (``.../v1``) or the full endpoint URL.

    A URL without a path gets ``/v1/chat/completions``. Anything but http(s) is a ConfigError.
    """
    url = api_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"api_url must be an http(s) URL (got {parts.scheme or 'no'} scheme)")
    if url.endswith("/chat/completions"):
        return url
    if parts.path in ("", "/"):
        return url + "/v1/chat/completions"
    return url + "/chat/completions"


class ChatClient:
    """An OpenAI-compatible chat client with one pooled keep-alive session.

    The session is created lazily inside the running loop; use ``async with`` or call
    :meth:`aclose`. ``concurrency`` sizes the connection pool and bounds in-flight requests
    (extra callers wait for a slot *before* their timeout starts).
    """

    def __init__(
        self,
        api_url: str,
        model: str,
        *,
        api_key: SecretStr | str | None = None,
        generation_config: Mapping[str, Any] | None = None,
        timeout: float = 300.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 32,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.api_url = normalise_url(api_url)
        self.model = model
        self.api_key = api_key if isinstance(api_key, SecretStr | None) else SecretStr(api_key)
        self.generation_config: Mapping[str, Any] = dict(generation_config or {})
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"ChatClient(api_url={self.api_url!r}, model={self.model!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.api_key.get_secret_value() if self.api_key is not None else ""
        if key and key != "EMPTY":
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _scrub(self, raw: bytes) -> bytes:
        """An error body with our API key cut out (some servers echo a rejected key)."""
        key = self.api_key.get_secret_value().encode() if self.api_key is not None else b""
        return raw.replace(key, b"***") if len(key) >= 4 else raw

    def _ensure_session(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        session, slots = self._session, self._slots
        if session is None or slots is None or session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=self.concurrency, limit_per_host=0, keepalive_timeout=60,
                ttl_dns_cache=300,
            )
            session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                raise_for_status=False,
                auto_decompress=True,
            )
            slots = asyncio.Semaphore(self.concurrency)
            self._session, self._slots, self._loop = session, slots, loop
        return session, slots

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        generation_config: Mapping[str, Any] | None = None,
        on_retry: OnRetry | None = None,
    ) -> Completion:
        """Send one chat request, retrying transient failures; return the parsed reply.

        ``generation_config`` is merged over the client's default config. ``on_retry``
        (``(attempt, error, delay)``) lets the caller count retries; a final failure
        carries ``attempts`` on the raised ``ModelError``.
        """
        config = self.generation_config
        if generation_config:
            config = {**config, **generation_config}
        body = orjson.dumps(build_body(messages, self.model, config))  # MediaError: no retry
        completion, _ = await call_with_retry(
            lambda: self._post(body), self.retry, on_retry=on_retry or _log_retry
        )
        return completion

    async def _post(self, body: bytes) -> Completion:
        """One attempt: POST ``body`` and map the outcome onto a Completion or an error."""
        session, slots = self._ensure_session()
        async with slots:
            try:
                async with session.post(self.api_url, data=body) as resp:
                    raw = await resp.read()
                    status = resp.status
                    retry_after = resp.headers.get("Retry-After")
            except TimeoutError:
                raise RetryableError(
                    f"request timed out after {self.timeout:g}s", kind="timeout"
                ) from None
            except aiohttp.ClientError as exc:
                raise RetryableError(
                    f"connection error: {type(exc).__name__}: {_truncate(str(exc))}",
                    kind="connection",
                ) from None
        if status != 200:
            raise http_error(status, self._scrub(raw), retry_after)
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise RetryableError(
                f"malformed JSON in a 200 response ({len(raw)} bytes)",
                kind="malformed_response", status=status,
            ) from None
        return parse_completion(payload)

    async def aclose(self) -> None:
        """Close the pooled session (idempotent)."""
        session, self._session, self._slots, self._loop = self._session, None, None, None
        if session is not None and not session.closed:
            await session.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _log_retry(attempt: int, error: RetryableError, delay: float) -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug("attempt %d failed (%s); retrying in %.2fs", attempt, error.kind, delay)
