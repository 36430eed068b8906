"""Shared helpers of the Ray tests: one local Ray for the whole test session (starting Ray
takes ~10 s here), a simulator that holds requests until told, and the run's Ray actors."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from groundscope.simulator import SimulatorServer

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def start_local_ray(temp_dir: str) -> Iterator[str]:
    """A 2-CPU local Ray, quiet; yields its GCS address (for a subprocess driver)."""
    os.environ.update(RAY_ENV)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir,
             namespace="groundscope-tests")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def wait_until(what: str, ok: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_actors(kind: str) -> dict[str, Any]:
    """The live actors of the current groundscope Ray run: ``kind`` is 'worker' or 'gate';
    name -> handle."""
    import ray
    from ray.util import list_named_actors

    out = {}
    for entry in list_named_actors(all_namespaces=True):
        name = entry["name"]
        if name.startswith("groundscope-") and f"-{kind}-" in name:
            with contextlib.suppress(ValueError):  # gone meanwhile
                out[name] = ray.get_actor(name, namespace=entry["namespace"])
    return out


def actor_pid(actor: Any) -> int:
    """The process id of a live actor."""
    import ray

    return int(ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()), timeout=60))


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie awaiting its parent counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return "\nState:\tZ" in status


class HoldingSimulator(SimulatorServer):
    """Answers the first ``open_for`` chat requests, then holds every later one until
    :meth:`open` (or the server stops). Records a hash of each request body as it arrives
    (``arrivals``), what is held now (``held``) and everything it has held (``ever_held``)."""

    def __init__(self, *args: Any, open_for: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_for = open_for
        self.arrivals: list[str] = []
        self.held: list[str] = []
        self.ever_held: list[str] = []
        self._mutex = threading.Lock()
        self._gate: asyncio.Event | None = None
        self._serving: asyncio.AbstractEventLoop

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        digest = hashlib.sha256(await request.read()).hexdigest()
        if self._gate is None:
            self._gate = asyncio.Event()
            self._serving = asyncio.get_running_loop()  # also when started with astart()
        with self._mutex:
            self.arrivals.append(digest)
            hold = len(self.arrivals) > self.open_for and not self._gate.is_set()
            if hold:
                self.held.append(digest)
                self.ever_held.append(digest)
        if hold:
            assert self._closing is not None
            closing = asyncio.ensure_future(self._closing.wait())
            opened = asyncio.ensure_future(self._gate.wait())
            await asyncio.wait({closing, opened}, return_when=asyncio.FIRST_COMPLETED)
            closing.cancel()
            opened.cancel()
            with self._mutex:
                self.held.remove(digest)
            if self._closing.is_set():
                return web.Response(status=503)
        return await super()._chat(request)

    def open(self) -> None:
        """Answer the held requests and every later one."""
        def release() -> None:
            if self._gate is None:
                self._gate = asyncio.Event()
            self._gate.set()

        self._serving.call_soon_threadsafe(release)

    def held_now(self) -> list[str]:
        with self._mutex:
            return list(self.held)
