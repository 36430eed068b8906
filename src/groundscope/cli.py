"""Command line: ``groundscope eval | score | report | merge | simulate``.

Thin by design: argv -> config dict -> ``TaskConfig`` -> ``run_task``. User errors are one
line on stderr and exit code 2; a run stopped by its error budget, or one in which a
dataset had no answered sample (every record bad, every request failed), exits 1 with one
line saying so; Ctrl-C exits 130 after saying how to resume. Heavy modules are imported
only when a command runs, so ``groundscope --help`` stays fast.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from groundscope.cliargs import build_parser, eval_config, resume_command

if TYPE_CHECKING:
    from groundscope.report.model import Report
    from groundscope.simulator import SimBehaviour


def _cmd_eval(ns: argparse.Namespace) -> int:
    from groundscope.config import load_config
    from groundscope.errors import ConfigError
    from groundscope.report.table import render_summary
    from groundscope.runner import Runner
    from groundscope.terminal import visible

    if ns.json and not ns.dry_run:
        raise ConfigError("--json: only with --dry-run")
    from groundscope.keys import unset_keys_listed

    with unset_keys_listed() as unset:  # every unset $NAME at once, not the first of them
        cfg = load_config(eval_config(ns))
    missing = ", ".join(unset)
    if ns.dry_run:  # no run directory, no request: what would run, and what it would cost
        from groundscope.estimate import dry_run_text

        print(dry_run_text(cfg, as_json=ns.json))
        if unset:
            print(f"groundscope: note: not set here (a run needs them): {missing}", file=sys.stderr)
        return 0
    if unset:
        raise ConfigError(f"api_key: environment variable {missing} is not set" if len(unset) == 1
                          else f"api_key: environment variables {missing} are not set")
    key_source = "--api-key" if hasattr(ns, "api_key") else (
        f"api_key in {ns.config}" if ns.config else None)
    runner = Runner(cfg, progress=False if ns.no_progress else None, key_source=key_source)
    import asyncio

    from groundscope.errors import NothingEvaluated
    from groundscope.report.model import Report

    try:
        report = asyncio.run(runner.run())
    except KeyboardInterrupt:
        from groundscope.redaction import Redactor

        command = resume_command(ns.argv, str(runner.run_dir), Redactor(cfg.secrets()).redact)
        print(f"\ninterrupted; finished samples are saved. Resume with:\n  {visible(command)}",
              file=sys.stderr)
        return 130
    except NothingEvaluated as exc:  # the other datasets' results, then the one line (exit 1)
        done = exc.report
        if isinstance(done, Report) and any(rep.metrics for rep in done.datasets):
            print(done.table())
            print(render_summary(done.datasets))
        raise
    print(report.table())
    print(render_summary(report.datasets))
    for line in runner.skipped_notes:  # bad records: said at the end, not only mid-log
        print(f"groundscope: warning: {visible(line)}", file=sys.stderr)
    print(f"Results saved to {visible(report.run_dir)}")
    return 0


def _cmd_score(ns: argparse.Namespace) -> int:
    from groundscope.report.table import render_summary
    from groundscope.rescore import rescore_run

    if ns.media_roots:
        from groundscope.media import set_media_roots

        set_media_roots(ns.media_roots)
    report = rescore_run(ns.run_dir, judge=ns.judge, key_env=ns.judge_key_env)
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

    if ns.media_roots:
        from groundscope.media import set_media_roots

        set_media_roots(ns.media_roots)
    report = rebuild_report(ns.run_dirs[0])
    print(report.table())
    _print_warnings(report)
    if report.page is None:  # the JSON reports are written; the error line said why not
        return 1
    print(f"HTML report: {visible(Path(report.page))}")
    return 0


def _cmd_merge(ns: argparse.Namespace) -> int:
    from groundscope.merge import merge_runs
    from groundscope.report.table import render_summary
    from groundscope.terminal import visible

    report = merge_runs(ns.run_dirs, ns.work_dir, partial=ns.partial)
    print(report.table())
    print(render_summary(report.datasets))
    _print_warnings(report)  # a partial merge says so here, not only in the reports
    print(f"Merged {len(ns.run_dirs)} shards into {visible(report.run_dir)}")
    return 0


def _print_warnings(report: Report) -> None:
    """Each summary warning of the report's datasets, one line each on stderr."""
    from groundscope.terminal import visible  # (a warning may quote a dataset's file name)

    for line in (w for d in report.datasets for w in d.summary.warnings):
        print(f"groundscope: warning: {visible(line)}", file=sys.stderr)


def _sim_behaviour(ns: argparse.Namespace) -> SimBehaviour:
    from groundscope.simulator import SimBehaviour

    return SimBehaviour(accuracy=ns.accuracy, latency_ms=ns.latency_ms, seed=ns.seed,
                        rate_429=ns.rate_429, rate_500=ns.rate_500,
                        rate_timeout=ns.rate_timeout, rate_malformed=ns.rate_malformed,
                        rate_disconnect=ns.rate_disconnect, malformed_body=ns.malformed_body,
                        reply_bytes=ns.reply_bytes, reply_gzip=ns.reply_gzip,
                        reply_chunked=ns.reply_chunked, declared_length=ns.declared_length,
                        header_bytes=ns.header_bytes, redirect_to=ns.redirect_to,
                        echo_key=ns.echo_key, rpm=ns.rpm, tpm=ns.tpm,
                        max_in_flight=ns.max_in_flight, gateway=ns.gateway, models=ns.models)


def _cmd_simulate(ns: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from groundscope.config import SimulatorArgs, format_validation_error, load_config
    from groundscope.errors import ConfigError, RecordError
    from groundscope.plan import iter_samples, plan_dataset
    from groundscope.simulator import Oracle, serve_forever, sim_responders

    try:
        behaviour = _sim_behaviour(ns)
        sim = SimulatorArgs(judge_noise=ns.judge_noise, seed=ns.seed, truth=ns.truth)
    except ValidationError as err:  # before ValueError, its base: one line naming the field
        raise ConfigError(f"simulate: {format_validation_error(err)}") from None
    except ValueError as exc:
        raise ConfigError(f"simulate: {exc}") from None
    args = {name: {k: v for k, v in a.items() if k != "metric_list"} if isinstance(a, dict) else a
            for name, a in ns.dataset_args.items()}  # the samples matter here, not the metrics
    cfg = load_config({"datasets": ns.datasets, "dataset_args": args, "eval_type": "mock"})
    samples = [s for name in cfg.datasets
               for _, s in iter_samples(cfg, plan_dataset(cfg, name), strict=False)
               if not isinstance(s, RecordError)]
    print(f"simulating on http://{ns.host}:{ns.port}/v1 with {len(samples)} known samples",
          file=sys.stderr, flush=True)
    serve_forever(ns.host, ns.port, Oracle.from_samples(samples), behaviour,
                  responders=sim_responders(sim))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    ns = parser.parse_args(argv)
    ns.argv = argv  # (an interrupted eval prints the command that resumes it)
    if ns.version:
        from importlib.metadata import version

        print(f"groundscope {version('groundscope')}")
        return 0
    commands = {"eval": _cmd_eval, "score": _cmd_score, "report": _cmd_report,
                "merge": _cmd_merge, "simulate": _cmd_simulate}
    if ns.command not in commands:
        parser.print_help()
        return 2
    from groundscope.errors import ErrorBudgetExceeded, GroundscopeError, NothingEvaluated
    from groundscope.terminal import visible  # messages quote dataset and endpoint text

    try:
        return commands[ns.command](ns)
    except (ErrorBudgetExceeded, NothingEvaluated) as exc:  # the run ran: its outputs say why
        print(f"groundscope: {visible(exc)}", file=sys.stderr)
        return 1
    except GroundscopeError as exc:
        print(f"groundscope: error: {visible(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """The ``groundscope`` command (``pyproject.toml``'s script): :func:`main` on ``sys.argv``."""
    code = main()
    # The command is done (its files closed and flushed): the interpreter's exit need not
    # collect the whole heap of a run first. 0.10 s -> 0.03 s after a 2,000-sample run
    # (200 ms latency, concurrency 128, ~130 MB RSS) on this project's 2-core machine.
    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())
