"""OpenAI chat-completions: request building (pure) + the aiohttp sender of every API.

The pure half (:func:`wire_messages`, :func:`build_body`, :func:`request_hash`) knows the
wire format and nothing about I/O; a reply body is read by ``client/reply.py``; the two
make :data:`CHAT`, the ``openai_api`` :class:`~groundscope.client.wire.WireAPI`.
:class:`ChatClient` is the policy over a wire API (``CHAT`` unless given another, e.g.
``client/anthropic.py``, ``client/responses.py``): it owns one pooled keep-alive session,
the timeout, the retry policy and the reply bounds (``client/limits.py``), and maps every
failure onto the exception tree (the wire API names the error kinds)::

    HTTP 429 / 408 / 5xx, timeout, connection error, malformed 200 body  -> RetryableError
    other 4xx, a redirect (3xx), a reply over max_response_bytes,
    a body without choices that says why, an empty content-filtered reply -> ResponseError
    a medium that cannot be read (raised before sending)                 -> MediaError
    remote audio that cannot be fetched (before sending)                 -> MediaFetchError
    a part the wire API has no form for (e.g. audio for anthropic_api)   -> ModelError

``ResponseError.kind`` is ``context_length`` / ``content_filter`` when the server says so,
``redirect``, ``response_too_large``, ``media_fetch``, else ``http_<status>``; a malformed
reply is ``malformed_response``.

Credentials: the API key goes into the ``Authorization`` header (``Bearer``, sent as given,
``EMPTY`` included) and nowhere else (never to a media host: ``client/fetch.py``).
User-info in the URL (``http://user:password@host/v1``) is sent as HTTP Basic auth, as curl
does, and never kept in the URL the client shows; giving both is a ConfigError.
Every text that comes from the endpoint (error messages, completion text, reasoning, model
name) passes the client's :class:`~groundscope.redaction.Redactor` before anyone sees it,
so a server echoing a credential back, in whatever recognisable form, leaks nothing.

Redirects are never followed: a POST re-sent elsewhere would carry the whole request
(media included) to an address nobody configured. A 3xx fails the request as ``redirect``,
naming where it pointed, and is logged once per client.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import aiohttp
import orjson
from pydantic import SecretStr

from groundscope import media
from groundscope.client.fetch import MediaFetcher
from groundscope.client.gate import QUOTA_KINDS, Gate, Outcome, RateGate
from groundscope.client.http_errors import http_error, truncate
from groundscope.client.limits import DEFAULT_MAX_RESPONSE_BYTES, ERROR_BODY_BYTES, HEADER_LIMITS, read_body
from groundscope.client.mediaprep import prepare_messages
from groundscope.client.ratelimit import estimate_tokens, retry_after
from groundscope.client.reply import parse_completion
from groundscope.client.retry import OnRetry, RetryPolicy, call_with_retry
from groundscope.client.wire import WireAPI
from groundscope.errors import ConfigError, ModelError, ResponseError, RetryableError
from groundscope.redaction import Redactor, redact_url, url_credentials, url_secrets
from groundscope.types import Completion, MediaPart, Message, TextPart

log = logging.getLogger(__name__)

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


THROTTLED_FLOOR_S = 300.0  # an endpoint answering only 429 this long is given up on


class ChatClient:
    """A model client with one pooled keep-alive session, speaking ``wire`` (default
    :data:`CHAT`, OpenAI-compatible chat completions).

    The session is created lazily inside the running loop; use ``async with`` or call
    :meth:`aclose`. ``concurrency`` sizes the connection pool and bounds in-flight requests
    (extra callers wait for a slot *before* their timeout starts). Every attempt passes
    ``gate`` (default: a :class:`~groundscope.client.gate.RateGate` keeping ``rpm`` / ``tpm``
    and lowering the in-flight limit on 429s), charged :func:`estimate_tokens` of its body.
    A spent quota (``insufficient_quota``) fails every later request at once, unsent.
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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        wire: WireAPI | None = None,
        gate: Gate | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if max_response_bytes < 1:
            raise ValueError("max_response_bytes must be >= 1")
        self.api_key = api_key if isinstance(api_key, SecretStr | None) else SecretStr(api_key)
        self.wire = wire or CHAT
        url, auth_headers = self.wire.endpoint(api_url, self.api_key)
        self.api_url = redact_url(url)  # for display; requests go to the secret-bearing one
        self._url = SecretStr(url)
        self._auth_headers = {k: SecretStr(v) for k, v in auth_headers.items()}
        self.redactor = Redactor([*url_secrets(api_url),
                                  self.api_key.get_secret_value() if self.api_key else None])
        self.model = model
        self.generation_config: Mapping[str, Any] = dict(generation_config or {})
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.max_response_bytes = max_response_bytes
        self.gate: Gate = gate or RateGate(concurrency, rpm=rpm, tpm=tpm,
                                           max_pause=self.retry.max_delay)
        self._spent: ResponseError | None = None  # a quota error: later requests fail unsent
        # since when the endpoint has answered nothing but 429 (None: it answered otherwise)
        self._throttled_since: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._redirects_logged: set[str] = set()
        self.fetcher = MediaFetcher(timeout=timeout)  # remote audio, fetched at send time

    def __repr__(self) -> str:
        return f"ChatClient(api_url={self.api_url!r}, model={self.model!r}, api={self.wire.name!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update((k, v.get_secret_value()) for k, v in self._auth_headers.items())
        return headers

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
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
                **HEADER_LIMITS,
            )
            self._session, self._loop = session, loop
        return session

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        generation_config: Mapping[str, Any] | None = None,
        on_retry: OnRetry | None = None,
    ) -> Completion:
        """Send one request, retrying transient failures; return the parsed reply.

        ``generation_config`` is merged over the client's default config. ``on_retry``
        (``(attempt, error, delay)``) lets the caller count retries; a final failure
        carries ``attempts`` on the raised ``ModelError``.
        """
        config = self.generation_config
        if generation_config:
            config = {**config, **generation_config}
        # media converted for the endpoint (frames, downscaled images, wav: MediaError), remote
        # audio (MediaFetchError), then the body (MediaError): none retried
        messages = await prepare_messages(messages)
        fetched = await self.fetcher.fetch_all(messages) if self.wire.remote_audio else None
        payload = self.wire.body(messages, self.model, config, fetched)
        body, tokens = orjson.dumps(payload), estimate_tokens(payload)
        report = on_retry or _log_retry

        def retried(attempt: int, error: RetryableError, delay: float) -> None:
            self.gate.stats.retries += 1
            report(attempt, error, delay)

        completion, _ = await call_with_retry(lambda: self._post(body, tokens), self.retry,
                                              on_retry=retried)
        return completion

    async def _post(self, body: bytes, tokens: int) -> Completion:
        """One attempt: POST ``body`` (estimated at ``tokens``) through the gate; map the
        outcome onto a Completion or an error."""
        if self._spent is not None:
            raise ResponseError(str(self._spent), kind=self._spent.kind, status=self._spent.status)
        self._check_throttled()
        session = self._ensure_session()
        lease = await self.gate.acquire(tokens)
        outcome = Outcome()
        try:
            self._check_throttled()  # (it may have waited out a pause that changed nothing)
            status, raw, headers = await self._send(session, body)
            if status == 429:
                if self._throttled_since is None:
                    self._throttled_since = self.clock()
            else:
                self._throttled_since = None
            outcome = Outcome(status=status, headers=headers)
            if 300 <= status < 400:
                raise self._redirect(status, headers.get("location"))
            if status != 200:
                err = self._error(status, raw, headers)
                outcome = Outcome(status=status, headers=headers, kind=err.kind)
                raise err
            completion = self._redacted(self.wire.reply(raw))
            outcome = Outcome(status=status, headers=headers,
                              tokens=completion.usage.total_tokens or None)
            return completion
        finally:
            await self.gate.release(lease, outcome)

    def _check_throttled(self) -> None:
        """Refuse to send once the endpoint has answered only 429 for :meth:`throttled_limit`
        seconds: an endpoint that never lets a request through would otherwise keep the run
        crawling (one request per pause) for hours. The sample fails as ``rate_limited``
        (finished work is kept; ``--use-cache`` asks it again later)."""
        since = self._throttled_since
        if since is not None and self.clock() - since > self.throttled_limit:
            raise ResponseError(
                f"{self.api_url} has answered only HTTP 429 (rate limited) for over "
                f"{self.throttled_limit:g}s: not asking it again in this run (resume later "
                "with --use-cache RUN_DIR)", kind="rate_limited", status=429)

    @property
    def throttled_limit(self) -> float:
        """How long an endpoint may answer only 429 before requests to it fail: ten of the
        longest waits the retry policy allows, at least :data:`THROTTLED_FLOOR_S`."""
        return max(THROTTLED_FLOOR_S, 10 * self.retry.max_delay)

    def _error(self, status: int, raw: bytes, headers: Mapping[str, str]) -> ModelError:
        """A non-200 reply's error; ``retry-after-ms`` counts too; a spent quota is kept."""
        err = self.wire.error(status, raw, headers.get("retry-after"), self.redactor.redact)
        if isinstance(err, RetryableError) and "retry-after-ms" in headers:
            err.retry_after = retry_after(headers, time.time())
        if isinstance(err, ResponseError) and err.kind in QUOTA_KINDS and self._spent is None:
            self._spent = err
            log.error("%s: %s", self.api_url, err)
        return err

    async def _send(self, session: aiohttp.ClientSession,
                    body: bytes) -> tuple[int, bytes, dict[str, str]]:
        """POST ``body``: the status, the (capped) body and the headers (lower-cased names)."""
        try:
            async with session.post(self._url.get_secret_value(), data=body,
                                    allow_redirects=False) as resp:
                status = resp.status
                if status == 200:
                    raw = await read_body(resp, self.max_response_bytes)
                else:
                    raw = await read_body(resp, ERROR_BODY_BYTES, cut=True)
                headers = {k.lower(): v for k, v in resp.headers.items()}
        except TimeoutError:
            raise RetryableError(
                f"request timed out after {self.timeout:g}s", kind="timeout"
            ) from None
        except aiohttp.ClientResponseError as exc:  # a response head aiohttp refused
            what = truncate(self.redactor.redact(exc.message))  # (e.g. over HEADER_LIMITS)
            raise RetryableError(f"malformed response: invalid HTTP response head: {what}",
                                 kind="malformed_response") from None
        except aiohttp.ClientError as exc:
            what = self.redactor.redact(f"{type(exc).__name__}: {exc}")
            raise RetryableError(f"connection error: {truncate(what)}",
                                 kind="connection") from None
        return status, raw, headers

    def _redacted(self, completion: Completion) -> Completion:
        """The reply with every credential the endpoint may have echoed hidden."""
        redact = self.redactor.redact
        return dataclasses.replace(
            completion, text=redact(completion.text), model=redact(completion.model),
            reasoning=self.redactor.redact_optional(completion.reasoning),
            finish_reason=self.redactor.redact_optional(completion.finish_reason),
        )

    def _redirect(self, status: int, location: str | None) -> ResponseError:
        """A 3xx: never followed (the body would be re-sent); logged once per target."""
        target = redact_url(urljoin(self.api_url, location)) if location else "(no Location)"
        target = truncate(self.redactor.redact(target))
        if target not in self._redirects_logged:
            self._redirects_logged.add(target)
            log.warning("%s answered HTTP %d redirecting to %s: not followed (the request, media "
                        "included, would be re-sent there); set the URL to the final address",
                        self.api_url, status, target)
        return ResponseError(f"HTTP {status}: redirect to {target} not followed",
                             kind="redirect", status=status)

    async def aclose(self) -> None:
        """Close the pooled session and the media fetcher's (idempotent)."""
        session, self._session, self._loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()
        await self.fetcher.aclose()

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
