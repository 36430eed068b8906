"""The Python API: ``run_task``, at ``groundscope.run``, the import path of EvalScope's
examples (``from groundscope.run import run_task``), and at ``groundscope.run_task``.

It runs one evaluation (``runner.Runner``) and returns a mapping from dataset name to that
dataset's report, as EvalScope's ``run_task`` returns, after logging the results table as
EvalScope logs it (the ``groundscope`` logger: stderr and the run's ``logs/eval_log.log``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from groundscope import logs
from groundscope.config import load_config
from groundscope.errors import ConfigError, NothingEvaluated
from groundscope.report.model import Report
from groundscope.report.table import render_summary
from groundscope.runner import Runner

__all__ = ["log_results", "run_task"]

log = logging.getLogger("groundscope")


def log_results(report: Report) -> None:
    """The end of a run in the log (stderr and the run's log file), as EvalScope logs it:
    the results table, each dataset's summary line, the run directory."""
    if any(rep.metrics for rep in report.datasets):
        log.info("report table:\n%s", report.table())
    for line in render_summary(report.datasets).splitlines():
        log.info("%s", line)
    log.info("Output directory: %s", report.run_dir)


def run_task(task_cfg: Any = None, **kwargs: Any) -> Report:
    """Run one evaluation and return its report: a mapping from dataset name to that
    dataset's report, as EvalScope's ``run_task`` returns. The results table is logged
    (stderr and the run's log file), as EvalScope logs it.

    ``task_cfg`` is a ``TaskConfig``, a dict of its fields, or the path of a YAML/JSON
    config file; keyword arguments are accepted as fields too. Raises ``ConfigError`` /
    ``DatasetError`` for bad input, ``ErrorBudgetExceeded`` when the run stopped early,
    ``NothingEvaluated`` when a dataset had no answered sample (its ``report`` holds the
    rest).
    """
    if task_cfg is None:
        task_cfg = kwargs
    elif kwargs:
        raise ConfigError("pass either a config or keyword fields, not both")
    cfg = load_config(task_cfg)
    runner = Runner(cfg)
    try:
        try:
            report = asyncio.run(runner.run())
        except NothingEvaluated as exc:
            if isinstance(exc.report, Report):
                log_results(exc.report)
            log.error("%s", exc)
            raise
        log_results(report)
    finally:
        logs.close()
    return report
