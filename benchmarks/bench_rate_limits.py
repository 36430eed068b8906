"""A provider's rate limits against the client's gate: throughput and 429s.

Run by hand (not part of the test suite)::

    python benchmarks/bench_rate_limits.py                 # both parts, realistic settings
    python benchmarks/bench_rate_limits.py --part rpm --rpm 600 --seconds 60
    python benchmarks/bench_rate_limits.py --part inflight --max-in-flight 8 --seconds 30
    python benchmarks/bench_rate_limits.py --part rpm --no-client-limit --seconds 180
                                                           # headers only (N > the first minute's)
    python benchmarks/bench_rate_limits.py --part gateways --rpm 120 --seconds 30
                                                           # each gateway style (simulator/gateway.py)
    python benchmarks/bench_rate_limits.py --part gateways --styles hintless --rpm 120 --seconds 30

The simulator (in this process, its own thread and loop) answers with ``--latency-ms`` and
limits requests to ``--rpm`` a minute (part ``rpm``) or ``--max-in-flight`` at once (part
``inflight``), answering 429 with OpenAI's headers over the limit. The evaluation
(``run_task``: load, request, score, store) runs with ``eval_batch_size`` 8x what the limit
sustains; in part ``rpm`` the client is told ``rpm`` (unless ``--no-client-limit``), in
part ``inflight`` it is told nothing and learns the limit from the 429s. Targets: every
sample finishes, throughput >= 90% of the limit, 429s <= 5% of the requests.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from typing import Any

from _common import make_vqa_dataset
from groundscope import run_task
from groundscope import runner as runner_module
from groundscope.client.chat import ChatClient
from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.plan import iter_samples, plan_dataset
from groundscope.simulator import Oracle, SimBehaviour, SimulatorServer
from groundscope.simulator.gateway import GATEWAY_STYLES

PHASE: dict[str, float] = {}
DONE: list[float] = []  # when each model request was answered


def _timed_phase() -> None:
    """Time the streaming phase alone (load, request, score, store), not imports or reports."""
    evaluate = runner_module.Runner._evaluate

    async def timed(self: Any, client: Any) -> None:
        PHASE["start"] = time.perf_counter()
        await evaluate(self, client)
        PHASE["end"] = time.perf_counter()

    runner_module.Runner._evaluate = timed  # type: ignore[method-assign]
    complete = ChatClient.complete

    async def answered(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = await complete(self, *args, **kwargs)
        DONE.append(time.perf_counter())
        return reply

    ChatClient.complete = answered  # type: ignore[method-assign]


def _oracle(args: dict[str, Any]) -> Oracle:
    cfg = load_config({"datasets": ["general_vqa"], "dataset_args": args, "eval_type": "mock"})
    return Oracle.from_samples(s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vqa"),
                                                          strict=False)
                               if not isinstance(s, RecordError))


def run(n: int, behaviour: SimBehaviour, concurrency: int, client: dict[str, Any]) -> dict[str, Any]:
    DONE.clear()
    data = make_vqa_dataset(n, image_kb=20, distinct=min(n, 50))
    args = {"general_vqa": {"local_path": str(data), "subset_list": ["bench"]}}
    server = SimulatorServer(_oracle(args), behaviour, record_limit=1000)
    url = server.start()
    try:
        with tempfile.TemporaryDirectory() as work:
            report = run_task({"model": "groundscope-sim", "api_url": url, "datasets": ["general_vqa"],
                               "dataset_args": args, "eval_batch_size": concurrency,
                               "work_dir": work, "max_retries": 20, **client})
    finally:
        server.stop()
    stats = server.stats()
    summary = report.datasets[0].summary
    return {"n": n, "succeeded": summary.succeeded, "seconds": PHASE["end"] - PHASE["start"],
            "requests": stats["requests"], "r429": stats["by_status"].get("429", 0),
            "peak": stats["peak_in_flight"], "gate": summary.rate_limits.get("model", {}),
            "steady": _steady(sorted(DONE)), "done": sorted(DONE)}


def _steady(done: list[float]) -> float:
    """Answers a second over the last half of the run (past any first burst)."""
    half = done[len(done) // 2:]
    return (len(half) - 1) / (half[-1] - half[0]) if len(half) > 2 else 0.0


def show(title: str, r: dict[str, Any], limit_per_s: float, target: float = 0.9) -> None:
    rate = r["succeeded"] / r["seconds"]
    share = r["r429"] / max(1, r["requests"])
    ok = r["succeeded"] == r["n"] and rate >= target * limit_per_s and share <= 0.05
    print(f"\n{title}")
    print(f"  samples {r['succeeded']}/{r['n']} in {r['seconds']:.1f} s; throughput "
          f"{rate * 60:.0f}/min = {rate / limit_per_s:.1%} of the limit ({limit_per_s * 60:.0f}/min); "
          f"last half of the answers {r['steady'] * 60:.0f}/min = {r['steady'] / limit_per_s:.1%}")
    print(f"  requests {r['requests']}, 429s {r['r429']} = {share:.2%}; peak in flight at the "
          f"server {r['peak']}; client gate {r['gate']}")
    print(f"  targets (all finish, >= {target:.0%} of the limit, <= 5% 429s): "
          f"{'MET' if ok else 'MISSED'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=["rpm", "inflight", "both", "gateways"], default="both")
    p.add_argument("--gateway", choices=GATEWAY_STYLES, default="openai",
                   help="how the simulator passes its rate headers on (simulator/gateway.py)")
    p.add_argument("--styles", nargs="+", choices=GATEWAY_STYLES, default=list(GATEWAY_STYLES),
                   help="part gateways: the styles to run (default: all)")
    p.add_argument("--rpm", type=int, default=600)
    p.add_argument("--max-in-flight", type=int, default=8)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=60.0, help="run length the sample count aims at")
    p.add_argument("--no-client-limit", action="store_true",
                   help="part rpm: the client is not told rpm (only the 429s and headers)")
    ns = p.parse_args()
    _timed_phase()
    latency = ns.latency_ms / 1000.0
    if ns.part == "gateways":
        gateways(ns, latency)
        return
    if ns.part in ("rpm", "both"):
        per_s = ns.rpm / 60.0
        conc = 8 * max(1, math.ceil(per_s * latency))
        n = int(per_s * ns.seconds)
        client = {} if ns.no_client_limit else {"rpm": ns.rpm}
        r = run(n, SimBehaviour(accuracy=0.8, latency_ms=ns.latency_ms, rpm=ns.rpm,
                                      gateway=ns.gateway), conc, client)
        told = "not told the limit" if ns.no_client_limit else f"--rpm {ns.rpm}"
        show(f"rpm: simulator {ns.rpm}/min, latency {ns.latency_ms:g} ms, concurrency {conc} "
             f"(8x the {conc // 8} in flight the limit needs), client {told}, N={n}", r, per_s)
    if ns.part in ("inflight", "both"):
        m = ns.max_in_flight
        per_s = m / latency
        n = int(per_s * ns.seconds)
        r = run(n, SimBehaviour(accuracy=0.8, latency_ms=ns.latency_ms, max_in_flight=m,
                                      gateway=ns.gateway), 8 * m, {})
        show(f"in flight: simulator max {m} in flight, latency {ns.latency_ms:g} ms, concurrency "
             f"{8 * m}, client not told the limit, N={n}", r, per_s)
        r = run(n, SimBehaviour(accuracy=0.8, latency_ms=ns.latency_ms), m, {})
        show(f"control: no limit at the simulator, concurrency {m} (the harness's own ceiling "
             f"at {m} in flight), N={n}", r, per_s)


def gateways(ns: argparse.Namespace, latency: float) -> None:
    """Each gateway style: an rpm limit the client is told (target 90%) and one it learns
    (70%), then an in-flight limit it learns (70%)."""
    per_s = ns.rpm / 60.0
    conc = 8 * max(1, math.ceil(per_s * latency))
    n = int(per_s * ns.seconds)
    m = ns.max_in_flight
    for style in ns.styles:
        behaviour = SimBehaviour(accuracy=0.8, latency_ms=ns.latency_ms, rpm=ns.rpm, gateway=style)
        show(f"gateway {style}: rpm {ns.rpm}/min, client told --rpm, N={n}",
             run(n, behaviour, conc, {"rpm": ns.rpm}), per_s)
        # not told: the simulator's bucket starts with a minute's worth, so only the requests
        # past that first burst meet the limit; their rate is the learned one
        r = run(ns.rpm + n, behaviour, conc, {})
        past = r["done"][ns.rpm:]
        learned = (len(past) - 1) / (past[-1] - past[0]) if len(past) > 2 else 0.0
        share = r["r429"] / max(1, r["requests"])
        ok = r["succeeded"] == r["n"] and learned >= 0.7 * per_s and share <= 0.05
        print(f"\ngateway {style}: rpm {ns.rpm}/min, client not told, N={r['n']} ({ns.rpm} in "
              f"the first minute's burst)\n  past the burst {learned * 60:.0f}/min = "
              f"{learned / per_s:.1%} of the limit; requests {r['requests']}, 429s {r['r429']} = "
              f"{share:.2%}; client gate {r['gate']}\n  targets (all finish, >= 70% of the "
              f"limit, <= 5% 429s): {'MET' if ok else 'MISSED'}")
        behaviour = SimBehaviour(accuracy=0.8, latency_ms=ns.latency_ms, max_in_flight=m,
                                 gateway=style)
        k = int(m / latency * ns.seconds)
        show(f"gateway {style}: max {m} in flight, client not told, N={k}",
             run(k, behaviour, 8 * m, {}), m / latency, 0.7)


if __name__ == "__main__":
    main()
