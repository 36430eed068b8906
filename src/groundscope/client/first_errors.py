"""What a refused request most likely means, said in its message: the errors of a wrong
address, a wrong key or a wrong model name, which a new user meets in the first minute.

Pure: the hint a 404 / 401 / 403 or an unknown-model error gets (the URL posted to; the
``/v1`` base; where the key came from, never its value; the models the endpoint offers),
the ``/v1/models`` URL beside a posted URL, and the model ids of its (bounded) answer. The
client (``client/chat.py``) asks ``/v1/models`` once, only after an unknown-model error.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from groundscope.errors import ModelError, ResponseError

MAX_MODELS_SHOWN = 20  # ids quoted from /v1/models, each cut to 80 characters
MODELS_BODY_BYTES = 1 << 20
_UNKNOWN_MODEL = re.compile(
    r"model_not_found|not_found_error.*model|\bmodel\b.{0,80}(?:does not exist|not found|"
    r"not exist|unknown|invalid|not available|not supported|no such)|(?:invalid|unknown) model"
    r"|: model: \S+$",  # Anthropic's 404: "not_found_error", message "model: <name>"
    re.IGNORECASE | re.DOTALL)
_STATUS_HINTS = {401, 403, 404}


def is_unknown_model(err: ModelError, text: str) -> bool:
    """Whether a 400 / 404 says the model name is not served (OpenAI's ``model_not_found``,
    LiteLLM's ``Invalid model name``, Anthropic's ``not_found_error: model: ...``, vLLM's
    ``The model `x` does not exist``).

    >>> [is_unknown_model(ModelError("", status=s), t) for s, t in (
    ...     (404, "HTTP 404: model: claude-x"), (400, "HTTP 400: Invalid model name passed in "
    ...     "model=x"), (404, "HTTP 404: The model `x` does not exist"), (404, "HTTP 404: Not Found"),
    ...     (401, "HTTP 401: invalid model key"))]
    [True, True, True, False, False]
    """
    return err.status in (400, 404) and bool(_UNKNOWN_MODEL.search(text[:2000]))


def wants_hint(err: ModelError, text: str) -> bool:
    """Whether ``err`` is one of the first-contact errors this module explains."""
    return isinstance(err, ResponseError) and (err.status in _STATUS_HINTS
                                               or is_unknown_model(err, text))


def models_url(posted: str) -> str | None:
    """The ``/v1/models`` route beside a posted URL (``None`` without a ``/v1`` in its path).

    >>> models_url("http://h:8/proxy/v1/chat/completions?a=1")
    'http://h:8/proxy/v1/models?a=1'
    >>> models_url("http://h:8/chat/completions") is None
    True
    """
    parts = urlsplit(posted)
    base, sep, _ = parts.path.rpartition("/v1/")
    if not sep:
        return None
    return urlunsplit((parts.scheme, parts.netloc, f"{base}/v1/models", parts.query, ""))


def model_ids(raw: bytes) -> list[str]:
    """The ids of an OpenAI-style ``{"data": [{"id": ...}]}`` list (Anthropic's has the
    same shape); empty when it is not one."""
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return []
    return [" ".join(str(m["id"]).split())[:80] for m in data
            if isinstance(m, dict) and isinstance(m.get("id"), str | int)]


def hint(err: ModelError, text: str, *, posted: str, model: str, key_source: str | None,
         offered: list[str] | None) -> str:
    """The sentence appended to a first-contact error: what was posted where, and what to
    check. ``offered`` is what ``/v1/models`` listed (None: not asked, or no such route)."""
    said = f"POST {posted}"
    if is_unknown_model(err, text):
        if offered:
            shown = ", ".join(offered[:MAX_MODELS_SHOWN])
            more = f" (+{len(offered) - MAX_MODELS_SHOWN} more)" if len(offered) > MAX_MODELS_SHOWN else ""
            return f"{said}: model {model!r} is not served there; /v1/models offers: {shown}{more}"
        return f"{said}: model {model!r} is not served there (check --model)"
    if err.status == 404:
        parts = urlsplit(posted)
        if "/v1/" not in f"{parts.path}/":
            base = urlunsplit((parts.scheme, parts.netloc, "/v1", "", ""))
            return (f"{said}: no such route; OpenAI-compatible servers serve under /v1: "
                    f"try --api-url {base}")
        return f"{said}: no such route; give the base URL ending in /v1 as --api-url"
    source = key_source or "no API key (give --api-key, or api_key: $NAME in the config)"
    verb = "rejected" if err.status == 401 else "not allowed"
    return f"{said}: the key was {verb}; it came from {source}"
