"""Reading the one JSON object a judge was asked to reply with (pure, reused by every judge step).

A judge is told to answer with exactly one JSON object. Real models wrap it in
``<think>`` blocks, markdown fences or prose, and sometimes draft an object before the final
one. The rule here, shared by the verdict judge and the grounding steps:

1. reasoning is removed first: every ``<think>...</think>`` block, and anything before a
   lone closing ``</think>`` (templates that open the block in the prompt);
2. every *top-level* ``{...}`` span is found by a scanner that respects JSON strings, so a
   brace inside a quoted value neither opens nor closes an object;
3. one span: it is the reply. Several spans, or prose around them: the reply binds to the
   **last** span (the model's final word); earlier drafts are ignored;
4. the chosen span must parse as a JSON object, else the reply is unusable.

Any failure is a :class:`ReplyError` whose message says what was wrong, so a caller can put
it into a repair request ("your reply could not be used: ...").

>>> extract_object('<think>{"draft": 1}</think> Sure: {"verdict": "A", "reasoning": "same"}')
{'verdict': 'A', 'reasoning': 'same'}
"""

from __future__ import annotations

import json
from typing import Any

from groundscope.scoring.choice import strip_reasoning  # one <think> rule for all replies


class ReplyError(ValueError):
    """A judge reply that breaks the one-JSON-object contract (the message says how)."""


def object_spans(text: str) -> list[str]:
    """Every top-level ``{...}`` span of ``text``, in order (braces in strings ignored).

    A stray ``{`` that is never closed (prose such as "use {x") does not swallow the rest:
    scanning resumes just after it.

    >>> object_spans('a {"x": "}"} b {"y": {"z": 1}} c')
    ['{"x": "}"}', '{"y": {"z": 1}}']
    >>> object_spans('set {x then {"verdict": "A"}')
    ['{"verdict": "A"}']
    """
    spans: list[str] = []
    pos = 0
    while True:
        found, unclosed = _scan(text, pos)
        spans += found
        if unclosed is None:
            return spans
        pos = unclosed + 1


def _scan(text: str, pos: int) -> tuple[list[str], int | None]:
    """Balanced spans from ``pos`` on, and where an unclosed top-level ``{`` started."""
    spans: list[str] = []
    depth = 0
    start = 0
    in_string = escaped = False
    for i in range(pos, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans, (start if depth else None)


def extract_object(text: str) -> dict[str, Any]:
    """The JSON object a reply stands for (see the module rules); ``ReplyError`` if none."""
    visible = strip_reasoning(text or "")
    spans = object_spans(visible)
    if not spans:
        what = "an empty reply" if not visible.strip() else "no JSON object in the reply"
        raise ReplyError(what)
    last = spans[-1]
    try:
        value = json.loads(last)
    except json.JSONDecodeError as exc:
        raise ReplyError(f"the JSON object is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):  # pragma: no cover - a {...} span always parses to a dict
        raise ReplyError("the reply is not a JSON object")
    return value
