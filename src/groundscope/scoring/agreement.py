"""Agreement statistics for binary correct/incorrect verdicts (pure).

- between judges: :func:`pairwise_agreement` (mean share of agreeing judge pairs per sample;
  the ``Judge agreement ↑`` row) and :func:`fleiss_kappa` (chance-corrected, in the JSON);
- judge vs human: :func:`confusion_matrix`, accuracy and :func:`cohen_kappa`, together in
  :func:`versus_human` (the report's block, for the correctness judge and the grounding judge).

Verdicts are booleans: ``True`` = correct (the grounding judge: ``True`` = hallucinated).
References: Fleiss, J. L. (1971) "Measuring nominal
scale agreement among many raters"; Cohen, J. (1960) "A coefficient of agreement for nominal
scales". A statistic that is undefined (no data, or no variation so chance agreement is 1)
is ``None``, never a made-up number.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

_TRUE = frozenset({"correct", "1", "yes", "y", "true"})
_FALSE = frozenset({"incorrect", "0", "no", "n", "false"})


def human_label(value: Any) -> bool | None:
    """A human label column value as a verdict: correct|1|yes|true -> True,
    incorrect|0|no|false -> False (case-insensitive), anything else -> None.

    >>> [human_label(v) for v in ("Correct", "no", 1, 0.0, True, "maybe", None)]
    [True, False, True, False, True, None, None]
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return {1: True, 0: False}.get(value)  # type: ignore[call-overload]
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


def pairwise_agreement(items: Sequence[Sequence[bool]]) -> float | None:
    """Mean over samples (with >= 2 votes) of the share of judge pairs that agree.

    >>> pairwise_agreement([[True, True, True], [True, True, False], [False]])
    0.6666666666666666
    """
    shares = []
    for votes in items:
        pairs = list(combinations(votes, 2))
        if pairs:
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return sum(shares) / len(shares) if shares else None


def fleiss_kappa(items: Sequence[Sequence[bool]]) -> float | None:
    """Fleiss' kappa over the samples rated by the most judges (it needs a fixed panel size).

    >>> round(fleiss_kappa([[True, True], [False, False], [True, False], [True, True]]), 4)
    0.4667
    """
    n = max((len(v) for v in items), default=0)
    rows = [v for v in items if len(v) == n]
    if n < 2 or not rows:
        return None
    per_item = [(sum(v) * (sum(v) - 1) + (n - sum(v)) * (n - sum(v) - 1)) / (n * (n - 1))
                for v in rows]
    p_bar = sum(per_item) / len(rows)
    share_true = sum(sum(v) for v in rows) / (len(rows) * n)
    p_e = share_true**2 + (1 - share_true) ** 2
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1 - p_e)


def confusion_matrix(pairs: Sequence[tuple[bool, bool]]) -> list[list[int]]:
    """2x2 counts of ``(human, judge)`` pairs: rows human correct/incorrect, columns judge.

    >>> confusion_matrix([(True, True), (True, False), (False, False), (False, False)])
    [[1, 1], [0, 2]]
    """
    m = [[0, 0], [0, 0]]
    for human, judge in pairs:
        m[0 if human else 1][0 if judge else 1] += 1
    return m


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa between two raters of ``(a, b)`` verdict pairs.

    >>> cohen_kappa([(True, True), (True, False), (False, False), (False, False)])
    0.5
    """
    n = len(pairs)
    if n == 0:
        return None
    (a, b), (c, d) = confusion_matrix(pairs)
    p_o = (a + d) / n
    p_e = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


def versus_human(pairs: Sequence[tuple[bool, bool]], labels: tuple[str, str]) -> dict[str, Any]:
    """The report's judge-vs-human block of ``(human, judge)`` pairs: samples, accuracy,
    Cohen's kappa and the confusion matrix (rows: human, columns: judge; ``labels`` name
    ``True`` then ``False``).

    >>> versus_human([(True, True), (False, False), (False, True)], ("yes", "no"))["accuracy"]
    0.6666666666666666
    """
    hits = sum(h == j for h, j in pairs)
    return {"samples": len(pairs), "accuracy": hits / len(pairs) if pairs else None,
            "cohen_kappa": cohen_kappa(pairs),
            "confusion": {"rows": "human", "columns": "judge", "labels": list(labels),
                          "matrix": confusion_matrix(pairs)}}
