"""The offline model server: a real aiohttp server on loopback.

It answers ``POST /v1/chat/completions``, ``/v1/messages`` (Anthropic) and ``/v1/responses``
(OpenAI Responses) alike (``apis.py`` turns each into one form and renders the reply in its
own), from the dataset's own references with a set accuracy (a *noisy oracle*,
``oracle.py``), and injects failures (429 with Retry-After, 500, hangs, malformed JSON,
dropped connections) and, on request, hostile replies (broken 200 bodies, huge /
gzip-bombed / endless replies, redirects, echoed keys: ``faults.py``). Every decision is a
hash of ``(seed, key, attempt)``, where ``key`` identifies the request's content and
``attempt`` counts how often that key was asked, so retries eventually succeed and a run is
reproducible.

Replies come from *responders* tried in order (``SimRequest -> SimReply | None``); the
oracle is the last one and always answers. Judge / claim / verification modes plug in as
responders placed before it (``judge.py``, ``grounding.py``). Request parsing and the reply JSON live in
``wire.py``.

Observability: ``GET /_sim/requests`` and ``GET /_sim/stats`` (and the same in process);
no record holds base64 payloads (only their hashes) or a credential header.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from groundscope.simulator.apis import CHAT, MESSAGES, RESPONSES, SimAPI
from groundscope.simulator.faults import (
    MALFORMED_BODIES,
    credential_header,
    echo_reply,
    hostile_reply,
    malformed_kind,
    with_usage_count,
)
from groundscope.simulator.gateway import check_model, gateway_middleware, model_list
from groundscope.simulator.generation import fit
from groundscope.simulator.limits import ProviderLimits, reserved
from groundscope.simulator.oracle import (
    DISTRACTOR,
    GENERIC_ANSWER,
    Oracle,
    OracleEntry,
    SimBehaviour,
    oracle_key,
    oracle_responder,
    sample_media_id,
)
from groundscope.simulator.stream import reply_response
from groundscope.simulator.wire import (
    BadRequest,
    Responder,
    SimReply,
    SimRequest,
    bytes_id,
    check_params,
    json_response,
    parse_messages,
)
from groundscope.types import Sample

if TYPE_CHECKING:
    pass

__all__ = [
    "DISTRACTOR", "GENERIC_ANSWER", "BadRequest", "Oracle", "OracleEntry", "Responder",
    "SimBehaviour", "SimReply", "SimRequest", "SimulatorServer", "bytes_id", "check_params",
    "oracle_key", "oracle_responder", "parse_messages", "sample_media_id",
]

_HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})


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
        self.clock = time.monotonic  # the limits' clock (tests drive it by hand)
        self.limits = ProviderLimits.of(self.behaviour, self.clock())
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
            **self.limits.stats(),  # 429s by limit (rpm / tpm / in flight), peak in flight
        }

    def reset(self) -> None:
        """Forget records, counts and attempt numbers (the next request is attempt 1)."""
        with self._lock:
            self._records.clear()
            self._bodies.clear()
            self._counts.clear()
            self._attempts.clear()
        self.limits = ProviderLimits.of(self.behaviour, self.clock())

    def _record(self, request: web.Request, status: int, **fields: Any) -> None:
        headers = {str(k): v for k, v in request.headers.items()
                   if k.lower() not in _HIDDEN_HEADERS}
        auth = credential_header(request)
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
    # one method per API, so that a test's subclass can hold or count one API's requests

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(CHAT, request)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(MESSAGES, request)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(RESPONSES, request)

    async def _serve(self, api: SimAPI, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()  # the latency counts from here: parsing is part of it
        raw = await request.read()
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            chat = api.to_chat(body, request.headers)
            texts, ids, stripped, tokens = parse_messages(chat.get("messages"))
            check_params(chat)
            check_model(chat, self.behaviour.models, self.behaviour.gateway)
        except (orjson.JSONDecodeError, BadRequest) as err:
            msg, status = (str(err), err.status) if isinstance(err, BadRequest) else (
                "could not parse the JSON body", 400)
            self._record(request, status, key=None, attempt=0, fault=None, error=msg, api=api.name)
            return api.error(status, msg, "invalid_request_error", getattr(err, "code", None),
                             getattr(err, "param", None))
        key = oracle_key(texts, ids)
        with self._lock:
            attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
            if self.keep_bodies:
                self._bodies.append(body)
        req = SimRequest(chat, tuple(texts), tuple(ids), key, oracle_key(texts, ()), attempt,
                         self.behaviour)
        info = {"key": key, "attempt": attempt, "model": chat["model"], "api": api.name,
                "body": {**chat, "messages": stripped}}
        limits = self.limits
        refused = limits.enter(tokens, reserved(chat), self.clock())
        if refused is not None:
            self._record(request, 429, fault=f"rate_limit:{refused.kind}", **info)
            return api.error(429, refused.message, refused.kind, "rate_limit_exceeded",
                             headers=refused.headers)
        try:
            return await self._respond(api, request, req, tokens, info, started)
        finally:
            limits.leave(info.get("completion_tokens", 0))

    async def _respond(self, api: SimAPI, request: web.Request, req: SimRequest, tokens: int,
                       info: dict[str, Any], started: float) -> web.StreamResponse:
        key, attempt = req.key, req.attempt
        delay = self.behaviour.latency_s(key, attempt) - (time.monotonic() - started)
        if delay > 0:
            await asyncio.sleep(delay)
        hostile = await hostile_reply(request, self.behaviour, info, self._record)
        if hostile is not None:
            return hostile
        fault = self.behaviour.fault(key, attempt)
        if fault is not None and fault != "timeout":
            return self._inject(api, request, fault, info)
        if fault == "timeout" and not await self._hang(request, info):
            self._record(request, 503, fault=fault, **info)
            return api.error(503, "the simulator is shutting down", "server_error")
        return self._answer(api, request, req, tokens, fault, info)

    def _answer(self, api: SimAPI, request: web.Request, req: SimRequest, tokens: int,
                fault: str | None, info: dict[str, Any]) -> web.Response:
        limit = self.behaviour.max_context_tokens
        wanted = tokens + int(req.body.get("max_tokens") or 0)
        if limit is not None and wanted > limit:
            msg = (f"This model's maximum context length is {limit} tokens. However, you "
                   f"requested {wanted} tokens ({tokens} in the messages). Please reduce the "
                   "length of the messages.")
            self._record(request, 400, fault=fault, error=msg, **info)
            return api.error(400, msg, "invalid_request_error", "context_length_exceeded",
                             "messages")
        reply = fit(req.body, next(r for r in (f(req) for f in self.responders) if r is not None))
        self._record(request, 200, fault=fault, **info)
        info["completion_tokens"] = max(1, -(-len(reply.content) // 4))
        if self.behaviour.echo_key == "reply":
            reply, model = echo_reply(reply, req.body["model"], credential_header(request))
            req = dataclasses.replace(req, body={**req.body, "model": model})
        body = with_usage_count(api.reply(req, reply, tokens), self.behaviour.usage_count)
        return reply_response(api.name, req.body, body,
                              self.limits.headers(self.clock()))  # JSON, or SSE (stream.py)

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

    def _inject(self, api: SimAPI, request: web.Request, fault: str,
                info: dict[str, Any]) -> web.Response:
        if fault == "429":
            after = self.behaviour.retry_after_s
            header = str(int(after)) if float(after).is_integer() else f"{after:g}"
            self._record(request, 429, fault=fault, **info)
            return api.error(429, "Rate limit reached (simulated). Please retry later.",
                             "rate_limit_error", "rate_limit_exceeded",
                             headers={"Retry-After": header})
        if fault == "500":
            self._record(request, 500, fault=fault, **info)
            return api.error(500, "The server had an error processing your request (simulated).",
                             "server_error")
        if fault == "malformed":
            with self._lock:
                kind = malformed_kind(self.behaviour.malformed_body, self._counts["malformed"])
                self._counts["malformed"] += 1
            self._record(request, 200, fault=fault, malformed=kind, **info)
            return web.Response(body=MALFORMED_BODIES[kind], content_type="application/json")
        self._record(request, 0, fault=fault, **info)  # disconnect
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # nothing may be written to a dropped connection

    async def _models(self, request: web.Request) -> web.Response:
        self._record(request, 200, key=None, attempt=0, fault=None)
        return json_response(model_list(self.behaviour.models, self.model))

    async def _sim_requests(self, request: web.Request) -> web.Response:
        return json_response(self.requests())

    async def _sim_bodies(self, request: web.Request) -> web.Response:
        return json_response(self.bodies())

    async def _sim_stats(self, request: web.Request) -> web.Response:
        return json_response(self.stats())

    async def _sim_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return json_response({"ok": True})

    # ------------------------------------------------------------ lifecycle

    def _app(self) -> web.Application:
        restyle = gateway_middleware(self.behaviour.gateway)  # its rate headers (gateway.py)
        app = web.Application(client_max_size=512 * 1024**2, middlewares=[restyle])
        handlers = {CHAT: self._chat, MESSAGES: self._messages, RESPONSES: self._responses}
        for api, handler in handlers.items():
            for route in api.routes:
                app.router.add_post(route, handler)
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

