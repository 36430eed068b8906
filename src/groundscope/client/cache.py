"""A disk cache of chat completions, and :class:`CachedChat`, a caching layer over ``ChatClient``.

Judge calls (and the grounding steps: claim extraction, verification, equivalence) are
deterministic requests whose replies can be kept, so re-scoring a run or resuming it never
pays for the same call twice. The cache is one append-only JSONL file per purpose in the
run directory (``<run_dir>/cache/judge.jsonl``), one line per reply, flushed as it is
written; a torn last line left by a crash is ignored (and cut before the next append) and a
corrupt line is skipped, since a cache is never the source of truth.

The key is the sha256 of the request's identity (:func:`cache_key`): the model id, the
*configured* API URL (``"mock"`` stays ``"mock"`` although the simulator's port changes), the
API it is spoken in (another than ``openai_api`` only: chat keys are what they always were),
the full request messages and the generation config as sent. Media enter by their stable
description (path, redacted URL or content hash, ``media.describe``), never by payload,
so a request rebuilt from a saved run hashes like the original. Only successful replies are
stored: a failed request is retried next time. API keys are never part of a key or a line.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from groundscope import media
from groundscope.bounds import MAX_RUN_LINE_BYTES
from groundscope.client.chat import ChatClient
from groundscope.client.openai import effective_config
from groundscope.errors import StoreError
from groundscope.fileio import open_regular, write_error
from groundscope.jsonl import Shard
from groundscope.redaction import redact_url
from groundscope.types import MAX_TOKEN_COUNT, Completion, MediaPart, MediaRef, Message, Usage

log = logging.getLogger("groundscope")

CACHE_VERSION = 1


def _content_identity(content: str | tuple[Any, ...]) -> Any:
    if isinstance(content, str):
        return content
    return [_media_identity(p.media) if isinstance(p, MediaPart) else p.text for p in content]


def _media_identity(ref: MediaRef) -> str:
    ident = f"{ref.kind}:{media.describe(ref)}"
    return ident if ref.fps is None else f"{ident}|fps={ref.fps!r}"  # sent: part of the request


def _message_identity(msg: Message) -> list[Any]:
    item = [msg.role, _content_identity(msg.content)]
    tools = msg.tool_fields()
    return [*item, tools] if tools else item


def cache_key(model_id: str, api_url: str, messages: Sequence[Message],
              generation_config: Mapping[str, Any] | None, api: str = "openai_api") -> str:
    """sha256 of a request's identity: model id, configured URL, API, messages, generation
    config.

    >>> k = cache_key("judge", "mock", [Message("user", "hi")], {})
    >>> k == cache_key("judge", "mock", [Message("user", "hi")], {"temperature": 0})
    True
    >>> k == cache_key("judge", "mock", [Message("user", "hi!")], {})
    False
    >>> k == cache_key("judge", "mock", [Message("user", "hi")], {}, api="anthropic_api")
    False
    """
    doc = {
        "v": CACHE_VERSION,
        "model": model_id,
        "api_url": api_url,
        "messages": [_message_identity(m) for m in messages],
        "config": effective_config(generation_config),
    }
    converted = media.settings_identity(r.kind for m in messages for r in m.media())
    if converted:  # the media were sent converted (frames, downscaled, wav)
        doc["media_settings"] = converted
    if api != "openai_api":
        doc["api"] = api
    raw = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(raw).hexdigest()


def completion_to_json(c: Completion) -> dict[str, Any]:
    u = c.usage
    return {"text": c.text, "reasoning": c.reasoning, "model": c.model,
            "finish_reason": c.finish_reason,
            "usage": [u.prompt_tokens, u.completion_tokens, u.total_tokens, u.reasoning_tokens,
                      u.cached_tokens]}


def completion_from_json(row: Mapping[str, Any]) -> Completion:
    """A cached reply (an older line has three usage counts); a count that is not a
    non-negative int below 2**31 makes the line unreadable (ValueError: skipped)."""
    usage = row.get("usage") or [0, 0, 0]
    if len(usage) > 5 or not all(type(u) is int and 0 <= u <= MAX_TOKEN_COUNT for u in usage):
        raise ValueError("usage")
    return Completion(text=str(row.get("text") or ""), model=str(row.get("model") or ""),
                      finish_reason=row.get("finish_reason"), reasoning=row.get("reasoning"),
                      usage=Usage(*usage))


class SharedReplies(Protocol):
    """Replies shared by several processes (a Ray run's workers), consulted by
    :class:`CachedChat` on a miss of its own cache.

    ``claim(key)`` is the reply when another process has it (waiting while one is asking for
    it), else None: the caller holds the key's claim and must ``publish`` its reply or
    ``abandon`` the claim (its request failed: errors are not shared), which passes it to a
    waiter.
    """

    async def claim(self, key: str) -> Completion | None: ...
    async def publish(self, key: str, completion: Completion) -> None: ...
    async def abandon(self, key: str) -> None: ...


class ResponseCache:
    """Completions by key, backed by an append-only JSONL file (``path=None``: memory only).

    The file is read on first use. Not thread-safe: use it from one event loop. ``shared``
    (None in a local run) is a store of replies other processes of the run ask and answer.
    """

    shared: SharedReplies | None = None

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._rows: dict[str, Completion] | None = None
        self._file = Shard(path, key_fields=()) if path is not None else None  # jsonl.py's writer

    def _load(self) -> dict[str, Completion]:
        if self._rows is not None:
            return self._rows
        rows: dict[str, Completion] = {}
        skipped = 0
        if self.path is not None and self.path.exists():
            with open_regular(self.path) as fh:  # a run directory's file: untrusted
                while raw := fh.readline(MAX_RUN_LINE_BYTES + 1):
                    if len(raw) > MAX_RUN_LINE_BYTES:
                        raise StoreError(f"{self.path}: a line over {MAX_RUN_LINE_BYTES} "
                                         "bytes; refused")
                    if not raw.endswith(b"\n"):
                        break  # torn tail from a crash mid-write
                    try:
                        row = orjson.loads(raw)
                        rows[row["key"]] = completion_from_json(row["completion"])
                    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                        skipped += 1
        if skipped:
            log.warning("%s: skipped %d unreadable cache line(s)", self.path, skipped)
        self._rows = rows
        return rows

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: str) -> Completion | None:
        return self._load().get(key)

    def items(self) -> list[tuple[str, Completion]]:
        """Every reply kept, by key."""
        return list(self._load().items())

    def put(self, key: str, completion: Completion, *, model: str = "") -> None:
        """Keep a reply (in memory and, with a path, as one flushed line)."""
        self._load()[key] = completion
        if self._file is None:
            return
        row = {"key": key, "model": model, "completion": completion_to_json(completion)}
        try:
            self._file.append(row)
        except OSError as exc:  # e.g. a full disk: one line, not a traceback
            raise write_error(self._file.path, exc) from None

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError as exc:
            raise write_error(self._file.path, exc) from None


Connect = Callable[[], Awaitable[ChatClient]]


class CachedChat:
    """``complete(messages)`` answered from a :class:`ResponseCache`, else by a ``ChatClient``.

    ``model_id``, ``api_url`` (as configured, without credentials: ``redact_url``), ``api``
    and ``generation_config`` form the key with the messages. ``connect`` builds the client on
    the first miss, inside the running loop, so a fully cached run opens no connection.
    Identical requests in flight at once are sent once (across processes too, when the cache
    has a ``shared`` store: each is then asked once by the run). ``requests`` counts calls that
    reached the client, ``hits`` calls answered from the cache. ``on_reply(completion,
    cached)`` hears of every reply returned (``cached``: from the cache, no request sent).
    """

    def __init__(self, cache: ResponseCache, *, model_id: str, api_url: str,
                 generation_config: Mapping[str, Any] | None, connect: Connect,
                 api: str = "openai_api",
                 on_reply: Callable[[Completion, bool], None] | None = None) -> None:
        self.cache = cache
        self.model_id = model_id
        self.api_url = redact_url(api_url)  # URL credentials never enter a key
        self.api = api
        self.generation_config: dict[str, Any] = dict(generation_config or {})
        self._connect = connect
        self._client: ChatClient | None = None
        self._connecting = asyncio.Lock()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self.hits = 0
        self.requests = 0
        self._on_reply = on_reply or (lambda _c, _cached: None)

    def __repr__(self) -> str:
        return f"CachedChat(model_id={self.model_id!r})"

    def key(self, messages: Sequence[Message]) -> str:
        return cache_key(self.model_id, self.api_url, messages, self.generation_config, self.api)

    async def complete(self, messages: Sequence[Message]) -> Completion:
        """The reply to ``messages``; ``ModelError`` / ``MediaError`` propagate uncached."""
        key = self.key(messages)
        hit = self.cache.get(key)
        if hit is not None:
            self.hits += 1
            self._on_reply(hit, True)
            return hit
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                hit = self.cache.get(key)
                if hit is not None:
                    self.hits += 1
                    self._on_reply(hit, True)
                    return hit
                shared = self.cache.shared
                if shared is not None:  # a Ray worker: another one may have it or be asking
                    return await self._shared_complete(shared, key, messages)
                client = await self._ensure_client()
                self.requests += 1
                completion = await client.complete(messages, generation_config=self.generation_config)
                self.cache.put(key, completion, model=self.model_id)
                self._on_reply(completion, False)
                return completion
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def _request(self, messages: Sequence[Message]) -> Completion:
        client = await self._ensure_client()
        self.requests += 1
        return await client.complete(messages, generation_config=self.generation_config)

    async def _shared_complete(self, shared: SharedReplies, key: str,
                               messages: Sequence[Message]) -> Completion:
        """A miss with a shared store: its reply (a hit, as if from this cache), or the
        claim and then the request, its reply published; a failure hands the claim on."""
        hit = await shared.claim(key)
        if hit is not None:
            self.hits += 1
            self.cache.put(key, hit, model=self.model_id)
            self._on_reply(hit, True)
            return hit
        try:
            completion = await self._request(messages)
        except BaseException:
            await shared.abandon(key)
            raise
        try:
            self.cache.put(key, completion, model=self.model_id)
        finally:
            await shared.publish(key, completion)
        self._on_reply(completion, False)
        return completion

    async def _ensure_client(self) -> ChatClient:
        async with self._connecting:
            if self._client is None:
                self._client = await self._connect()
            return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
