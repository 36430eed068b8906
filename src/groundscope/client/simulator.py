"""The offline OpenAI-compatible model: a real aiohttp server on loopback (SPEC section 11).

It answers ``POST /v1/chat/completions`` from the dataset's own references with a set
accuracy (a *noisy oracle*), and injects failures (429 with Retry-After, 500, hangs,
malformed JSON, dropped connections). Every decision is a hash of ``(seed, key, attempt)``,
where ``key`` identifies the request's content and ``attempt`` counts how often that key was
asked, so retries eventually succeed and a run is reproducible.

Replies come from *responders* tried in order (``SimRequest -> SimReply | None``); the
oracle is the last one and always answers. Judge / claim / verification modes plug in as
responders placed before it.

Observability: ``GET /_sim/requests`` and ``GET /_sim/stats`` (and the same in process);
no record holds base64 payloads (only their hashes) or the Authorization header.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import hashlib
import math
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web

from groundscope import media
from groundscope.errors import MediaError
from groundscope.types import AnswerKind, MediaRef, Sample, TextPart

GENERIC_ANSWER = "The image shows an ordinary everyday scene."
DISTRACTOR = "I cannot tell what this shows."
_PART_TYPES = frozenset({"text", "image_url", "input_audio", "video_url", "audio_url"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_MEDIA_TOKENS = {"image_url": 256, "input_audio": 128, "audio_url": 128, "video_url": 1024}
_HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})


def _unit(seed: int, *parts: object) -> float:
    """A deterministic number in [0, 1) from the seed and the parts."""
    raw = "\x1f".join([str(seed), *map(str, parts)]).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") / 2.0**64


def oracle_key(texts: Sequence[str], media_ids: Sequence[str]) -> str:
    """The identity of a request's content: all texts in order, then all media ids."""
    return hashlib.sha256(orjson.dumps([list(texts), list(media_ids)])).hexdigest()[:32]


def bytes_id(data: bytes) -> str:
    """The media id of raw bytes: the first 16 hex digits of their sha256."""
    return hashlib.sha256(data).hexdigest()[:16]


def sample_media_id(ref: MediaRef) -> str:
    """The media id the server will compute for ``ref`` (an http(s) URL stands for itself)."""
    if media.is_remote(ref):
        return str(ref.source)
    return bytes_id(media.load(ref)[0])


@dataclass(frozen=True, slots=True)
class SimBehaviour:
    """How the simulated model behaves. Rates are probabilities per request (sum <= 1).

    ``max_faults_per_key`` caps the injected failures per request key: with
    ``rate_500=1.0, max_faults_per_key=2`` every request succeeds on its third attempt.
    ``max_context_tokens`` makes prompts that are too long fail with a 400
    ``context_length_exceeded`` error, like a real endpoint.
    """

    accuracy: float = 1.0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0
    rate_429: float = 0.0
    retry_after_s: float = 1.0
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    hang_s: float = 30.0
    rate_malformed: float = 0.0
    rate_disconnect: float = 0.0
    max_faults_per_key: int | None = None
    max_context_tokens: int | None = None

    def __post_init__(self) -> None:
        rates = self._rates()
        if not 0.0 <= self.accuracy <= 1.0 or any(r < 0 for _, r in rates):
            raise ValueError("accuracy and failure rates must be in [0, 1]")
        if sum(r for _, r in rates) > 1.0 + 1e-9:
            raise ValueError("failure rates must sum to at most 1")

    def _rates(self) -> tuple[tuple[str, float], ...]:
        return (
            ("429", self.rate_429), ("500", self.rate_500), ("timeout", self.rate_timeout),
            ("malformed", self.rate_malformed), ("disconnect", self.rate_disconnect),
        )

    def fault(self, key: str, attempt: int) -> str | None:
        """The failure injected into attempt ``attempt`` (1-based) of ``key``, if any."""
        if self.max_faults_per_key is not None and attempt > self.max_faults_per_key:
            return None
        u = _unit(self.seed, key, attempt, "fault")
        for name, rate in self._rates():
            if u < rate:
                return name
            u -= rate
        return None

    def correct(self, key: str) -> bool:
        """Whether the oracle answers ``key`` correctly (fixed per seed and key)."""
        return _unit(self.seed, key, "correct") < self.accuracy

    def latency_s(self, key: str, attempt: int) -> float:
        jitter = self.jitter_ms * _unit(self.seed, key, attempt, "latency")
        return (self.latency_ms + jitter) / 1000.0


@dataclass(frozen=True, slots=True)
class OracleEntry:
    key: str
    references: tuple[str, ...]
    answer_kind: AnswerKind
    choices: tuple[str, ...]


def _sample_texts(sample: Sample) -> list[str]:
    texts: list[str] = []
    for msg in sample.messages:
        if isinstance(msg.content, str):
            texts.append(msg.content)
        else:
            texts.extend(p.text for p in msg.content if isinstance(p, TextPart))
    return texts


class Oracle:
    """Answers from references: request key -> (references, answer kind, choices)."""

    def __init__(self, entries: Iterable[tuple[OracleEntry, str]] = ()) -> None:
        """``entries`` are ``(entry, text_key)`` pairs; prefer :meth:`from_samples`."""
        self._by_key: dict[str, OracleEntry] = {}
        self._by_text: dict[str, OracleEntry | None] = {}
        pool: dict[str, None] = {}
        for entry, text_key in entries:
            self._by_key.setdefault(entry.key, entry)
            seen = self._by_text.get(text_key, entry)
            self._by_text[text_key] = entry if seen is not None and seen.key == entry.key else None
            if entry.answer_kind is AnswerKind.FREE and entry.references:
                pool.setdefault(entry.references[0], None)
        self._pool = tuple(pool)

    @classmethod
    def from_samples(cls, samples: Iterable[Sample]) -> Oracle:
        """Index samples by the key their wire request will have (media read via media.py)."""
        pairs = []
        for sample in samples:
            texts = _sample_texts(sample)
            text_key = oracle_key(texts, ())
            try:
                key = oracle_key(texts, [sample_media_id(r) for r in sample.media()])
            except MediaError:
                key = text_key
            entry = OracleEntry(key, sample.target, sample.answer_kind, sample.choices)
            pairs.append((entry, text_key))
        return cls(pairs)

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, key: str, text_key: str) -> OracleEntry | None:
        """The entry for a request: by full key, else by text alone when that is unique."""
        return self._by_key.get(key) or self._by_text.get(text_key)

    def answer(self, entry: OracleEntry | None, behaviour: SimBehaviour) -> str:
        """The oracle's reply: right with probability ``accuracy``, else a wrong one."""
        if entry is None or not entry.references:
            return GENERIC_ANSWER
        correct = behaviour.correct(entry.key)
        if entry.answer_kind is AnswerKind.CHOICE:
            return self._choice_answer(entry, correct, behaviour.seed)
        right = entry.references[0]
        if correct:
            return right
        wrong = [r for r in self._pool if r != right]
        if not wrong:
            return DISTRACTOR
        return wrong[int(_unit(behaviour.seed, entry.key, "wrong") * len(wrong))]

    @staticmethod
    def _choice_answer(entry: OracleEntry, correct: bool, seed: int) -> str:
        right = entry.references[0]
        letter: str | None = right
        if not correct:
            others = [c for c in entry.choices if c != right]
            letter = others[int(_unit(seed, entry.key, "wrong") * len(others))] if others else None
        if letter is None:
            return "None of the options seems to fit the question."
        return f"Weighing each option against the question, option {letter} fits best.\n" \
               f"ANSWER: {letter}"


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One parsed chat request, as a responder sees it."""

    body: Mapping[str, Any]
    texts: tuple[str, ...]
    media_ids: tuple[str, ...]
    key: str
    text_key: str
    attempt: int
    behaviour: SimBehaviour


@dataclass(frozen=True, slots=True)
class SimReply:
    content: str
    reasoning: str | None = None
    finish_reason: str = "stop"


Responder = Callable[[SimRequest], SimReply | None]


def oracle_responder(oracle: Oracle) -> Responder:
    """The fallback responder: the noisy oracle (always answers)."""

    def respond(req: SimRequest) -> SimReply:
        return SimReply(oracle.answer(oracle.lookup(req.key, req.text_key), req.behaviour))

    return respond


class BadRequest(Exception):
    """An invalid request: becomes an OpenAI-style 400."""

    def __init__(self, message: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.code, self.param = code, param


def _decode_data_url(url: str) -> bytes:
    header, sep, payload = url.partition(",")
    if not sep:
        raise BadRequest("invalid data URL: no comma")
    if header.endswith(";base64"):
        try:
            return binascii.a2b_base64(payload, strict_mode=True)
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
            data = binascii.a2b_base64(value, strict_mode=True)
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
    """Reject what a real endpoint rejects: no model, streaming, out-of-range settings."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("you must provide a model parameter", param="model")
    if body.get("stream"):
        raise BadRequest("streaming is not supported by the simulator", param="stream")
    for name, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        value = body.get(name)
        if value is not None and (
            not isinstance(value, int | float) or not low <= value <= high
        ):
            raise BadRequest(f"Invalid '{name}': must be between {low:g} and {high:g}.", param=name)
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("Invalid 'max_tokens': must be a positive integer.", param="max_tokens")


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type="application/json"
    )


def _error(status: int, message: str, kind: str, code: str | None = None,
           param: str | None = None, headers: Mapping[str, str] | None = None) -> web.Response:
    err = {"message": message, "type": kind, "param": param, "code": code}
    return _json({"error": err}, status, headers)


def _completion(req: SimRequest, reply: SimReply, prompt_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    completion_tokens = max(1, math.ceil(len(reply.content) / 4))
    return {
        "id": f"chatcmpl-sim-{req.key[:12]}-{req.attempt}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.body["model"],
        "system_fingerprint": "groundscope-sim",
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason,
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class SimulatorServer:
    """The simulator as a loopback HTTP server.

    Use it from synchronous code (``start()`` runs it in a background thread with its own
    loop; ``with SimulatorServer(...) as url:``) or inside a running loop (``await
    astart()`` / ``async with``). ``samples`` may be an already built :class:`Oracle`.
    ``responders`` are tried, in order, before the oracle.
    """

    def __init__(
        self,
        samples: Iterable[Sample] | Oracle = (),
        behaviour: SimBehaviour | None = None,
        *,
        responders: Sequence[Responder] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "groundscope-sim",
        keep_bodies: bool = False,
        record_limit: int | None = 100_000,
    ) -> None:
        self.behaviour = behaviour or SimBehaviour()
        self.oracle = samples if isinstance(samples, Oracle) else Oracle.from_samples(samples)
        self.responders: list[Responder] = [*responders, oracle_responder(self.oracle)]
        self.host, self.port, self.model = host, port, model
        self.keep_bodies = keep_bodies
        self._records: deque[dict[str, Any]] = deque(maxlen=record_limit)
        self._bodies: deque[Any] = deque(maxlen=record_limit)
        self._counts: Counter[str] = Counter()
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # ------------------------------------------------------------ observability

    def requests(self) -> list[dict[str, Any]]:
        """Every recorded request: seq, path, key, attempt, status, fault, headers, body."""
        with self._lock:
            return [dict(r) for r in self._records]

    def bodies(self) -> list[Any]:
        """The raw JSON bodies received (only with ``keep_bodies=True``)."""
        with self._lock:
            return list(self._bodies)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
            attempts = list(self._attempts.values())
        return {
            "requests": counts.get("requests", 0),
            "completions": counts.get("status:200", 0) - counts.get("fault:malformed", 0),
            "by_status": {k[7:]: v for k, v in counts.items() if k.startswith("status:")},
            "by_fault": {k[6:]: v for k, v in counts.items() if k.startswith("fault:")},
            "keys": len(attempts),
            "max_attempt": max(attempts, default=0),
        }

    def reset(self) -> None:
        """Forget records, counts and attempt numbers (the next request is attempt 1)."""
        with self._lock:
            self._records.clear()
            self._bodies.clear()
            self._counts.clear()
            self._attempts.clear()

    def _record(self, request: web.Request, status: int, **fields: Any) -> None:
        headers = {str(k): v for k, v in request.headers.items()
                   if k.lower() not in _HIDDEN_HEADERS}
        auth = request.headers.get("Authorization")
        with self._lock:
            self._counts["requests"] += 1
            self._counts[f"status:{status}"] += 1
            if fields.get("fault"):
                self._counts[f"fault:{fields['fault']}"] += 1
            self._records.append({
                "seq": self._counts["requests"], "method": request.method, "path": request.path,
                "status": status, "headers": headers,
                "auth_sha256": hashlib.sha256(auth.encode()).hexdigest()[:16] if auth else None,
                **fields,
            })

    # ------------------------------------------------------------ handlers

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            texts, ids, stripped, tokens = parse_messages(body.get("messages"))
            check_params(body)
        except (orjson.JSONDecodeError, BadRequest) as err:
            msg = str(err) if isinstance(err, BadRequest) else "could not parse the JSON body"
            self._record(request, 400, key=None, attempt=0, fault=None, error=msg)
            return _error(400, msg, "invalid_request_error", getattr(err, "code", None),
                          getattr(err, "param", None))
        key = oracle_key(texts, ids)
        with self._lock:
            attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
            if self.keep_bodies:
                self._bodies.append(body)
        req = SimRequest(body, tuple(texts), tuple(ids), key, oracle_key(texts, ()), attempt,
                         self.behaviour)
        info = {"key": key, "attempt": attempt, "model": body["model"],
                "body": {**body, "messages": stripped}}
        delay = self.behaviour.latency_s(key, attempt)
        if delay > 0:
            await asyncio.sleep(delay)
        fault = self.behaviour.fault(key, attempt)
        if fault is not None and fault != "timeout":
            return self._inject(request, fault, info)
        if fault == "timeout" and not await self._hang(request, info):
            self._record(request, 503, fault=fault, **info)
            return _error(503, "the simulator is shutting down", "server_error")
        return self._answer(request, req, tokens, fault, info)

    def _answer(self, request: web.Request, req: SimRequest, tokens: int, fault: str | None,
                info: dict[str, Any]) -> web.Response:
        limit = self.behaviour.max_context_tokens
        wanted = tokens + int(req.body.get("max_tokens") or 0)
        if limit is not None and wanted > limit:
            msg = (f"This model's maximum context length is {limit} tokens. However, you "
                   f"requested {wanted} tokens ({tokens} in the messages). Please reduce the "
                   "length of the messages.")
            self._record(request, 400, fault=fault, error=msg, **info)
            return _error(400, msg, "invalid_request_error", "context_length_exceeded",
                          "messages")
        reply = next(r for r in (f(req) for f in self.responders) if r is not None)
        self._record(request, 200, fault=fault, **info)
        return _json(_completion(req, reply, tokens))

    async def _hang(self, request: web.Request, info: dict[str, Any]) -> bool:
        """Hold the response for ``hang_s``; False if the server is stopping meanwhile.

        A client that gives up first is recorded with status 0 (its handler is cancelled).
        """
        assert self._closing is not None
        try:
            await asyncio.wait_for(self._closing.wait(), self.behaviour.hang_s)
        except TimeoutError:
            return True
        except asyncio.CancelledError:
            self._record(request, 0, fault="timeout", **info)
            raise
        return False

    def _inject(self, request: web.Request, fault: str, info: dict[str, Any]) -> web.Response:
        if fault == "429":
            after = self.behaviour.retry_after_s
            header = str(int(after)) if float(after).is_integer() else f"{after:g}"
            self._record(request, 429, fault=fault, **info)
            return _error(429, "Rate limit reached (simulated). Please retry later.",
                          "rate_limit_error", "rate_limit_exceeded",
                          headers={"Retry-After": header})
        if fault == "500":
            self._record(request, 500, fault=fault, **info)
            return _error(500, "The server had an error processing your request (simulated).",
                          "server_error")
        if fault == "malformed":
            self._record(request, 200, fault=fault, **info)
            return web.Response(body=b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mes',
                                content_type="application/json")
        self._record(request, 0, fault=fault, **info)  # disconnect
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # nothing may be written to a dropped connection

    async def _models(self, request: web.Request) -> web.Response:
        self._record(request, 200, key=None, attempt=0, fault=None)
        model = {"id": self.model, "object": "model", "created": 0,
                 "owned_by": "groundscope-simulator"}
        return _json({"object": "list", "data": [model]})

    async def _sim_requests(self, request: web.Request) -> web.Response:
        return _json(self.requests())

    async def _sim_bodies(self, request: web.Request) -> web.Response:
        return _json(self.bodies())

    async def _sim_stats(self, request: web.Request) -> web.Response:
        return _json(self.stats())

    async def _sim_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return _json({"ok": True})

    # ------------------------------------------------------------ lifecycle

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=512 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/_sim/requests", self._sim_requests)
        app.router.add_get("/_sim/bodies", self._sim_bodies)
        app.router.add_get("/_sim/stats", self._sim_stats)
        app.router.add_post("/_sim/reset", self._sim_reset)
        return app

    async def astart(self) -> str:
        """Start serving inside the running loop; return the base URL (``.../v1``)."""
        if self._runner is not None:
            raise RuntimeError("the simulator is already running")
        self._closing = asyncio.Event()
        runner = web.AppRunner(self._app(), access_log=None, handler_cancellation=True,
                               shutdown_timeout=1.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock, backlog=1024).start()
        self._runner = runner
        return self.base_url

    async def astop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            assert self._closing is not None
            self._closing.set()
            await runner.cleanup()

    async def __aenter__(self) -> str:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        await self.astop()

    def start(self) -> str:
        """Serve from a background thread with its own event loop; return the base URL."""
        if self._thread is not None:
            raise RuntimeError("the simulator is already running")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="groundscope-simulator",
                                  daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            return asyncio.run_coroutine_threadsafe(self.astart(), loop).result(timeout=30)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.astop(), loop).result(timeout=30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    host: str,
    port: int,
    samples: Iterable[Sample] | Oracle,
    behaviour: SimBehaviour | None = None,
    *,
    on_ready: Callable[[str], object] | None = None,
) -> None:
    """Run the simulator in the foreground until interrupted (``groundscope simulate``).

    ``on_ready(base_url)`` is called once it listens (default: print the URL).
    """

    async def main() -> None:
        server = SimulatorServer(samples, behaviour, host=host, port=port)
        url = await server.astart()
        (on_ready or (lambda u: print(f"groundscope simulator listening on {u}", flush=True)))(url)
        try:
            await asyncio.Event().wait()
        finally:
            await server.astop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
