"""The Ray session of a run, with Ray's side effects tamed: no dashboard, no usage stats,
quiet logs (workers' output is not forwarded; the ``ray`` logger at WARNING), and a local
Ray's temp dir (its logs and Unix sockets) inside the run's work area.

A session that is already up in this process (a notebook, the tests) is used as it is;
``address`` joins an existing cluster (``ray start --head``, KubeRay); otherwise a local Ray
is started for the run and shut down after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from groundscope.errors import ConfigError

log = logging.getLogger("groundscope")

NAMESPACE = "groundscope"
# Ray puts Unix sockets at <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store: about
# 64 characters after the temp dir, within the ~107 a socket path may have.
MAX_TEMP_DIR_CHARS = 40
PROBE_S = 2.0  # the reachability check of a Ray address: a TCP connect and an HTTP/2 greeting
# a client's HTTP/2 connection preface; a gRPC server (Ray's GCS) answers with a SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4


def check_address(address: str | None) -> None:
    """A ``ConfigError`` (one line naming the address) unless ``address`` is ``auto``,
    ``local`` or ``[ray://]HOST:PORT`` where a Ray head answers within :data:`PROBE_S`
    seconds: a TCP connect, then the HTTP/2 greeting its gRPC server gives. Done before the
    run directory exists, since Ray itself retries an unreachable address for minutes.
    ``auto`` is the cluster Ray finds on this machine (``RAY_ADDRESS``, ``ray start``'s
    record, a running GCS). No greeting is asked of a TLS cluster (``RAY_USE_TLS``).

    >>> check_address("local")
    """
    if not address or address == "local":
        return
    where = f"ray_address: cannot join a Ray cluster at {address!r}"
    if address == "auto":
        from ray._private.services import canonicalize_bootstrap_address

        try:
            address = canonicalize_bootstrap_address(address) or ""
        except (ValueError, ConnectionError) as exc:  # Ray's words, one line
            raise ConfigError(f"{where}: {' '.join(str(exc).split())[:300]}") from None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if ("://" in host or not host or not port.isascii() or not port.isdigit()
            or not 0 < int(port) < 65536):
        raise ConfigError(f"{where}: give HOST:PORT (the head's GCS port, 6379 by default), "
                          "auto, or ray://HOST:PORT (Ray Client)")
    deadline = time.monotonic() + PROBE_S
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:
                more = sock.recv(9 - len(head))
                if not more:
                    break
                head += more
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{where}: nothing answers there ({reason}; {PROBE_S:g} s allowed)"
                          ) from None
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        raise ConfigError(f"{where}: something answers there, but not a Ray head (its GCS port, "
                          "6379 by default)")


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


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null meanwhile (Python's and C++'s writes alike)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


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
            with _quiet_stderr():  # Ray's C++ client logs each failed connect to fd 2
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
