"""The keys of a run, handed to the workers of a local Ray without passing through Ray.

A local Ray that groundscope starts for a run is started with the run's key variables taken
out of the environment (``session.start_session``), so none of Ray's processes (its GCS,
raylet, dashboard and runtime-env agents, workers) holds a key in its environment. The
driver then serves the values once per worker on a loopback socket (:class:`KeyHandoff`):
a worker connects, sends the one-time token it was given, and reads the ``{NAME: value}``
of the ``$NAME`` references in its config (:func:`fetch_keys`). Only the token crosses
Ray's object store, and it is worthless once the workers have started (the socket closes).
A cluster joined with ``--ray-address`` is not this: its workers read ``$NAME`` from their
node's environment (``shipping.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
from collections.abc import Mapping

import orjson
from pydantic import SecretStr

from groundscope.config import TaskConfig
from groundscope.keys import secret_fields

HOST = "127.0.0.1"
TOKEN_BYTES = 32
TIMEOUT_S = 10.0
MAX_REPLY = 1 << 20


def key_values(cfg: TaskConfig) -> dict[str, str]:
    """``{NAME: value}`` of every key ``cfg`` read from ``$NAME`` / ``${NAME}``."""
    out = {}
    for _, value in secret_fields(cfg):
        ref = getattr(value, "ref", None)
        if isinstance(value, SecretStr) and ref:
            out[ref.strip().lstrip("$").strip("{}")] = value.get_secret_value()
    return out


class KeyHandoff:
    """The driver's side: ``values`` served to whoever sends the token, until :meth:`close`."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._reply = orjson.dumps(dict(values))
        self.token = secrets.token_hex(TOKEN_BYTES)
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] = (HOST, 0)

    async def open(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, HOST, 0)
        self.address = self._server.sockets[0].getsockname()[:2]
        return self.address

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.TimeoutError, ValueError):
            line = await asyncio.wait_for(reader.readline(), TIMEOUT_S)
            if hmac.compare_digest(line.strip(), self.token.encode()):
                writer.write(self._reply)
                await writer.drain()
        writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def fetch_keys(address: tuple[str, int], token: str) -> dict[str, str]:
    """The worker's side: the values the driver serves for ``token`` (empty if refused)."""
    with socket.create_connection(tuple(address), timeout=TIMEOUT_S) as sock:
        sock.sendall(token.encode() + b"\n")
        data = b""
        while len(data) <= MAX_REPLY:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    values = orjson.loads(data) if data else {}
    return {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else {}
