"""What one model API's wire module provides to the client policy, and helpers they share.

:class:`~groundscope.client.chat.ChatClient` is the policy (one pooled session, the
concurrency bound, retries, the reply size cap, redirect refusal, redaction); a
:class:`WireAPI` is the protocol it speaks, four pure functions:

    endpoint(api_url, api_key) -> (URL to post to, auth headers)   ConfigError on a bad URL
    body(messages, model, generation_config, fetched) -> JSON body  media encoded here

``remote_audio``: the API takes audio inline, so remote audio is fetched before ``body``
(``fetched``: URL -> bytes; None for the other APIs).
    reply(raw 200 body) -> Completion                               pydantic-validated
    error(status, raw body, Retry-After, redact) -> ModelError      the error kinds

The three APIs: ``openai_api`` (``client/openai.py``), ``anthropic_api``
(``client/anthropic.py``) and ``openai_responses_api`` (``client/responses.py``); the
registry is ``client/apis.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from groundscope import media
from groundscope.errors import ConfigError, ModelError
from groundscope.types import Completion, MediaRef, Message, Modality

Endpoint = Callable[[str, SecretStr | str | None], tuple[str, dict[str, str]]]
BuildBody = Callable[[Sequence[Message], str, Mapping[str, Any] | None, Mapping[str, bytes] | None],
                     dict[str, Any]]
ParseReply = Callable[[bytes], Completion]
MapError = Callable[[int, bytes, str | None, Callable[[str], str]], ModelError]


@dataclass(frozen=True, slots=True)
class WireAPI:
    """One model API's wire format: the four pure functions the client policy calls."""

    name: str
    endpoint: Endpoint
    body: BuildBody
    reply: ParseReply
    error: MapError
    remote_audio: bool = False

    def __repr__(self) -> str:
        return f"WireAPI({self.name!r})"


def endpoint_url(api_url: str, suffix: str, *, add_version: bool = False) -> str:
    """The URL to post to: ``api_url``'s path ending in ``suffix``, user-info dropped.

    A path already ending in ``suffix`` is kept; an empty path gets ``/v1`` + ``suffix``;
    any other path gets ``suffix`` appended, or with ``add_version`` (the Anthropic SDK's
    rule) ``/v1`` + ``suffix`` unless it already ends in ``/v1``. The query string is kept
    last. Anything but http(s) is a ConfigError.

    >>> endpoint_url("https://api.anthropic.com", "/messages", add_version=True)
    'https://api.anthropic.com/v1/messages'
    >>> endpoint_url("https://h/apps/anthropic", "/messages", add_version=True)
    'https://h/apps/anthropic/v1/messages'
    >>> endpoint_url("http://u:p@h:8/proxy/v1/?a=1", "/responses")
    'http://h:8/proxy/v1/responses?a=1'
    """
    parts = urlsplit(api_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"api_url must be an http(s) URL (got {parts.scheme or 'no'} scheme)")
    path = parts.path.rstrip("/")
    if not path.endswith(suffix):
        if not path or (add_version and not path.endswith("/v1")):
            path += "/v1"
        path += suffix
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


def unsupported(api: str, what: str, kind: str = "unsupported_media") -> ModelError:
    """The per-sample error of a request part the API has no form for (raised before
    sending, so never retried): ``unsupported_media``, or ``unsupported_message`` for a
    message role it has no turn for."""
    return ModelError(f"{api}: {what}", kind=kind)


def image_url(ref: MediaRef, api: str) -> str:
    """An image as the chat API would send it: a ``data:`` URL (read and encoded by
    ``media``, at send time) or the http(s) URL itself. Audio and video are refused before
    anything is read: the other APIs have no part for them."""
    if ref.kind is not Modality.IMAGE:
        raise unsupported(api, f"{ref.kind} input is not accepted by this API "
                               f"({media.describe(ref)}); use --eval-type openai_api")
    part = media.wire_part(ref)
    return str(part["image_url"]["url"])


def system_text(msg: Message, api: str) -> str:
    """A system (or developer) message's text; media there have no form in these APIs."""
    if msg.media():
        raise unsupported(api, f"a {msg.role} message cannot carry media")
    return msg.text()
