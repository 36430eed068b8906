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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundscope.errors import ConfigError

log = logging.getLogger("groundscope")

NAMESPACE = "groundscope"
# Ray puts Unix sockets at <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store: about
# 64 characters after the temp dir, within the ~107 a socket path may have.
MAX_TEMP_DIR_CHARS = 40
REAP_S = 3.0  # how long a local Ray's processes get to end on SIGTERM before SIGKILL
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
    """A Ray session in use by a run; ``started`` when this run started it (and stops it),
    ``local`` when that is a local Ray (its processes are this process's descendants)."""

    started: bool
    temp_dir: str | None = None
    scratch: bool = False  # the temp dir is a short one made for this run (removed after)
    local: bool = False
    session_dir: str | None = None  # this Ray's session under temp_dir (removed after)
    before: frozenset[int] = frozenset()  # this process's descendants before Ray started

    def stop(self) -> None:
        """Shut the session down; a local Ray completely: every process it started ended
        (asked, then killed after :data:`REAP_S` seconds) and its temp dirs removed."""
        import ray

        if not self.started:
            return
        ours = _ray_descendants(self.before) if self.local else []
        ray.shutdown()
        _reap(ours)
        if self.session_dir:
            shutil.rmtree(self.session_dir, ignore_errors=True)
        if self.temp_dir:
            latest = os.path.join(self.temp_dir, "session_latest")
            if os.path.islink(latest) and not os.path.exists(latest):
                os.unlink(latest)
            if self.scratch:
                shutil.rmtree(self.temp_dir, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):  # another run's session may be in it
                    os.rmdir(self.temp_dir)


def _descendants() -> list[Any]:
    import psutil  # Ray's own copy (ray/thirdparty_files) once ray is imported

    return psutil.Process().children(recursive=True)


def _ray_descendants(before: frozenset[int]) -> list[Any]:
    """The processes below this one that a local Ray started (not there before it)."""
    import psutil

    out = []
    for proc in _descendants():
        with contextlib.suppress(psutil.Error):
            if proc.pid not in before and "ray" in " ".join(proc.cmdline()):
                out.append(proc)
    return out


def _reap(procs: list[Any]) -> None:
    """End ``procs`` (those still running after Ray's own shutdown): SIGTERM, then SIGKILL."""
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, left = psutil.wait_procs(procs, timeout=REAP_S)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=REAP_S)


@contextlib.contextmanager
def _without(names: Iterable[str]) -> Iterator[None]:
    """These environment variables unset meanwhile (what a child process started now gets)."""
    saved = {name: os.environ.pop(name) for name in set(names) if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


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


def start_session(address: str | None, work_dir: str | os.PathLike[str],
                  hide: Iterable[str] = ()) -> Session:
    """Join or start Ray for a run (see the module docstring). A local Ray is started with
    the variables ``hide`` (the run's keys) out of its processes' environment."""
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
    session = Session(started=True, temp_dir=temp, scratch=scratch, local=True,
                      before=frozenset(p.pid for p in _descendants()))
    try:
        with _without(hide):
            ray.init(_temp_dir=temp, **quiet)
    except BaseException:  # Ctrl-C or a failure while starting: nothing of it left behind
        session.stop()
        raise
    node = getattr(ray._private.worker, "_global_node", None)
    session.session_dir = node.get_session_dir_path() if node is not None else None
    return session
