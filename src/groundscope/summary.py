"""The execution summary of one dataset in a run: what was asked, what came back, what was
skipped, and what the models were asked (``usage``: requests, tokens and cost per step and
model, ``usage.py``). The runner's plan counts into it; the JSON report
(``report/model.py``) carries it.

The rate-limit figures of the run's endpoints are kept in ``<run_dir>/rate_limits.json``
too (:func:`write_rate_limits`), so ``score`` and ``report`` rebuild the same summary; the
file is read as untrusted (regular file, 1 MiB, validated): a bad one is ignored, logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from groundscope.errors import StoreError
from groundscope.fileio import atomic_write, read_regular
from groundscope.usage import UsageSummary

__all__ = ["EndpointLimits", "Summary", "add_rate_limits", "read_rate_limits",
           "record_rate_limits", "write_rate_limits"]

RATE_LIMITS_FILE = "rate_limits.json"
_COUNT = 10**12
_ENDPOINTS = 64  # endpoints in one file (read_rate_limits refuses more)
_NAME_CHARS = 1024  # an endpoint's name ("model", "judge:<model id>") kept in the file
log = logging.getLogger("groundscope")


class EndpointLimits(BaseModel):
    """One endpoint's rate limiting over a run (``client/gate.py`` GateStats): answers 429,
    retries, the lowest in-flight limit reached, seconds the endpoint was paused."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    rate_limited: int = Field(default=0, ge=0, le=_COUNT)
    retries: int = Field(default=0, ge=0, le=_COUNT)
    lowest_limit: int = Field(default=0, ge=0, le=_COUNT)
    paused_s: float = Field(default=0.0, ge=0.0, le=float(_COUNT))


_FIGURES = TypeAdapter(dict[str, EndpointLimits])


class Summary(BaseModel):
    """The execution summary: what was asked, what came back, what was skipped."""

    model_config = ConfigDict(extra="ignore")

    requested: int = 0
    succeeded: int = 0
    errored: int = 0
    skipped: int = 0
    cached: int = 0
    changed: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    unscored: dict[str, int] = Field(default_factory=dict)  # subset -> predictions without a score
    warnings: list[str] = Field(default_factory=list)  # one line each, shown with the table
    usage: UsageSummary = Field(default_factory=UsageSummary)  # requests, tokens, cost: usage.py
    # per endpoint (model, judge:<id>), over the run's eval session
    rate_limits: dict[str, EndpointLimits] = Field(default_factory=dict, max_length=64)

    def why_nothing(self, skipped_file: Path) -> str | None:
        """Why no sample was answered (every record bad, every request failed, no record),
        or None when one was.

        >>> Summary(skipped=3).why_nothing(Path("run/skipped.jsonl"))
        'all 3 records were bad, see run/skipped.jsonl'
        """
        if self.succeeded:
            return None
        if self.skipped and not self.requested:
            return f"all {self.skipped} records were bad, see {skipped_file}"
        if self.requested and not self.skipped:
            return f"all {self.requested} requests failed (the predictions files say why)"
        if self.requested:
            return (f"{self.skipped} records were bad (see {skipped_file}) and the "
                    f"{self.requested} requests failed")
        return "the dataset has no records"

    def count(self, ok: bool, error_kind: str | None = None) -> None:
        """One finished request: succeeded, or errored (``error_kind``, else ``error``)."""
        self.requested += 1
        if ok:
            self.succeeded += 1
            return
        self.errored += 1
        kind = error_kind or "error"
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1


def write_rate_limits(run_dir: Path, figures: dict[str, EndpointLimits]) -> None:
    """``<run_dir>/rate_limits.json`` (atomic)."""
    data = {name: f.model_dump() for name, f in figures.items()}
    atomic_write(run_dir / RATE_LIMITS_FILE, orjson.dumps(data, option=orjson.OPT_INDENT_2))


def add_rate_limits(first: Mapping[str, EndpointLimits],
                    then: Mapping[str, EndpointLimits]) -> dict[str, EndpointLimits]:
    """Two spans of a run's rate limiting as one (a run's sessions, the shards of a run):
    per endpoint, 429s, retries and seconds paused added up, the lower of the lowest
    in-flight limits; each figure held to the bound a saved one is read with. At most
    :data:`_ENDPOINTS` endpoints, ``then``'s first (a session's own gates before what an
    earlier file says), and no name over :data:`_NAME_CHARS` characters: the file written
    stays well inside what :func:`read_rate_limits` reads back.

    >>> a = {"model": EndpointLimits(rate_limited=3, retries=3, lowest_limit=1)}
    >>> add_rate_limits(a, {"model": EndpointLimits(lowest_limit=8, paused_s=1.5)})["model"]
    EndpointLimits(rate_limited=3, retries=3, lowest_limit=1, paused_s=1.5)
    """
    out: dict[str, EndpointLimits] = {}
    for name, f in then.items():
        m = first.get(name)
        out[name] = f if m is None else EndpointLimits(
            rate_limited=min(m.rate_limited + f.rate_limited, _COUNT),
            retries=min(m.retries + f.retries, _COUNT),
            lowest_limit=min(m.lowest_limit, f.lowest_limit),
            paused_s=min(m.paused_s + f.paused_s, float(_COUNT)))
    for name, f in first.items():
        out.setdefault(name, f)
    kept = [name for name in out if len(name) <= _NAME_CHARS][:_ENDPOINTS]
    return {name: out[name] for name in kept}


def record_rate_limits(run_dir: Path, stats: Mapping[str, Mapping[str, Any]],
                       summaries: Iterable[Summary]) -> None:
    """A run's rate-limit figures at its end (``stats``: each endpoint gate's counts) into
    every dataset's summary and the run directory (for ``score`` / ``report``); a throttled
    endpoint of this session is logged. A resumed run's figures are its earlier sessions'
    (the run directory's file) and this one's together: a resume that asks nothing keeps
    them."""
    now = {name: EndpointLimits(**counts) for name, counts in stats.items()}
    figures = add_rate_limits(read_rate_limits(run_dir), now)
    for summary in summaries:
        summary.rate_limits = figures
    try:
        write_rate_limits(run_dir, figures)
    except StoreError as exc:  # the reports still carry them
        log.warning("%s", exc)
    for name, f in now.items():  # this session's (the file's names are not logged)
        if f.rate_limited or f.paused_s:
            log.warning("%s: %d answers 429 (rate limited), %d retries, in-flight limit down "
                        "to %d, paused %.1fs", name, f.rate_limited, f.retries,
                        f.lowest_limit, f.paused_s)


def read_rate_limits(run_dir: Path) -> dict[str, EndpointLimits]:
    """What :func:`write_rate_limits` wrote; {} when absent, unreadable or invalid."""
    path = run_dir / RATE_LIMITS_FILE
    try:
        raw = read_regular(path, 1 << 20)
        if len(raw) > 1 << 20:
            raise ValueError("over 1 MiB")
        figures = _FIGURES.validate_json(raw)
        if len(figures) > 64:
            raise ValueError("over 64 endpoints")
        return figures
    except FileNotFoundError:
        return {}
    except (OSError, StoreError, ValueError) as exc:  # ValidationError is a ValueError
        problem = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        log.warning("%s: ignored: %s", path, problem)
        return {}
