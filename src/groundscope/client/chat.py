"""The aiohttp sender of every API: :class:`ChatClient`, the policy over a wire API.

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
reply is ``malformed_response``. A 404 / 401 / 403 or an unknown model's error says what
was posted where and what to check (``client/first_errors.py``).

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
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urljoin

import aiohttp
import orjson
from pydantic import SecretStr

from groundscope.client.charge import estimate_tokens
from groundscope.client.fetch import MediaFetcher
from groundscope.client.first_errors import (
    MODELS_BODY_BYTES,
    hint,
    is_unknown_model,
    model_ids,
    models_url,
    wants_hint,
)
from groundscope.client.gate import QUOTA_KINDS, Gate, Outcome, RateGate
from groundscope.client.http_errors import truncate
from groundscope.client.limits import ERROR_BODY_BYTES, HEADER_LIMITS, read_body
from groundscope.client.mediaprep import prepare_messages
from groundscope.client.openai import CHAT, request_hash
from groundscope.client.ratelimit import retry_after
from groundscope.client.retry import OnRetry, RetryPolicy, call_with_retry
from groundscope.client.wire import WireAPI
from groundscope.defaults import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT
from groundscope.errors import ModelError, ResponseError, RetryableError
from groundscope.redaction import Redactor, redact_url, url_secrets
from groundscope.types import Completion, Message, Sample

log = logging.getLogger(__name__)


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
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        concurrency: int = 32,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        wire: WireAPI | None = None,
        gate: Gate | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
        key_source: str | None = None,
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
        # where the key came from, for a 401's message: "$NAME", "--api-key", a config file
        ref = getattr(api_key, "ref", None)  # (keys.ApiKey: the $NAME it was read from)
        self.key_source = (ref if isinstance(ref, str) else None) or key_source or (
            "the configured api_key" if self.api_key is not None else None)
        self._offered: asyncio.Future[list[str] | None] | None = None  # /v1/models, asked once
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

    def sample_hash(self, sample: Sample, repeat: int) -> str:
        """The hash of the request this client sends for ``sample`` (``openai.request_hash``);
        the per-sample interface ``pipeline.evaluate_sample`` uses (``client/answers.py`` too)."""
        return request_hash(sample.messages, self.model, self.generation_config)

    async def complete_sample(self, sample: Sample, repeat: int, *,
                              on_retry: OnRetry | None = None) -> Completion:
        """:meth:`complete` of ``sample``'s messages."""
        return await self.complete(sample.messages, on_retry=on_retry)

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
        # orjson (3.12+) returns its whole output buffer, ~16x a 133 KB body; the body waits out
        # the request (and its retries), so it is copied to its own size and the buffer freed
        body, tokens = bytes(memoryview(orjson.dumps(payload))), estimate_tokens(payload)
        del payload, fetched  # the media's base64 text: only the body is kept while in flight
        report = on_retry or _log_retry

        def retried(attempt: int, error: RetryableError, delay: float) -> None:
            self.gate.stats.retries += 1
            report(attempt, error, delay)

        completion, _ = await call_with_retry(lambda: self._post(body, tokens), self.retry,
                                              on_retry=retried, clock=self.clock)
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
                if wants_hint(err, str(err)):  # a wrong URL, key or model: say which
                    err = await self._explained(session, err)
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
        longest waits the retry policy allows, at least :data:`THROTTLED_FLOOR_S` and the
        policy's ``rate_limit_budget``."""
        return max(THROTTLED_FLOOR_S, 10 * self.retry.max_delay, self.retry.rate_limit_budget)

    def _error(self, status: int, raw: bytes, headers: Mapping[str, str]) -> ModelError:
        """A non-200 reply's error; ``retry-after-ms`` and a gateway's prefixed hints count
        too; a spent quota is kept."""
        err = self.wire.error(status, raw, headers.get("retry-after"), self.redactor.redact)
        if isinstance(err, RetryableError):
            hint = retry_after(headers, time.time())
            err.retry_after = hint if hint is not None else err.retry_after
        if isinstance(err, ResponseError) and err.kind in QUOTA_KINDS and self._spent is None:
            self._spent = err
            log.error("%s: %s", self.api_url, err)
        return err

    async def _explained(self, session: aiohttp.ClientSession,
                         err: ModelError) -> ResponseError:
        """A 404 / 401 / 403 / unknown-model error with the URL posted to and what to check;
        for an unknown model, what ``/v1/models`` offers (asked once per client, bounded)."""
        text = str(err)
        url = models_url(self._url.get_secret_value())
        offered = None
        if url is not None and is_unknown_model(err, text):
            asked = self._offered
            if asked is None or asked.get_loop() is not asyncio.get_running_loop():
                asked = self._offered = asyncio.ensure_future(self._ask_models(session, url))
            offered = await asyncio.shield(asked)  # every failing request waits for one answer
        offered = [self.redactor.redact(m) for m in offered] if offered else None
        said = hint(err, text, posted=self.api_url, model=self.model, key_source=self.key_source,
                    offered=offered)
        return ResponseError(f"{text} ({said})", kind=err.kind, status=err.status)

    async def _ask_models(self, session: aiohttp.ClientSession, url: str) -> list[str] | None:
        """The model ids ``url`` (``/v1/models``) lists; None if it answers otherwise."""
        try:
            async with session.get(url, allow_redirects=False) as resp:
                if resp.status == 200:
                    return model_ids(await read_body(resp, MODELS_BODY_BYTES)) or None
        except (aiohttp.ClientError, TimeoutError, ModelError):
            pass
        return None

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
