"""Starting the offline server the ways groundscope does: in the foreground for
``groundscope simulate`` (``serve_forever``), in the running loop for an ``eval_type: mock``
run (``start_run_simulator``: the run's samples are its oracle), and judge-only for
``api_url: "mock"`` judges when no run simulator serves them (``start_judge_simulator``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from groundscope.simulator.grounding import sim_responders
from groundscope.simulator.oracle import Oracle, SimBehaviour
from groundscope.simulator.server import SimulatorServer
from groundscope.simulator.wire import Responder
from groundscope.types import Sample

if TYPE_CHECKING:
    from groundscope.config import SimulatorArgs

__all__ = ["serve_forever", "start_judge_simulator", "start_run_simulator"]

log = logging.getLogger("groundscope")


def serve_forever(
    host: str,
    port: int,
    samples: Iterable[Sample] | Oracle,
    behaviour: SimBehaviour | None = None,
    *,
    responders: Sequence[Responder] = (),
    on_ready: Callable[[str], object] | None = None,
) -> None:
    """Run the simulator in the foreground until interrupted (``groundscope simulate``).

    ``responders`` go before the oracle (e.g. the judge mode); ``on_ready(base_url)`` is
    called once it listens (default: print the URL).
    """

    async def main() -> None:
        # A standalone server keeps only the latest requests for /_sim/requests: a long
        # benchmark must not hold (and garbage-collect) every request it ever served.
        server = SimulatorServer(samples, behaviour, responders=responders, host=host, port=port,
                                 record_limit=1000)
        url = await server.astart()
        (on_ready or (lambda u: print(f"groundscope simulator listening on {u}", flush=True)))(url)
        try:
            await asyncio.Event().wait()
        finally:
            await server.astop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


async def start_judge_simulator(settings: SimulatorArgs | None) -> SimulatorServer:
    """A judge-only simulator, started in the running loop, for ``api_url: "mock"`` judges
    when no run simulator serves them (``groundscope score``): the judge and grounding
    responders of ``settings`` (judge noise, seed, ground-truth file) before an empty oracle.
    The caller hands ``server.base_url`` to ``ScoringContext.mock_url`` and stops it with
    ``astop()``."""
    server = SimulatorServer(responders=sim_responders(settings))
    url = await server.astart()
    log.info("judge api_url 'mock': offline judge simulator on %s", url)
    return server


async def start_run_simulator(settings: SimulatorArgs, samples: Iterable[Sample]) -> SimulatorServer:
    """The model simulator of an ``eval_type: mock`` run, started in the running loop: the
    run's ``samples`` are its oracle, ``settings`` its accuracy, latency, seed and limits,
    the judge and grounding responders before it. The caller stops it with ``astop()``."""
    behaviour = SimBehaviour(accuracy=settings.accuracy, latency_ms=settings.latency_ms,
                             seed=settings.seed, rpm=settings.rpm, tpm=settings.tpm,
                             max_in_flight=settings.max_in_flight)
    server = SimulatorServer(Oracle.from_samples(samples), behaviour,
                             responders=sim_responders(settings))
    url = await server.astart()
    log.info("offline model simulator listening on %s (accuracy %.2f)", url, settings.accuracy)
    return server
