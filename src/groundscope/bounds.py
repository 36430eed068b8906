"""The hard caps on untrusted input, and the one rule of ``limit`` (pure; imports nothing).

Datasets, configs and judge replies come from people and servers we do not control. Every
count and size that drives work (requests, reads, memory) is bounded: by a setting where a
user may need another value (``TaskConfig`` / ``JudgeConfig`` / ``GroundingConfig``, with
their defaults in ``config.py``), or by one of the caps below, which no setting raises.

=========================  ==========  =====================================================
cap                        value       what it bounds
=========================  ==========  =====================================================
``MAX_CONFIG_BYTES``       1 MiB       a config file, a JSON flag, a run's ``config.json``
``MAX_CONFIG_NODES``       100,000     values of a config once YAML aliases are expanded
``MAX_CONFIG_DEPTH``       64          nesting of a config
``MAX_SEED``               2**32 - 1   ``seed`` / ``simulator.seed`` (numpy's seed range)
``MAX_LIMIT``              2**53       a ``limit`` count (every float up to it is exact)
``MAX_JUDGE_MODELS``       16          models of ``judge.models``, ``judge.grounding.models``
``MAX_MESSAGES``           256         chat messages of one General-VQA record
``MAX_OPTIONS``            100         options of one multiple-choice record
``MAX_SUBSETS``            1,000       subsets of one dataset
``MAX_REFERENCES``         16          references an answer is compared with (consistency)
``MAX_RUN_LINE_BYTES``     64 MiB      one line of a run directory's JSONL file (a saved
                                       prediction, review, skipped record, cache entry)
``MAX_RUN_FILE_BYTES``     64 MiB      one whole JSON file of a run directory (a report)
=========================  ==========  =====================================================
"""

from __future__ import annotations

import math

__all__ = [
    "MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "MAX_CONFIG_NODES", "MAX_JUDGE_MODELS",
    "MAX_LIMIT", "MAX_MESSAGES", "MAX_OPTIONS", "MAX_REFERENCES", "MAX_RUN_FILE_BYTES",
    "MAX_RUN_LINE_BYTES", "MAX_SEED", "MAX_SUBSETS",
    "check_limit", "limit_count",
]

MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_NODES = 100_000
MAX_CONFIG_DEPTH = 64
MAX_SEED = 2**32 - 1
MAX_LIMIT = 2**53
MAX_JUDGE_MODELS = 16
MAX_MESSAGES = 256
MAX_RUN_LINE_BYTES = 64 << 20
MAX_RUN_FILE_BYTES = 64 << 20
MAX_OPTIONS = 100
MAX_SUBSETS = 1000
MAX_REFERENCES = 16

_LIMIT_RULE = "must be a record count >= 1 or a fraction in (0, 1) (leave it out for every record)"


def check_limit(value: object) -> int | float | None:
    """``limit`` validated and normalised (``ValueError`` names the problem).

    The one rule: ``None`` keeps every record; a whole number N (1 <= N <= 2**53; ``5``,
    ``5.0``, ``"1e3"``) keeps the first N records of each subset; a float strictly between
    0 and 1 keeps that fraction of them (see :func:`limit_count`). ``0``, negatives, ``1.5``,
    ``nan`` and ``inf`` are errors, and so is ``1.0``: EvalScope reads it as the fraction
    "all", a count would read it as one record.

    >>> check_limit(5.0), check_limit("1e3"), check_limit(0.25), check_limit(None)
    (5, 1000, 0.25, None)
    >>> check_limit(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: must be a record count >= 1 or a fraction in (0, 1) (leave it out ...), got 0
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number, got {type(value).__name__}")
    if isinstance(value, str):
        value = _number(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{_LIMIT_RULE}, got {value}")
        if 0.0 < value < 1.0:
            return value
        if value == 1.0:
            raise ValueError("1.0 is ambiguous (one record, or the fraction 'all'?); "
                             "write 1 for one record, or leave limit out for every record")
        if not value.is_integer():
            raise ValueError(f"{_LIMIT_RULE}, got {value}")
        value = int(value)
    if value < 1:
        raise ValueError(f"{_LIMIT_RULE}, got {value}")
    if value > MAX_LIMIT:
        raise ValueError(f"a record count must be at most 2**53 = {MAX_LIMIT}, got {value:.3g}")
    return value


def _number(text: str) -> int | float:
    try:
        return int(text.strip())
    except ValueError:
        pass
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"expected a number, got {text[:40]!r}") from None


def limit_count(limit: int | float | None, total: int) -> int:
    """How many of ``total`` records a valid ``limit`` keeps: all for None, ``min(N, total)``
    for a count, ``floor(fraction * total)`` but at least one for a fraction.

    >>> limit_count(None, 7), limit_count(3, 7), limit_count(30, 7), limit_count(0.5, 7)
    (7, 3, 7, 3)
    >>> limit_count(0.01, 7), limit_count(0.5, 0)
    (1, 0)
    """
    if limit is None:
        return total
    if isinstance(limit, float):
        return min(total, max(1, math.floor(total * limit)))
    return min(limit, total)
