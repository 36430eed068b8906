"""Shared helpers of the tests of the Anthropic Messages and OpenAI Responses APIs: a loopback
server that answers from a script and records what it received, and canned replies."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Loopback:
    """A loopback server answering each POST with ``handler``; its base URL (``/v1``) is
    what ``async with`` (or ``with``: its own loop in a thread) gives."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.runner: web.AppRunner | None = None

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.handler)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    def __enter__(self) -> str:
        """The same server from synchronous code (e.g. around ``run_task``): its own loop in
        a background thread."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.__aenter__(), self._loop).result(30)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.__aexit__(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


class Scripted(Loopback):
    """A loopback server answering each POST with the next (status, body, headers) of a
    script, recording what it received."""

    def __init__(self, script: list[tuple[int, Any, dict[str, str]]]) -> None:
        super().__init__(self.handle)
        self.script = script
        self.seen: list[tuple[str, dict[str, str], Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.headers), await request.json()))
        status, body, headers = self.script[min(len(self.seen), len(self.script)) - 1]
        return web.json_response(body, status=status, headers=headers)


MESSAGE_OK = {"id": "msg", "type": "message", "role": "assistant", "model": "claude-x",
              "content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn",
              "usage": {"input_tokens": 5, "output_tokens": 1}}


def anthropic_error(kind: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": f"{kind} (scripted)"}}



RESPONSE_OK = {"id": "resp", "object": "response", "created_at": 0, "status": "completed",
               "model": "gpt-x", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
               "output": [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": "fine", "annotations": []}]}],
               "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}
