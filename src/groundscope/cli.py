"""Command line: ``groundscope eval | score | report | simulate``.

Thin by design: argv -> config dict -> ``TaskConfig`` -> ``run_task``. User errors are one
line on stderr and exit code 2; a run stopped by its error budget exits 1; Ctrl-C exits
130 after saying how to resume. Heavy modules are imported only when a command runs, so
``groundscope --help`` stays fast.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Sequence
from typing import Any

_S = argparse.SUPPRESS


def parse_kv_or_json(text: str) -> dict[str, Any]:
    """``--generation-config`` value: a JSON object, or ``k=v,k2=v2`` (values as literals).

    >>> parse_kv_or_json('temperature=0.2,max_tokens=64,do_sample=true,stop=END')
    {'temperature': 0.2, 'max_tokens': 64, 'do_sample': True, 'stop': 'END'}
    """
    text = text.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise argparse.ArgumentTypeError(f"expected key=value or a JSON object, got {pair!r}")
        key, raw = (s.strip() for s in pair.split("=", 1))
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = {"true": True, "false": False}.get(raw.lower(), raw)
    return out


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _limit(text: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return int(value) if value.is_integer() and value >= 1 else value


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--config", metavar="FILE", help="YAML/JSON task config; flags given here override it")
    a("--model", default=_S, help="model name sent in each request")
    a("--model-id", default=_S, help="model name shown in reports (default: --model)")
    a("--api-url", default=_S, help="OpenAI-compatible base URL, e.g. http://host:8000/v1")
    a("--api-key", default=_S, help="API key, or $ENV_VAR to read it from the environment")
    a("--eval-type", default=_S, help="openai_api (a live endpoint) or mock (built-in offline model)")
    a("--datasets", nargs="+", default=_S, help="dataset names, e.g. general_vqa general_vmcq")
    a("--dataset-args", type=_json_object, default=_S, help="JSON: per-dataset arguments")
    a("--limit", type=_limit, default=_S, help="first N records per subset, or a fraction in (0,1)")
    a("--eval-batch-size", "--max-concurrency", dest="eval_batch_size", type=int, default=_S,
      help="requests in flight at once (default 8)")
    a("--generation-config", type=parse_kv_or_json, default=_S,
      help="JSON or k=v,... passed into each request (temperature defaults to 0)")
    a("--judge", type=_json_object, default=_S, help="JSON judge config (see README)")
    a("--judge-strategy", default=_S, help="EvalScope's older spelling of judge.strategy")
    a("--judge-model-args", type=_json_object, default=_S,
      help="EvalScope's older spelling of one judge model (JSON)")
    a("--stream", action="store_true", default=_S,
      help="accepted for EvalScope compatibility; requests are never streamed")
    a("--dry-run", action="store_true", help="print the resolved config (secrets hidden) and exit")
    a("--work-dir", default=_S, help="where run directories are created (default ./outputs)")
    a("--no-timestamp", action="store_true", default=_S, help="write into --work-dir itself")
    a("--use-cache", metavar="RUN_DIR", default=_S, help="resume a run directory")
    a("--repeats", type=int, default=_S, help="ask each sample this many times")
    a("--seed", type=int, default=_S, help="seed for shuffling and the bootstrap (default 42)")
    a("--ignore-errors", action="store_true", default=_S,
      help="record failed samples and go on (default: stop at the first failure)")
    a("--max-error-rate", type=float, default=_S, help="stop when this share of samples failed")
    a("--strict", action="store_true", default=_S, help="a bad record is fatal (default: skip it)")
    a("--debug", action="store_true", default=_S, help="debug logging")
    a("--timeout", type=float, default=_S, help="per-request timeout in seconds (default 300)")
    a("--max-retries", type=int, default=_S, help="retries on 429/5xx/timeouts (default 5)")
    a("--retry-base-delay", type=float, default=_S,
      help="seconds before the first retry, doubled each time, jittered (default 0.5)")
    a("--retry-max-delay", type=float, default=_S,
      help="cap on one retry delay, Retry-After included (default 30)")
    a("--max-image-pixels", type=int, default=_S,
      help="larger images are refused: a decompression-bomb guard (default: Pillow's, ~89.5M)")
    a("--max-record-bytes", type=int, default=_S,
      help="a dataset line / row longer than this is a bad record (default 64 MiB)")
    a("--judge-concurrency", type=int, default=_S, help="judge requests in flight at once")
    a("--sim-accuracy", type=float, default=_S, help="mock: share of correct answers (0.8)")
    a("--sim-latency-ms", type=float, default=_S, help="mock: latency per request (0)")
    a("--sim-judge-noise", type=float, default=_S,
      help="mock: share of flipped verdicts of 'mock' judge models (0)")
    a("--no-progress", action="store_true", help="plain log lines instead of a progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groundscope",
        description="Evaluate multimodal models served over OpenAI-compatible chat APIs.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_eval_flags(sub.add_parser("eval", help="run an evaluation"))
    score = sub.add_parser("score", help="re-score a run directory's saved predictions")
    score.add_argument("run_dir")
    score.add_argument("--judge", type=_json_object, default=None,
                       help="JSON judge config (its api_key is not saved in the run)")
    report = sub.add_parser("report", help="rebuild table, JSON and HTML from a run directory; "
                            "with several, compare them")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    report.add_argument("--out", metavar="FILE", default="comparison.html",
                        help="with several run directories: the comparison page (./comparison.html)")
    report.add_argument("--seed", type=int, default=0, help="seed of the paired permutation test")
    sim = sub.add_parser("simulate", help="serve the offline model simulator on loopback")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--datasets", nargs="+", required=True)
    sim.add_argument("--dataset-args", type=_json_object, default={})
    sim.add_argument("--accuracy", type=float, default=0.8)
    sim.add_argument("--latency-ms", type=float, default=0.0)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--judge-noise", type=float, default=0.0,
                     help="share of flipped verdicts when answering LLM-judge requests")
    sim.add_argument("--truth", metavar="FILE", default=None,
                     help="ground-truth file for the grounding judge steps and planted answers")
    for kind in ("429", "500", "timeout", "malformed", "disconnect"):
        sim.add_argument(f"--rate-{kind}", type=float, default=0.0,
                         help=f"share of requests answered with a {kind} fault")
    return parser


def eval_config(ns: argparse.Namespace) -> dict[str, Any]:
    """The config dict of ``groundscope eval``: config file first, flags over it."""
    data: dict[str, Any] = {}
    if ns.config:
        from pathlib import Path

        from groundscope.config import _read_config_file

        data = _read_config_file(Path(ns.config))
    skip = {"command", "config", "no_progress", "version", "sim_accuracy", "sim_latency_ms",
            "dry_run", "stream", "sim_judge_noise"}
    for key, value in vars(ns).items():
        if key not in skip:
            data[key] = value
    sim = dict(data.get("simulator") or {})
    if hasattr(ns, "sim_accuracy"):
        sim["accuracy"] = ns.sim_accuracy
    if hasattr(ns, "sim_latency_ms"):
        sim["latency_ms"] = ns.sim_latency_ms
    if hasattr(ns, "sim_judge_noise"):
        sim["judge_noise"] = ns.sim_judge_noise
    if sim:
        data["simulator"] = sim
    return data


def _cmd_eval(ns: argparse.Namespace) -> int:
    from groundscope.config import load_config
    from groundscope.report.table import render_summary
    from groundscope.runner import Runner
    from groundscope.terminal import visible

    cfg = load_config(eval_config(ns))
    if ns.dry_run:  # no run directory, no request: just what would run
        text = json.dumps(cfg.redacted(), indent=2, ensure_ascii=False)
        print("\n".join(map(visible, text.split("\n"))))  # JSON leaves bidi and C1 raw
        return 0
    runner = Runner(cfg, progress=False if ns.no_progress else None)
    import asyncio

    try:
        report = asyncio.run(runner.run())
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished samples are saved. Resume with: groundscope eval "
              f"... --use-cache {visible(runner.run_dir)}", file=sys.stderr)
        return 130
    print(report.table())
    print(render_summary(report.datasets))
    print(f"Results saved to {visible(report.run_dir)}")
    return 0


def _cmd_score(ns: argparse.Namespace) -> int:
    from groundscope.report.table import render_summary
    from groundscope.rescore import rescore_run

    report = rescore_run(ns.run_dir, judge=ns.judge)
    print(report.table())
    print(render_summary(report.datasets))
    return 0


def _cmd_report(ns: argparse.Namespace) -> int:
    if len(ns.run_dirs) > 1:  # compare: the runs are read, never rewritten
        from groundscope.report.compare import compare_runs, render_comparison
        from groundscope.report.compare_html import write_comparison
        from groundscope.terminal import visible

        comparison = compare_runs(ns.run_dirs, seed=ns.seed)
        print(render_comparison(comparison))
        print(f"Comparison page: {visible(write_comparison(comparison, ns.out))}")
        return 0
    from pathlib import Path

    from groundscope.rescore import rebuild_report
    from groundscope.terminal import visible

    report = rebuild_report(ns.run_dirs[0])
    print(report.table())
    if (Path(report.run_dir) / "report.html").exists():
        print(f"HTML report: {visible(Path(report.run_dir) / 'report.html')}")
    return 0


def _cmd_simulate(ns: argparse.Namespace) -> int:
    from groundscope.client.sim_grounding import sim_responders
    from groundscope.client.simulator import Oracle, SimBehaviour, serve_forever
    from groundscope.config import SimulatorArgs, load_config
    from groundscope.errors import RecordError
    from groundscope.runner import iter_samples, plan_dataset

    args = {name: {k: v for k, v in a.items() if k != "metric_list"} if isinstance(a, dict) else a
            for name, a in ns.dataset_args.items()}  # the samples matter here, not the metrics
    cfg = load_config({"datasets": ns.datasets, "dataset_args": args, "eval_type": "mock"})
    samples = [s for name in cfg.datasets
               for _, s in iter_samples(cfg, plan_dataset(cfg, name), strict=False)
               if not isinstance(s, RecordError)]
    behaviour = SimBehaviour(accuracy=ns.accuracy, latency_ms=ns.latency_ms, seed=ns.seed,
                             rate_429=ns.rate_429, rate_500=ns.rate_500,
                             rate_timeout=ns.rate_timeout, rate_malformed=ns.rate_malformed,
                             rate_disconnect=ns.rate_disconnect)
    print(f"simulating on http://{ns.host}:{ns.port}/v1 with {len(samples)} known samples",
          file=sys.stderr, flush=True)
    sim = SimulatorArgs(judge_noise=ns.judge_noise, seed=ns.seed, truth=ns.truth)
    serve_forever(ns.host, ns.port, Oracle.from_samples(samples), behaviour,
                  responders=sim_responders(sim))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.version:
        from importlib.metadata import version

        print(f"groundscope {version('groundscope')}")
        return 0
    commands = {"eval": _cmd_eval, "score": _cmd_score, "report": _cmd_report,
                "simulate": _cmd_simulate}
    if ns.command not in commands:
        parser.print_help()
        return 2
    from groundscope.errors import ErrorBudgetExceeded, GroundscopeError
    from groundscope.terminal import visible  # messages quote dataset and endpoint text

    try:
        return commands[ns.command](ns)
    except ErrorBudgetExceeded as exc:
        print(f"groundscope: {visible(exc)}", file=sys.stderr)
        return 1
    except GroundscopeError as exc:
        print(f"groundscope: error: {visible(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """The ``groundscope`` command: :func:`main`, then a quick exit. Everything is written
    and closed by then; freezing the heap spares the interpreter's final garbage collection
    (~50 ms after a run), while exit handlers still run."""
    code = main()
    import gc

    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())
