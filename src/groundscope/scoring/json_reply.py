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
import re
from typing import Any

from groundscope.scoring.choice import strip_reasoning  # one <think> rule for all replies


class ReplyError(ValueError):
    """A judge reply that breaks the one-JSON-object contract (the message says how)."""


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for an error message that may be
    quoted back to the judge in a repair turn (a reply's values can be megabytes).

    >>> shown("C"), shown("x" * 100, limit=10)
    ("'C'", "'xxxxxxxx…")
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def required(obj: dict[str, Any], key: str) -> Any:
    """``obj[key]``; a missing or null key is a :class:`ReplyError`.

    >>> required({"verdict": "A"}, "verdict")
    'A'
    """
    value = obj.get(key)
    if value is None:
        raise ReplyError(f'the JSON object has no "{key}" key')
    return value


def optional_text(obj: dict[str, Any], key: str) -> str:
    """``obj[key]`` as text (a reason or reasoning: optional, any JSON value kept as text).

    >>> optional_text({"reason": 2}, "reason"), optional_text({}, "reason")
    ('2', '')
    """
    value = obj.get(key, "")
    return value if isinstance(value, str) else str(value)


def object_spans(text: str) -> list[str]:
    """Every top-level ``{...}`` span of ``text``, in order (braces in strings ignored).

    A stray ``{`` that is never closed (prose such as "use {x") does not swallow the rest:
    scanning resumes just after it, as if the text began there.

    Linear in ``len(text)``: where each ``{`` would close is worked out in one pass
    (:func:`_closing_braces`), instead of rescanning the rest of the text after every stray
    ``{`` (``"{" * 8000`` took seconds that way).

    >>> object_spans('a {"x": "}"} b {"y": {"z": 1}} c')
    ['{"x": "}"}', '{"y": {"z": 1}}']
    >>> object_spans('set {x then {"verdict": "A"}')
    ['{"verdict": "A"}']
    """
    closing = _closing_braces(text)
    spans: list[str] = []
    pos = 0
    while (start := text.find("{", pos)) >= 0:
        end = closing.get(start)
        if end is None:  # never closed: skip this brace only
            pos = start + 1
        else:
            spans.append(text[start : end + 1])
            pos = end + 1
    return spans


# The scan of one object: after its "{" the depth is 1 and no string is open; a '"' opens a
# string, in which "\\" escapes the next character and '"' closes it; outside strings "{"
# and "}" nest. The object ends where the depth is back to 0.
#
# _closing_braces finds that end for every "{" at once. A scan is in one of three string
# states: outside a string, inside one, or inside just after a backslash (escaped).
# Scans started at different braces that are in the same state at the same character act
# alike from there on, so at most three groups ("lanes") of scans are followed, one per
# state. A lane is a _Pending tree: ``opens`` are the braces its scans pushed since the lane
# formed (innermost last), ``below`` the lanes merged into it, whose scans still wait for
# their own braces to close. A "}" read outside strings closes the innermost pending brace
# of every scan in the lane: the top of ``opens`` or, when that is empty, one brace in every
# lane below. Each brace is closed at most once and every tree node visited either closes
# one or has at least two children, so the whole pass is linear.
_SPECIAL = re.compile(r'[{}"\\]')


class _Pending:
    __slots__ = ("below", "opens")

    def __init__(self, opens: list[int], below: list[_Pending]) -> None:
        self.opens = opens
        self.below = below


def _merge(a: _Pending | None, b: _Pending | None) -> _Pending | None:
    """One lane for the scans of lanes ``a`` and ``b`` (now in the same state)."""
    if a is None or b is None:
        return a or b
    if not a.opens:
        a.below.append(b)
        return a
    if not b.opens:
        b.below.append(a)
        return b
    return _Pending([], [a, b])


def _close(lane: _Pending, at: int, closing: dict[int, int]) -> _Pending | None:
    """A "}" at ``at`` for every scan of ``lane``; what stands for the lane afterwards."""
    order, todo = [], [lane]
    while todo:  # top-down: pop where a node has braces of its own, else go below
        node = todo.pop()
        order.append(node)
        if node.opens:
            closing[node.opens.pop()] = at
        else:
            todo.extend(node.below)
    stand_in: dict[int, _Pending | None] = {}
    for node in reversed(order):  # bottom-up: drop finished scans, skip single-child nodes
        if not node.opens:
            node.below = [k for c in node.below if (k := stand_in.get(id(c), c)) is not None]
        stand_in[id(node)] = (node if node.opens or len(node.below) > 1
                              else node.below[0] if node.below else None)
    return stand_in[id(lane)]


def _closing_braces(text: str) -> dict[int, int]:
    """``{index of a "{": index of the "}" that closes it}`` for every "{" whose object
    closes (see the notes above); a "{" that never closes is absent."""
    closing: dict[int, int] = {}
    out: _Pending | None = None
    inside: _Pending | None = None
    escaped: _Pending | None = None
    last = -2
    for found in _SPECIAL.finditer(text):
        i = found.start()
        if escaped is not None and i > last + 1:  # an ordinary character was escaped
            inside, escaped = _merge(inside, escaped), None
        last = i
        ch = text[i]
        if ch == '"':
            out, inside, escaped = inside, _merge(out, escaped), None
        elif ch == "\\":
            inside, escaped = escaped, inside
        else:
            inside, escaped = _merge(inside, escaped), None
            if ch == "{":
                if out is None:
                    out = _Pending([i], [])
                else:
                    out.opens.append(i)
            elif out is not None:
                out = _close(out, i, closing)
    return closing


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
    except (ValueError, RecursionError) as exc:  # an integer of 4,300+ digits, deep nesting
        raise ReplyError(f"the JSON object cannot be read ({type(exc).__name__})") from None
    if not isinstance(value, dict):  # pragma: no cover - a {...} span always parses to a dict
        raise ReplyError("the reply is not a JSON object")
    return value
