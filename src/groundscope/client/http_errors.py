"""Error responses of OpenAI-compatible servers -> groundscope's ModelError tree.

Pure functions: the human message of an error body (OpenAI, vLLM, FastAPI shapes), the
retryable / non-retryable split by status, ``Retry-After`` parsing (bounded:
``client/ratelimit.py``), and the refusal kinds (``context_length``, ``content_filter``,
``insufficient_quota``: a 429 for a spent quota or spend limit, which waiting never clears,
so it is not retried). No header or key is ever quoted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from groundscope.client.ratelimit import retry_after as header_retry_after
from groundscope.errors import ModelError, ResponseError, RetryableError

_MAX_ERROR_CHARS = 500
_CONTEXT_RE = re.compile(
    r"context[ _]length|maximum context|context window|too many tokens|prompt is too long"
    r"|max_model_len|maximum (?:input|prompt) length",
    re.IGNORECASE,
)
_FILTER_RE = re.compile(r"content[ _]?filter|content management policy|safety system", re.I)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
QUOTA_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted",
                         "organization_spend_limit_exceeded", "project_spend_limit_exceeded",
                         "organization_usage_limit_exceeded", "billing_hard_limit_reached"})


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
    """``Retry-After`` in seconds: delta-seconds or an HTTP date (``None`` if absent/bad:
    over 64 characters, negative, not finite)."""
    if value is None:
        return None
    return header_retry_after({"retry-after": value}, time.time() if now is None else now)


def is_quota(payload: Any) -> bool:
    """Whether an error body says a quota or spend limit is spent (OpenAI: ``type`` or
    ``code`` ``insufficient_quota`` and its newer codes), not that a rate was exceeded."""
    err = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(err, Mapping):
        return False
    return any(isinstance(v, str) and v in QUOTA_CODES for v in (err.get("type"), err.get("code")))


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
    if status == 429 and is_quota(payload):
        return ResponseError(f"{text} (a spent quota, not a rate limit: not retried; check the "
                             "account's billing or limits)", kind="insufficient_quota",
                             status=status)
    if status in _RETRYABLE_STATUS or status >= 500:
        return RetryableError(
            text, kind=f"http_{status}", status=status, retry_after=parse_retry_after(retry_after)
        )
    return ResponseError(text, kind=error_kind(payload, message, f"http_{status}"), status=status)
