"""The offline model server: an OpenAI-compatible chat endpoint on loopback (a server, not a client).

``server.py`` is the aiohttp server (faults, latency, observability); ``wire.py`` parses and
validates requests and writes reply JSON; ``oracle.py`` holds the behaviour knobs and the
noisy oracle that answers from the datasets' references; ``judge.py`` and ``grounding.py``
are the responders of its judge and grounding modes.

Only the runner, ``groundscope score`` (``rescore.py``), the CLI and tests start it; no
core package (client, scoring, dataset, media, store, report, metrics, plan) imports it.
A scorer gets the URL of a simulator serving ``api_url: "mock"`` judges through
``ScoringContext.mock_url``.
"""

from groundscope.simulator.grounding import GroundingResponder, GroundTruth, sim_responders
from groundscope.simulator.judge import JudgeResponder
from groundscope.simulator.launch import serve_forever, start_judge_simulator, start_run_simulator
from groundscope.simulator.oracle import Oracle, OracleEntry, SimBehaviour
from groundscope.simulator.server import SimulatorServer
from groundscope.simulator.wire import Responder, SimReply, SimRequest

__all__ = [
    "GroundTruth", "GroundingResponder", "JudgeResponder", "Oracle", "OracleEntry", "Responder",
    "SimBehaviour", "SimReply", "SimRequest", "SimulatorServer", "serve_forever",
    "sim_responders", "start_judge_simulator", "start_run_simulator",
]
