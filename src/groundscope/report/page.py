"""The shell of a self-contained HTML page: inline CSS and script, data as one JSON blob.

The page can load nothing from anywhere: its Content-Security-Policy allows no source but
inline styles, ``data:`` images and audio, and the one inline script whose SHA-256 is in
the policy. The data blob is a ``<script type="application/json">`` element; every ``<``
in it is written as ``\\u003c`` so no text inside (model output included) can close it.
The page scripts build the DOM with ``textContent`` only, never ``innerHTML`` with data.
Bidi embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069) in any text of
the page, the data blob included, are shown as visible escapes (``\u202e``), so no name,
id or answer can reorder what is displayed around it; table cells are also isolated by
CSS (``unicode-bidi: isolate``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from html import escape
from importlib import resources
from typing import Any

import orjson

_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI_RE = re.compile(f"[{_BIDI}]")


def visible_bidi(text: str) -> str:
    """``text`` with every bidi embedding, override and isolate as a visible ``\\uXXXX``."""
    return _BIDI_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def asset(name: str) -> str:
    """The text of a file in ``report/assets`` (CSS and JS shipped with the package)."""
    return resources.files("groundscope.report").joinpath("assets", name).read_text("utf-8")


def json_blob(data: Any, element_id: str = "gs-data") -> str:
    """``data`` as an inert JSON script element that no string inside can break out of."""
    raw = orjson.dumps(data, default=str, option=orjson.OPT_SERIALIZE_NUMPY)
    raw = raw.replace(b"<", b"\\u003c")
    for ch in _BIDI:  # only ever inside JSON strings: there, the text "\u202e" (escaped)
        raw = raw.replace(ch.encode("utf-8"), b"\\\\u%04x" % ord(ch))
    return f'<script type="application/json" id="{element_id}">{raw.decode("utf-8")}</script>'


def render_page(title: str, body: str, *, data: Any = None, script: str = "") -> str:
    """A complete HTML document: the shared stylesheet, ``body``, the data and the script."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = ("default-src 'none'; img-src data:; media-src data:; style-src 'unsafe-inline'; "
           f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="groundscope">',
        f"<title>{escape(visible_bidi(title))}</title>",
        f"<style>{asset('report.css')}</style>",
        "</head><body>",
        visible_bidi(body),
        json_blob(data) if data is not None else "",
        f"<script>{script}</script>" if script else "",
        "</body></html>",
    ]
    return "\n".join(parts)


def table(headers: list[str], rows: list[list[Any]], *, cls: str = "gs-table",
          numeric: set[int] | frozenset[int] = frozenset()) -> str:
    """A plain HTML table; cells are escaped text, ``numeric`` columns right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
            for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return (f'<table class="{cls}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")
