"""OpenAI chat-completions, the pure half: request building and the ``openai_api`` wire.

:func:`wire_messages`, :func:`build_body` and :func:`request_hash` know the wire format and
nothing about I/O; a reply body is read by ``client/reply.py``; the two make :data:`CHAT`,
the ``openai_api`` :class:`~groundscope.client.wire.WireAPI`. :func:`endpoint_auth` turns a
URL and a key into where requests go and the ``Authorization`` they carry: the API key as
``Bearer`` (sent as given, ``EMPTY`` included) and nowhere else; user-info in the URL
(``http://user:password@host/v1``) as HTTP Basic auth, as curl does, never kept in the URL
shown; both at once is a ConfigError. The sender of every API is ``client/chat.py``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from pydantic import SecretStr

from groundscope import media
from groundscope.client.http_errors import http_error
from groundscope.client.reply import parse_completion
from groundscope.client.wire import WireAPI
from groundscope.errors import ConfigError
from groundscope.redaction import url_credentials
from groundscope.types import MediaPart, Message, TextPart

_RESERVED_KEYS = frozenset({"model", "messages", "stream"})


# ---------------------------------------------------------------- pure: request building


def wire_messages(messages: Sequence[Message],
                  fetched: Mapping[str, bytes] | None = None) -> list[dict[str, Any]]:
    """Messages in OpenAI wire form; media are read and encoded here (``media.wire_part``).

    ``fetched`` holds the bytes of remote audio by URL (``client/fetch.py``). A tool-calling
    transcript's keys (``name``, ``tool_calls``, ``tool_call_id``) go out as the record gave them.
    """
    fetched = fetched or {}
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.content
        if isinstance(content, str):
            out.append({"role": msg.role, "content": content, **msg.tool_fields()})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "text": part.text})
            else:
                ref = part.media
                parts.append(media.wire_part(ref, fetched=fetched.get(str(ref.source))
                                             if isinstance(ref.source, str) else None))
        out.append({"role": msg.role, "content": parts, **msg.tool_fields()})
    return out


def effective_config(generation_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The generation settings actually sent: ``None`` values dropped, temperature 0 default.

    ``temperature`` is 0 unless the config names one (EvalScope adds it only to an empty
    config; here the same record gets the same decoding whatever else is set).
    ``"temperature": None`` sends none: the server's default. ``model``, ``messages`` and
    ``stream`` are not generation settings and are dropped.
    """
    given = generation_config or {}
    config = {k: v for k, v in given.items() if v is not None and k not in _RESERVED_KEYS}
    if "temperature" not in given:
        config["temperature"] = 0
    return config


def build_body(
    messages: Sequence[Message], model: str, generation_config: Mapping[str, Any] | None,
    fetched: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """The chat-completions request body. Unknown generation keys pass through; no
    ``stream`` key (non-streaming is the API's default; EvalScope sends none either)."""
    body: dict[str, Any] = {"model": model, "messages": wire_messages(messages, fetched)}
    body.update(effective_config(generation_config))
    extra = body.pop("extra_body", None)  # the OpenAI SDK's extra_body: merged into the body
    if isinstance(extra, Mapping):
        body.update((k, v) for k, v in extra.items() if k not in _RESERVED_KEYS)
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


def _canonical_message(msg: Message) -> list[Any]:
    item = [msg.role, _canonical_content(msg.content)]
    tools = msg.tool_fields()
    return [*item, tools] if tools else item  # a plain message hashes as it always did


def request_hash(
    messages: Sequence[Message], model: str, generation_config: Mapping[str, Any] | None
) -> str:
    """sha256 of the request's content: roles, texts, media identities, tool-calling keys,
    model, config.

    Media enter by ``media.fingerprint`` (never their base64), so hashing is cheap. The
    config enters as sent (:func:`effective_config`), so ``{}`` and ``{"temperature": 0}``
    hash alike. The media settings in force that change these media (video frames, image
    side / bytes, audio transcoding: ``media.settings_identity``) enter too, only when set.
    """
    doc: dict[str, Any] = {
        "model": model,
        "messages": [_canonical_message(m) for m in messages],
        "config": effective_config(generation_config),
    }
    converted = media.settings_identity(r.kind for m in messages for r in m.media())
    if converted:
        doc["media_settings"] = converted
    raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(raw).hexdigest()


# ---------------------------------------------------------------- the endpoint


def normalise_url(api_url: str) -> str:
    """The chat-completions endpoint from a base URL (``.../v1``) or the full endpoint URL.

    A URL without a path gets ``/v1/chat/completions``; a query string is kept at the end.
    Anything but http(s) is a ConfigError.
    """
    parts = urlsplit(api_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"api_url must be an http(s) URL (got {parts.scheme or 'no'} scheme)")
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions" if path else "/v1/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def endpoint_auth(api_url: str, api_key: SecretStr | str | None) -> tuple[str, str | None]:
    """``(URL to post to, Authorization header or None)`` for an endpoint.

    The URL is normalised (:func:`normalise_url`) and stripped of user-info, which becomes
    HTTP Basic auth; the API key becomes ``Bearer`` auth, sent as given: ``EMPTY`` too, as
    the OpenAI SDK (and so EvalScope) sends it, since vLLM / SGLang started with ``--api-key
    EMPTY`` compare it literally. No key (or an empty one): no header. A key and URL
    credentials at once is a ConfigError, except the key ``EMPTY`` (EvalScope's default,
    meaning none), which the URL's credentials replace. Anything :func:`normalise_url`
    refuses is a ConfigError too.
    """
    url = normalise_url(api_url)
    key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key or ""
    creds = url_credentials(url)
    if creds is None:
        return url, f"Bearer {key}" if key else None
    if key and key != "EMPTY":
        raise ConfigError("api_url: has credentials (user:password@) and an api_key is set too; "
                          "give one of them")
    parts = urlsplit(url)
    bare = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))
    return bare, "Basic " + base64.b64encode(":".join(creds).encode()).decode()


def chat_endpoint(api_url: str, api_key: SecretStr | str | None) -> tuple[str, dict[str, str]]:
    """:func:`endpoint_auth` as the headers a request carries."""
    url, authorization = endpoint_auth(api_url, api_key)
    return url, {"Authorization": authorization} if authorization else {}


CHAT = WireAPI("openai_api", chat_endpoint, build_body, parse_completion, http_error,
               remote_audio=True)
