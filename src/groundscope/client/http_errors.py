"""Error responses of OpenAI-compatible servers -> groundscope's ModelError tree.

Pure functions: the human message of an error body (OpenAI, vLLM, FastAPI shapes), the
retryable / non-retryable split by status, ``Retry-After`` parsing, and the refusal kinds
(``context_length``, ``content_filter``). No header or key is ever quoted.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from groundscope.errors import ModelError, ResponseError, RetryableError

_MAX_ERROR_CHARS = 500
_CONTEXT_RE = re.compile(
    r"context[ _]length|maximum context|context window|too many tokens|prompt is too long"
    r"|max_model_len|maximum (?:input|prompt) length",
    re.IGNORECASE,
)
_FILTER_RE = re.compile(r"content[ _]?filter|content management policy|safety system", re.I)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def error_message(payload: Any) -> str:
    """The human message of an error body: OpenAI ``{"error": {...}}``, vLLM, FastAPI."""
    if isinstance(payload, Mapping):
        err = payload.get("error")
        if isinstance(err, Mapping):
            return str(err.get("message") or err.get("code") or err.get("type") or "")
        for key in ("error", "message", "detail"):
            if payload.get(key):
                value = payload[key]
                return value if isinstance(value, str) else orjson.dumps(value).decode()
        return ""
    return str(payload or "")


def error_kind(payload: Any, message: str, default: str) -> str:
    """``context_length`` / ``content_filter`` when the error says so, else ``default``."""
    code = ""
    if isinstance(payload, Mapping):
        err = payload.get("error")
        if isinstance(err, Mapping):
            code = f"{err.get('code') or ''} {err.get('type') or ''}"
        elif payload.get("code"):
            code = str(payload.get("code"))
    probe = f"{code} {message}"
    if _CONTEXT_RE.search(probe):
        return "context_length"
    if _FILTER_RE.search(probe):
        return "content_filter"
    return default


def truncate(text: str) -> str:
    """``text`` on one line, at most 500 characters."""
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (``None`` if absent/bad)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def http_error(status: int, raw: bytes, retry_after: str | None,
               redact: Callable[[str], str] = str) -> ModelError:
    """The exception for a non-200 response. Its message is the server's, passed through
    ``redact`` (the client's :class:`~groundscope.redaction.Redactor`) before it is cut to
    length, so a key the server quotes back is hidden even where the cut would split it."""
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        payload = raw.decode("utf-8", "replace")
    message = truncate(redact(error_message(payload))) or "(empty body)"
    text = f"HTTP {status}: {message}"
    if status in _RETRYABLE_STATUS or status >= 500:
        return RetryableError(
            text, kind=f"http_{status}", status=status, retry_after=parse_retry_after(retry_after)
        )
    return ResponseError(text, kind=error_kind(payload, message, f"http_{status}"), status=status)
