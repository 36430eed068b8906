"""Text bound for a terminal: control characters and bidi overrides made visible (pure).

Names and messages that reach the terminal come partly from datasets and endpoints:
subset and category names, sample ids, model names, error texts. A terminal obeys control
characters in them: ``\\x1b]52;c;...\\x07`` (OSC 52) writes the clipboard, CSI sequences move
the cursor or recolour, ``\\r`` overwrites a line, and bidi overrides (U+202E) reorder what
is shown. :func:`visible` writes each such character as a visible escape (``\\x1b``,
``\\r``, ``\\u202e``), so the text is shown, never obeyed. It is applied where text goes to
the terminal (the tables, ``report A B``, one-line errors, the console log handler); files
keep the original values (JSON escapes them; the HTML pages escape as HTML).

>>> visible("subset\\x1b]52;c;aGk=\\x07 \\u202egnp.exe\\r\\n")
'subset\\\\x1b]52;c;aGk=\\\\x07 \\\\u202egnp.exe\\\\r\\\\n'
>>> visible("Judge vs human · κ ↑ 中文")
'Judge vs human · κ ↑ 中文'
"""

from __future__ import annotations

import logging
import re

__all__ = ["VisibleFormatter", "visible"]

# C0 and C1 controls and DEL; the bidi embeddings, overrides and isolates, the marks LRM,
# RLM and ALM; the line and paragraph separators (some terminals break lines at them).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    ch = found.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``str(text)`` with every control character and bidi override as a visible escape."""
    text = str(text)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


class VisibleFormatter(logging.Formatter):
    """A console log formatter whose lines hold no control character. Line breaks are kept
    (a record may be a table, as EvalScope logs its results); every other control is shown.
    """

    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(visible(line) for line in super().format(record).split("\n"))
