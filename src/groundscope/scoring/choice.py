"""Multiple-choice answer extraction: which option label did the model choose?

Labels are ``A``..``Z`` for the first 26 options, then ``"1"``, ``"2"``, ... (the 27th option
is ``"1"``, the 36th ``"10"``), as EvalScope numbers them (:func:`option_letters`).

The text is split into the **reply** and its **reasoning**: every ``<think ...>...</think>``
block (any case); then, if a ``</think>`` is left without its opening tag (the tag was in the
prompt template), everything up to the last one; then, if a ``<think>`` is left unclosed (the
reasoning was cut off), everything from it on. :func:`extract_choice` then reads:

1. The reply's answer markers, ``ANSWER:`` (any case) or ``答案:``, with an ASCII or
   full-width colon, from the last to the first. After a marker, markdown and math
   decoration is skipped (``**``, ``__``, ``$``, ``\\(``, ``\\boxed{``, ``\\text{`` ...) and the
   label must be a whole token, bare or in a bracket ``( [ { （ 【`` that closes right after
   it: ``ANSWER: **C**``, ``ANSWER: (D)``, ``ANSWER: [B]``, ``答案：【B】``, ``ANSWER: C.``,
   ``ANSWER: \\boxed{C}`` all give the label; so does ``ANSWER: B, not C`` (prose after the
   label is ignored). A single lower-case letter is accepted (``answer: c`` -> ``C``) when
   nothing but closing marks or a period follows it on its line, so the article in
   ``Answer: a dog`` is not read as option A. A marker followed by no label (an echoed
   ``ANSWER: [LETTER]``, prose) is skipped; the first marker from the end that carries a
   label decides.
2. A marker followed by several labels on its line (``A, C``, ``A/C``, ``B and D``,
   ``A B C D are all plausible``, ``(A, C)``, or glued in order ``AB``, ``ACD``) is a
   multiple answer to a single-answer question: the result is ``None``.
3. Without a usable marker, the reply's last allowed upper-case letter that stands alone
   (no ASCII letter or digit on either side, so ``选B`` and ``(B)`` count, ``BC`` does not).
4. When the reply gives no answer by 1-3, the reasoning's markers, read as in 1-2: an answer
   inside the reasoning counts when nothing after it is one (``ANSWER: B</think>ANSWER:
   [LETTER]`` -> ``B``). A letter is never guessed from the reasoning without a marker.
5. Otherwise ``None``.

Differences from EvalScope (``parse_answers`` in its ``utils/multi_choices.py``, and the
removal of the first ``<think>`` block in its model layer), where every answer EvalScope finds
is found here too except as listed:

* reasoning: EvalScope removes the first complete ``<think>`` block (then never reads it)
  and parses an orphan ``</think>``'s reasoning or a cut-off ``<think>`` as the reply. Here
  every block is reasoning, read only when the reply gives no answer: ``<think>ANSWER:
  B</think>ANSWER: [LETTER]`` gives ``B`` (EvalScope: no answer); ``ANSWER: A</think>I pick
  (C)`` gives ``C`` (EvalScope: ``A``); a cut-off ``<think>B is...`` gives no answer.
* **better** a lower-case label after the marker is read; EvalScope falls back to the last
  capital letter of the text (for ``ANSWER: b`` that is the ``R`` of ``ANSWER``: no answer).
* **better** full-width colon ``ANSWER：`` and a ``{B}`` bracket are accepted; ``答案：`` is
  a marker whatever the prompt (EvalScope reads it only with its Chinese templates).
* fallback: EvalScope takes the last upper-case *character* of the text (inside a word too:
  ``...so BC`` -> ``C``; ``...the answer is B, says GPT`` -> ``T``, i.e. no answer); we take
  the last allowed standalone letter. Number labels (options past Z) come from a marker
  only, never from the fallback, which EvalScope cannot reach either.
* several labels: both give no answer for a list after the marker, but EvalScope reads
  ``A/C`` and ``B and D`` as their first label, and takes any word spelled with label
  characters for a list (``ANSWER: BA``; with 40 options even ``ANSWER: GPT``); here only
  letters in order (``AB``) count as glued. Conversely an unclosed ``ANSWER: 【B or C`` is
  no answer here, while EvalScope skips that marker and reads an earlier one.
* an opened bracket that does not close (``ANSWER: (C``) is no label at that marker, as in
  EvalScope; the fallback may still find ``C`` where EvalScope's fallback finds it too.

>>> extract_choice("I think B.\\nANSWER: **C**", option_letters(4))
'C'
>>> extract_choice("<think>ANSWER: A</think>The answer is (D).", option_letters(4))
'D'
>>> extract_choice("ANSWER: B</think>ANSWER: [LETTER]", option_letters(4))
'B'
>>> extract_choice("ANSWER: A, C", option_letters(4)) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from groundscope.choices import option_letters

__all__ = ["extract_choice", "option_letters", "split_reasoning", "strip_reasoning"]

# Reasoning tags. An opening tag is "<think" (a word boundary after it) up to the next ">",
# found as its start plus str.find, never as one pattern "<think\b[^>]*>": that pattern
# rescans to the end of the text from every "<think" when no ">" follows (quadratic).
_THINK_OPEN_START = re.compile(r"<think\b", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think\s*>", re.IGNORECASE)

_MARKER = re.compile(r"(?:answer|答案)\s*[:：]", re.IGNORECASE)
_DECORATION = re.compile(
    r"(?:\s|\*|_|\$|\\\(|\\\[|\\(?:boxed|fbox|text|textbf|mathbf|mathrm)\s*\{)*"
)
_LABEL = re.compile(r"(?P<open>[(\[{（【]\s*)?(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])")
# A second label after the first on its line: after a separator, "and"/"or", or a space.
_NEXT_LABEL = re.compile(
    r"[ \t]*(?:[,，/、&+][ \t]*|(?:and|or)[ \t]+)?(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_CLOSE = re.compile(r"[ \t]*[)\]}）】]")
_LINE_END = re.compile(r"[\s)\]}）】*_$.。]*(?:\n|$)")
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])")

_AMBIGUOUS = "ambiguous"


def strip_reasoning(text: str) -> str:
    """``text`` without ``<think>`` reasoning (complete blocks, an orphan ``</think>`` and
    everything before it, an unclosed ``<think>`` and everything after it).

    >>> strip_reasoning("<think>hmm</think>B"), strip_reasoning("hmm</think>B")
    ('B', 'B')
    >>> strip_reasoning("A <think>still thinking")
    'A '
    """
    return split_reasoning(text)[0]


def split_reasoning(text: str) -> tuple[str, str]:
    """``(reply, reasoning)``: the reply is ``text`` without its reasoning (as
    :func:`strip_reasoning`); the reasoning is what was removed (the text of each block, all
    before an orphan ``</think>``, all after an unclosed ``<think>``), one piece per line in
    the order of the text.

    One pass, linear in the length of ``text``: each character is looked at O(1) times.

    >>> split_reasoning("plan</think>A<think>x</think>B<think>cut")
    ('AB', 'plan\\nx\\ncut')
    """
    blocks: list[tuple[int, int, int, int]] = []  # tag start, content start, end, close end
    pos, unclosed = 0, None
    while (tag := _opening_tag(text, pos)) is not None:
        close = _THINK_CLOSE.search(text, tag[1])
        if close is None:  # no block closes after this tag, so none after any later one
            unclosed = tag
            break
        blocks.append((tag[0], tag[1], close.start(), close.end()))
        pos = close.end()
    orphan, covered = None, iter(blocks)
    block = next(covered, None)
    for close in _THINK_CLOSE.finditer(text):  # the last closing tag outside every block
        while block is not None and block[3] <= close.start():
            block = next(covered, None)
        if block is None or close.end() <= block[0]:
            orphan = close
    reply_start = orphan.end() if orphan else 0
    reasoning = [text[: orphan.start()]] if orphan else []
    reply, pos = [], reply_start
    for tag_start, content_start, content_end, close_end in blocks:
        if close_end > reply_start:
            reply.append(text[pos:tag_start])
            reasoning.append(text[content_start:content_end])
            pos = close_end
    if unclosed is not None and unclosed[0] < reply_start:  # the orphan was inside its tag
        unclosed = _opening_tag(text, reply_start)
    if unclosed is not None:
        reply.append(text[pos : unclosed[0]])
        reasoning.append(text[unclosed[1] :])
    else:
        reply.append(text[pos:])
    return "".join(reply), "\n".join(reasoning)


def _opening_tag(text: str, pos: int) -> tuple[int, int] | None:
    """``(start, end)`` of the first complete ``<think ...>`` tag at or after ``pos``.

    If the first ``<think`` has no ``>`` after it, no later one has either: None.
    """
    found = _THINK_OPEN_START.search(text, pos)
    if found is None:
        return None
    end = text.find(">", found.end())
    return None if end < 0 else (found.start(), end + 1)


def _label_after(text: str, pos: int, allowed: frozenset[str]) -> str | None:
    """The label that ``text[pos:]`` (the text after one marker) starts with; ``_AMBIGUOUS``
    for several labels; ``None`` when it starts with no label. Reads ``text`` in place (no
    copy of the tail per marker), so trying every marker stays linear."""
    start = _DECORATION.match(text, pos)
    found = _LABEL.match(text, start.end() if start else pos)
    if found is None:
        return None
    raw, end = found.group("label"), found.end()
    if raw in allowed:
        label = raw
    elif len(raw) == 1 and raw.islower() and raw.upper() in allowed:
        if not _LINE_END.match(text, end):
            return None
        label = raw.upper()
    elif not found.group("open") and _glued_labels(raw, allowed):
        return _AMBIGUOUS
    else:
        return None
    following = _NEXT_LABEL.match(text, end)
    if following and following.group("label") in allowed:
        return _AMBIGUOUS
    if found.group("open") and not _CLOSE.match(text, end):
        return None  # an opened bracket must close right after the label
    return label


def _glued_labels(word: str, allowed: frozenset[str]) -> bool:
    """Several one-character labels written together in order, such as ``AB`` or ``ACD``."""
    return len(word) > 1 and all(c in allowed for c in word) and list(word) == sorted(set(word))


def _standalone_letter(text: str, allowed: frozenset[str]) -> str | None:
    for found in reversed(list(_STANDALONE.finditer(text))):
        if found.group() in allowed:
            return found.group()
    return None


def extract_choice(text: str, letters: Sequence[str]) -> str | None:
    """The option label chosen in ``text``, one of ``letters``, or ``None`` (rules in the
    module docstring).

    >>> extract_choice("ANSWER: [LETTER] ... so the answer: b", "ABCD")
    'B'
    >>> extract_choice("Option 3 looks right. ANSWER: 3", option_letters(30))
    '3'
    >>> extract_choice("no idea", "ABCD") is None
    True
    """
    allowed = frozenset(letters)
    if not text or not allowed:
        return None
    reply, reasoning = split_reasoning(text)
    label = _marked_label(reply, allowed)
    if label is None:
        label = _standalone_letter(reply, allowed) or _marked_label(reasoning, allowed)
    return None if label == _AMBIGUOUS else label


def _marked_label(text: str, allowed: frozenset[str]) -> str | None:
    """The label after the last marker of ``text`` that carries one (``_AMBIGUOUS`` for
    several labels), or ``None``."""
    for marker in reversed(list(_MARKER.finditer(text))):
        label = _label_after(text, marker.end(), allowed)
        if label is not None:
            return label
    return None
