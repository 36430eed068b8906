"""Human labels of grounding: the record fields, read and checked in one place.

A General-VQA record (or, later, an answer file's entry) may carry a person's verdict on the
answer it is graded with, to measure the grounding judge against (README: Human labels for
grounding):

- ``human_hallucinated``: ``true`` / ``false``, answer level: does the answer state something
  the image contradicts? It is compared with the judge's ``hallucinated_answers`` (an answer
  with at least one *contradicted* claim). JSON booleans; as text (TSV / CSV cells)
  ``true|false|yes|no|1|0``, case-insensitive; an empty cell is no label.
- ``human_claims`` (optional): a list (a JSON array string in TSV / CSV) of at most
  :data:`MAX_HUMAN_CLAIMS` objects ``{"claim": "<text>", "verdict": "supported" |
  "contradicted" | "not_determinable"}``. A judge-extracted claim equal to a labelled one
  after normalisation (``scoring/normalise.py``) gets its ``human_verdict``; the report
  counts labelled, matched and agreeing claims.

They land in ``Sample.metadata`` under the same names (:data:`LABEL_FIELDS`), normalised
(a bool; a list of ``{"claim", "verdict"}`` dicts, as saved runs read them back). Anything
else is a bad record, one line ``file:line: field: problem``.

>>> from pathlib import Path
>>> from groundscope.types import Origin
>>> grounding_labels({"human_hallucinated": "Yes", "human_claims": '[{"claim": "A dog.",'
...                   ' "verdict": "supported"}]'}, Origin(Path("d.tsv"), 2))
{'human_hallucinated': True, 'human_claims': [{'claim': 'A dog.', 'verdict': 'supported'}]}
>>> grounding_labels({"human_hallucinated": "maybe"}, Origin(Path("d.tsv"), 2))
Traceback (most recent call last):
groundscope.errors.RecordError: d.tsv:2: human_hallucinated: expected true or false, got 'maybe'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from groundscope.dataset.base import record_error
from groundscope.types import Origin

__all__ = ["HUMAN_CLAIMS", "HUMAN_HALLUCINATED", "LABEL_FIELDS", "MAX_HUMAN_CLAIMS",
           "grounding_labels"]

HUMAN_HALLUCINATED = "human_hallucinated"
HUMAN_CLAIMS = "human_claims"
LABEL_FIELDS = (HUMAN_HALLUCINATED, HUMAN_CLAIMS)
MAX_HUMAN_CLAIMS = 64
MAX_LABEL_CLAIM_CHARS = 2000
CLAIM_VERDICTS = ("supported", "contradicted", "not_determinable")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


def grounding_labels(record: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    """The human grounding labels of ``record`` (absent ones left out), checked."""
    out: dict[str, Any] = {}
    flag = record.get(HUMAN_HALLUCINATED)
    if flag is not None and flag != "":
        out[HUMAN_HALLUCINATED] = _flag(flag, origin)
    claims = record.get(HUMAN_CLAIMS)
    if claims is not None and claims != "":
        out[HUMAN_CLAIMS] = _claims(claims, origin)
    return out


def _flag(value: Any, origin: Origin) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise record_error(origin, HUMAN_HALLUCINATED, f"expected true or false, got {_shown(value)}")


def _shown(value: Any) -> str:
    return repr(value[:40]) if isinstance(value, str) else repr(value) \
        if isinstance(value, int | float) else type(value).__name__


def _claims(value: Any, origin: Origin) -> list[dict[str, str]]:
    if isinstance(value, str):  # a TSV / CSV cell: a JSON array
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise record_error(origin, HUMAN_CLAIMS, "expected a JSON array of "
                               '{"claim", "verdict"} objects') from None
    if not isinstance(value, list):
        raise record_error(origin, HUMAN_CLAIMS,
                           f"expected a list of {{claim, verdict}} objects, got {type(value).__name__}")
    if len(value) > MAX_HUMAN_CLAIMS:
        raise record_error(origin, HUMAN_CLAIMS,
                           f"{len(value)} labelled claims, over the limit of {MAX_HUMAN_CLAIMS}")
    out = []
    for k, item in enumerate(value):
        where = f"{HUMAN_CLAIMS}[{k}]"
        if not isinstance(item, dict) or set(item) != {"claim", "verdict"}:
            raise record_error(origin, where, 'expected {"claim": text, "verdict": ...}')
        claim, verdict = item["claim"], item["verdict"]
        if not isinstance(claim, str) or not claim.strip() or len(claim) > MAX_LABEL_CLAIM_CHARS:
            raise record_error(origin, f"{where}.claim",
                               f"expected a non-empty text of at most {MAX_LABEL_CLAIM_CHARS} characters")
        if verdict not in CLAIM_VERDICTS:
            raise record_error(origin, f"{where}.verdict", "expected supported, contradicted or "
                               f"not_determinable, got {_shown(verdict)}")
        out.append({"claim": claim, "verdict": verdict})
    return out
