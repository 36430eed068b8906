"""Redaction: the one place that hides credentials in URLs and texts before they are kept or shown.

Two jobs, one module:

- :func:`redact_url` is the form of a URL that may be stored or printed: no user-info
  (``user:password@``), and secret-looking query values (``key=``, ``api_key=``, ``token=``,
  ``sig=`` ...) replaced by ``***``. :func:`url_secrets` lists what it hid, so those values are
  redacted from free text too.
- :class:`Redactor` hides known secrets (API keys, URL credentials) in free text: error
  messages, completions, judge replies, reasoning, log lines. A secret is found in every form
  an endpoint plausibly echoes it back in: any letter case; each character possibly written as
  a JSON ``\\u00XX`` escape, a ``%XX`` URL escape, an ``\\xXX`` escape or an HTML character
  reference (so URL-encoded and half-JSON-escaped echoes are found); inside any base64 text
  (std or URL-safe alphabet, at every alignment, so ``base64("Bearer KEY")`` or a Basic
  ``user:KEY`` header is found); as hex; and truncated (a run of at least half the secret, at
  least 12 characters, from its start or its end). A token after ``Bearer`` / ``Basic`` that
  looks like a credential is hidden whoever it belongs to.

Secrets shorter than :data:`MIN_SECRET` characters cannot be told apart from words and are
not searched for in text (they are still never written: config values are masked whole).

>>> r = Redactor(["sk-test-0123456789abcdef"])
>>> r.redact("bad key SK-TEST-0123456789ABCDEF (was sk%2Dtest-0123456789abcdef)")
'bad key *** (was ***)'
>>> r.redact("Authorization: Basic dTpzay10ZXN0LTAxMjM0NTY3ODlhYmNkZWY=")
'Authorization: Basic ***'
>>> redact_url("https://user:pw@host:8443/v1?api-version=2&api_key=abc")
'https://host:8443/v1?api-version=2&api_key=***'
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

MASK = "***"
MIN_SECRET = 6
MIN_PARTIAL = 12  # the shortest run of a secret (from its start or end) that is hidden
SECRET_PARAM = re.compile(r"sig|token|key|secret|pass|auth|credential", re.IGNORECASE)
_B64_CHARS = re.compile(r"[A-Za-z0-9+/_=-]")
_AUTH_TOKEN = re.compile(r"\b(?:bearer|basic)\s+(?=[\w.~+/=-]{12})(?=[\w.~+/=-]*\d)([\w.~+/=-]+)",
                         re.IGNORECASE)
_ESCAPE_WINDOW = 12  # longer than the longest escaped form of one character (&#x000XX;)
_ESCAPES = re.compile(r"\\[uUxX][0-9a-fA-F]{2}|%[0-9a-fA-F]{2}|&#|\\/")


# ---------------------------------------------------------------- URLs


def _secret_pairs(query: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if SECRET_PARAM.search(k)]


def redact_url(url: str) -> str:
    """``url`` as it may be stored or shown: no user-info, secret query values as ``***``.

    Anything that is not an absolute URL (``"mock"``, a path) is returned unchanged.
    """
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if _secret_pairs(query):
        pieces = []
        for piece in query.split("&"):
            name = unquote(piece.partition("=")[0].replace("+", " "))
            pieces.append(f"{piece.partition('=')[0]}={MASK}" if SECRET_PARAM.search(name) else piece)
        query = "&".join(pieces)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_credentials(url: str) -> tuple[str, str] | None:
    """``(user, password)`` of a URL's user-info (percent-decoded), or None without any."""
    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return None
    return unquote(parts.username or ""), unquote(parts.password or "")


def url_secrets(url: str | None) -> list[str]:
    """The secrets a URL carries: its user-info password (the user name when there is no
    password, as in ``http://KEY@host``) and the values of secret-looking query parameters."""
    if not url:
        return []
    found = [v for _, v in _secret_pairs(urlsplit(url.strip()).query) if v]
    creds = url_credentials(url)
    if creds is not None:
        user, password = creds
        found.append(password or user)
    return [s for s in found if s]


# ---------------------------------------------------------------- free text


def _anycase(text: str) -> str:
    """A regex for ``text`` in any letter case, spelled out (``[sS]``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.lower() != c.upper() else re.escape(c)
                   for c in text)


def _char_forms(ch: str) -> str:
    """A regex for one character of a secret, in any case, literally or escaped."""
    forms = [_anycase(ch)]
    code = ord(ch)
    if code < 128:
        hx = _anycase(f"{code:02x}")
        forms += [r"\\[uU]00" + hx, "%" + hx, r"\\[xX]" + hx, f"&#0{{0,3}}{code};",
                  f"&#[xX]0{{0,3}}{hx};"]
        if ch == "/":
            forms.append(r"\\/")
    return forms[0] if len(forms) == 1 else "(?:" + "|".join(forms) + ")"


def _prefix_pattern(forms: list[str], k: int) -> str:
    """The first ``k`` characters, then as many of the following ones as present."""
    tail = ""
    for form in reversed(forms[k:]):
        tail = f"(?:{form}{tail})?"
    return "".join(forms[:k]) + tail


def _base64_cores(secret: bytes) -> set[str]:
    """The parts of base64 text that only ``secret``'s bytes decide, at each of the three
    alignments, in both alphabets: found inside any base64 text that holds the secret."""
    cores = set()
    for offset in range(3):
        enc = base64.b64encode(b"\0" * offset + secret).decode()
        start, end = -(-8 * offset // 6), 8 * (offset + len(secret)) // 6
        core = enc[start:end]
        cores |= {core, core.translate(str.maketrans("+/", "-_"))}
    return {c for c in cores if len(c) >= MIN_SECRET}


def _find_all(text: str, needle: str) -> Iterator[int]:
    start = text.find(needle)
    while start >= 0:
        yield start
        start = text.find(needle, start + 1)


class _Finder:
    """Every pattern of one secret (built once per secret, see :func:`_finder`).

    A text without any escape sequence (most texts) is searched for the secret's cores
    with ``str.find`` on its lower-case copy; only a text holding escapes goes through the
    escape-aware regexes (~0.1 s per MiB and secret).
    """

    def __init__(self, secret: str) -> None:
        forms = [_char_forms(ch) for ch in secret]
        n = len(secret)
        self.k = k = n if n < 2 * MIN_PARTIAL else max(MIN_PARTIAL, (n + 1) // 2)
        self.low = secret.lower()
        self.prefix = re.compile(_prefix_pattern(forms, k))
        self.suffix = re.compile("".join(forms[n - k:])) if k < n else None
        self.before = [re.compile(f"(?:{f})\\Z") for f in forms[: n - k]]
        self.base64 = sorted(_base64_cores(secret.encode()), key=len, reverse=True)
        self.hex = secret.encode().hex()

    def spans(self, text: str, lower: str, plain: bool) -> Iterator[tuple[int, int]]:
        """Spans of ``text`` holding the secret; ``lower`` is ``text.lower()`` (same length),
        ``plain`` says the text has no escape sequence."""
        if plain:
            yield from self._plain_spans(lower)
        else:
            yield from (m.span() for m in self.prefix.finditer(text))
            if self.suffix is not None:
                for m in self.suffix.finditer(text):
                    yield self._extend_back(text, m.start()), m.end()
        for core in self.base64:  # case-sensitive
            for start in _find_all(text, core):
                yield _widen_base64(text, start, start + len(core))
        for start in _find_all(lower, self.hex):
            yield start, start + len(self.hex)

    def _plain_spans(self, lower: str) -> Iterator[tuple[int, int]]:
        low, k, size = self.low, self.k, len(lower)
        for start in _find_all(lower, low[:k]):
            end, j = start + k, k
            while j < len(low) and end < size and lower[end] == low[j]:
                end, j = end + 1, j + 1
            yield start, end
        if k < len(low):
            for end in (s + k for s in _find_all(lower, low[-k:])):
                start, j = end - k, len(low) - k - 1
                while j >= 0 and start > 0 and lower[start - 1] == low[j]:
                    start, j = start - 1, j - 1
                yield start, end

    def _extend_back(self, text: str, start: int) -> int:
        for pattern in reversed(self.before):
            m = pattern.search(text, max(0, start - _ESCAPE_WINDOW), start)
            if m is None:
                break
            start = m.start()
        return start


def _widen_base64(text: str, start: int, end: int) -> tuple[int, int]:
    """A base64 match grown to its whole base64 word (its neighbours carry secret bits too)."""
    while start > 0 and _B64_CHARS.match(text, start - 1):
        start -= 1
    while end < len(text) and _B64_CHARS.match(text, end):
        end += 1
    return start, end


@functools.lru_cache(maxsize=64)
def _finder(secret: str) -> _Finder:
    return _Finder(secret)


class Redactor:
    """Replaces every recognisable form of its secrets in a text with ``***``.

    Also hides credential-looking tokens after ``Bearer`` / ``Basic`` (any owner). Cheap to
    build (patterns are compiled once per secret) and safe to share.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = {s for s in secrets if s and len(s) >= MIN_SECRET and s != "EMPTY"}
        self.secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))
        self._finders = [_finder(s) for s in self.secrets]

    def __repr__(self) -> str:
        return f"Redactor({len(self.secrets)} secret(s))"

    def redact(self, text: str) -> str:
        """``text`` with every found secret (and credential-looking auth token) as ``***``."""
        if not text:
            return text
        lower = text.lower()
        plain = len(lower) == len(text) and _ESCAPES.search(text) is None
        spans: list[tuple[int, int]] = []
        if "bearer" in lower or "basic" in lower:
            spans += [m.span(1) for m in _AUTH_TOKEN.finditer(text)]
        for finder in self._finders:
            spans.extend(finder.spans(text, lower, plain))
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0
        cur_start, cur_end = spans[0]
        for start, end in spans[1:]:
            if start <= cur_end:
                cur_end = max(cur_end, end)
                continue
            out += [text[pos:cur_start], MASK]
            pos, cur_start, cur_end = cur_end, start, end
        out += [text[pos:cur_start], MASK, text[cur_end:]]
        return "".join(out)

    def redact_optional(self, text: str | None) -> str | None:
        return None if text is None else self.redact(text)


# ---------------------------------------------------------------- structured values

SECRET_FIELD = re.compile(r"api[-_]?key|token|secret|passw(?:or)?d|authorization|cookie|credential",
                          re.IGNORECASE)


def mask_secret_fields(value: Any) -> Any:
    """``value`` (JSON-like data) with every string under a secret-looking key (``api_key``,
    ``X-Api-Key``, ``Authorization``, ``access_token``, ``password`` ...; :data:`SECRET_FIELD`),
    at any depth, as ``***``. Numbers stay (``max_tokens: 512`` is not a secret).

    >>> mask_secret_fields({"extra_headers": {"X-Api-Key": "k1"}, "max_tokens": 9, "user": "u"})
    {'extra_headers': {'X-Api-Key': '***'}, 'max_tokens': 9, 'user': 'u'}
    """
    return _walk(value, False)


def secret_field_values(value: Any) -> list[str]:
    """The strings :func:`mask_secret_fields` would mask (secrets to redact from texts)."""
    found: list[str] = []
    _walk(value, False, found)
    return found


def _walk(value: Any, secret: bool, found: list[str] | None = None) -> Any:
    if isinstance(value, str):
        if secret and found is not None:
            found.append(value)
        return MASK if secret else value
    if isinstance(value, Mapping):
        return {k: _walk(v, secret or (isinstance(k, str) and bool(SECRET_FIELD.search(k))), found)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, secret, found) for v in value]
    return value


def redact_strings(value: Any, redactor: Redactor) -> Any:
    """``value`` (JSON-like data) with ``redactor`` run over every string in it, keys included."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, Mapping):
        return {(redactor.redact(k) if isinstance(k, str) else k): redact_strings(v, redactor)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_strings(v, redactor) for v in value]
    return value
