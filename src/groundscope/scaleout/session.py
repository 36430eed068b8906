"""The Ray session of a run, with Ray's side effects tamed: no dashboard, no usage stats,
quiet logs (workers' output is not forwarded; the ``ray`` logger at WARNING), and a local
Ray's temp dir (its logs and Unix sockets) inside the run's work area.

A session that is already up in this process (a notebook, the tests) is used as it is;
``address`` joins an existing cluster (``ray start --head``, KubeRay); otherwise a local Ray
is started for the run and shut down after it.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from groundscope.errors import ConfigError

log = logging.getLogger("groundscope")

NAMESPACE = "groundscope"
# Ray puts Unix sockets at <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store: about
# 64 characters after the temp dir, within the ~107 a socket path may have.
MAX_TEMP_DIR_CHARS = 40


@dataclass
class Session:
    """A Ray session in use by a run; ``started`` when this run started it (and stops it)."""

    started: bool
    temp_dir: str | None = None
    scratch: bool = False  # the temp dir is a short one made for this run (removed after)

    def stop(self) -> None:
        import ray

        if self.started:
            ray.shutdown()
        if self.scratch and self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def temp_dir_for(work_dir: str | os.PathLike[str]) -> tuple[str, bool]:
    """``(<work_dir>/.ray, False)``, or a short fresh dir under the system temp dir
    (``(path, True)``) when that path is too long for Ray's Unix sockets.

    >>> temp_dir_for("/w")[0]
    '/w/.ray'
    """
    wanted = os.path.join(os.path.abspath(work_dir), ".ray")
    if len(wanted) <= MAX_TEMP_DIR_CHARS:
        return wanted, False
    return tempfile.mkdtemp(prefix="gs-ray-"), True


def start_session(address: str | None, work_dir: str | os.PathLike[str]) -> Session:
    """Join or start Ray for a run (see the module docstring)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # read when Ray starts its head
    import ray

    if ray.is_initialized():
        return Session(started=False)
    quiet = {"include_dashboard": False, "log_to_driver": False,
             "logging_level": logging.WARNING, "namespace": NAMESPACE}
    if address:
        try:
            ray.init(address=address, **quiet)
        except (ValueError, ConnectionError, RuntimeError) as exc:  # Ray's words, one line
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise ConfigError(f"ray_address: cannot join a Ray cluster at {address!r}: "
                              f"{reason}") from None
        return Session(started=True)
    temp, scratch = temp_dir_for(work_dir)
    Path(temp).mkdir(parents=True, exist_ok=True)
    if scratch:
        log.info("Ray's temp dir: %s (the work dir's path is too long for Ray's sockets)", temp)
    ray.init(_temp_dir=temp, **quiet)
    return Session(started=True, temp_dir=temp, scratch=scratch)
