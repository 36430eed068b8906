"""A loopback media host for the remote-audio tests: real audio and hostile variants.

Runs an aiohttp server on 127.0.0.1 in a background thread (its own loop), so both async
tests and ``groundscope`` subprocesses can fetch from it. Paths::

    /tone.wav        a real WAV (tests/media_fixtures.wav_bytes), Content-Type audio/wav
    /tone.mp3        the example MP3, served as text/plain (the bytes decide, not the header)
    /page.wav        an HTML page named .wav
    /image.wav       a PNG named .wav
    /sound.flac      FLAC bytes (audio, but not a chat-API format)
    /missing.wav     404
    /huge.wav        declares a Content-Length over the 64 MiB media cap, sends a WAV header
    /endless.wav     chunked: a WAV header, then zeros without end
    /bomb.wav        gzip-encoded: a WAV header and 65 MiB of zeros in ~65 KB
    /slow.wav        a WAV header, then nothing until the server stops
    /hop/N           a chain of N redirects ending at /tone.wav
    /to-ftp          a redirect to an ftp:// URL

``hits`` counts requests per path; ``headers`` keeps each request's headers.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections import Counter
from typing import Any

from aiohttp import web

from media_fixtures import FLAC_HEAD, image_bytes, mp3_bytes, wav_bytes

CAP = 64 * 1024 * 1024
WAV = wav_bytes()
_bomb: bytes | None = None


def bomb() -> bytes:
    """A WAV header and 65 MiB of zeros, gzip-compressed (made once, ~65 KB)."""
    global _bomb
    if _bomb is None:
        _bomb = gzip.compress(WAV[:44] + bytes(CAP + 1024 * 1024), compresslevel=9)
    return _bomb


class MediaHost:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> MediaHost:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the media host did not start")
        return self

    def __exit__(self, *_: Any) -> None:
        assert self._loop is not None and self._closing is not None
        self._loop.call_soon_threadsafe(self._closing.set)
        assert self._thread is not None
        self._thread.join(30)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_get("/hop/{n}", self._hop)
        app.router.add_get("/{name}", self._file)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = runner.addresses[0][1]
        self._ready.set()
        await self._closing.wait()
        await runner.cleanup()

    def _seen(self, request: web.Request) -> None:
        with self._lock:
            self.hits[request.path] += 1
            self.headers.append(dict(request.headers))

    async def _hop(self, request: web.Request) -> web.Response:
        self._seen(request)
        n = int(request.match_info["n"])
        raise web.HTTPFound("/tone.wav" if n <= 1 else f"/hop/{n - 1}")

    async def _file(self, request: web.Request) -> web.StreamResponse:
        self._seen(request)
        name = request.match_info["name"]
        fixed = {
            "tone.wav": (WAV, "audio/wav"), "tone.mp3": (mp3_bytes(), "text/plain"),
            "page.wav": (b"<html><body>Not found, but 200</body></html>\n" * 4, "text/html"),
            "image.wav": (image_bytes("PNG"), "audio/wav"),
            "sound.flac": (FLAC_HEAD + bytes(64), "audio/flac"),
        }
        if name in fixed:
            body, kind = fixed[name]
            return web.Response(body=body, content_type=kind)
        if name == "to-ftp":
            raise web.HTTPFound("ftp://127.0.0.1/tone.wav")
        if name == "bomb.wav":
            return web.Response(body=bomb(), headers={"Content-Encoding": "gzip",
                                                      "Content-Type": "audio/wav"})
        if name in ("huge.wav", "endless.wav", "slow.wav"):
            return await self._stream(request, name)
        raise web.HTTPNotFound(text="no such file")

    async def _stream(self, request: web.Request, name: str) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "audio/wav"})
        if name == "huge.wav":
            resp.content_length = CAP + 1
        else:
            resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(WAV[:44])
        assert self._closing is not None
        if name == "endless.wav":
            chunk = bytes(256 * 1024)
            try:
                while not self._closing.is_set():
                    await resp.write(chunk)
            except ConnectionError:  # the client hung up at its cap: the expected end
                return resp
        else:
            await self._closing.wait()  # nothing more until the server stops
        return resp
