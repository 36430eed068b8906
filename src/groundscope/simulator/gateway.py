"""How a gateway in front of a provider passes its rate-limit headers on (``SimBehaviour.gateway``),
and the model list a gateway serves (``SimBehaviour.models``).

The simulator's limits (``limits.py``) answer as OpenAI does; a response middleware rewrites
the headers of every reply in the style of a gateway seen in the field:

``openai``      as the provider sends them (the default);
``litellm``     LiteLLM's proxy (1.108.7, its ``get_response_headers``): every provider header
                under the ``llm_provider-`` prefix, and of the rate headers only
                ``x-ratelimit-{limit,remaining}-{requests,tokens}`` also as they are (so a
                reset and a ``retry-after`` come only prefixed);
``limit_only``  ``x-ratelimit-limit-*`` and ``-remaining-*`` without a reset or a retry hint;
``on_429``      rate headers on 429s only, each saying ``x-ratelimit-remaining-requests: 0``
                (successful replies carry none: many gateways' own limiters);
``hintless``    no rate header at all, on any reply (LiteLLM's Messages route per-key 429).

With a model list, a request for another model is refused as the APIs refuse it (HTTP 404,
``model_not_found``; Anthropic's ``not_found_error``) and ``GET /v1/models`` lists the names,
so an "unknown model" can be rehearsed offline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from groundscope.simulator.wire import BadRequest

GATEWAY_STYLES = ("openai", "litellm", "limit_only", "on_429", "hintless")
PREFIX = "llm_provider-"
_RATE = ("retry-after", "x-ratelimit-")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class UnknownModel(BadRequest):
    """A request for a model the endpoint does not serve: a 404 in the API's shape."""

    status = 404


def check_model(body: Mapping[str, Any], models: Sequence[str], style: str = "openai") -> None:
    """Refuse a model outside ``models`` (an empty list serves any name): OpenAI's 404, or
    for ``style`` ``litellm`` the proxy's 400 naming ``/v1/models``."""
    name = body.get("model")
    if models and name not in models:
        if style == "litellm":
            raise BadRequest(f"Invalid model name passed in model={name}. Call `/v1/models` to "
                             "view available models", code="model_not_found", param="model")
        raise UnknownModel(f"The model `{name}` does not exist or you do not have access to it.",
                           code="model_not_found", param="model")


def model_list(models: Sequence[str], default: str) -> dict[str, Any]:
    """The ``GET /v1/models`` body: ``models``, or the one default name."""
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "groundscope-simulator"}
            for m in (models or (default,))]
    return {"object": "list", "data": data}


def _is_rate(name: str) -> bool:
    return name.lower().startswith(_RATE)


def restyle(style: str, headers: Mapping[str, str], status: int) -> dict[str, str] | None:
    """The rate headers a gateway of ``style`` sends instead of ``headers`` (None: as they
    are). Only the rate headers change; the others are the caller's to keep."""
    rate = {k: v for k, v in headers.items() if _is_rate(k)}
    if style == "on_429":
        return {**rate, "x-ratelimit-remaining-requests": "0"} if status == 429 else {}
    if style == "openai" or not rate:
        return None
    counts = {k: v for k, v in rate.items()
              if k.lower().startswith(("x-ratelimit-limit-", "x-ratelimit-remaining-"))}
    if style == "litellm":
        return {**{PREFIX + k.lower(): v for k, v in rate.items()}, **counts}
    if style == "limit_only":
        return counts
    return {}  # hintless


def gateway_middleware(style: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    """An aiohttp middleware rewriting each (not yet sent) reply's rate headers."""

    @web.middleware
    async def rewrite(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        if response.prepared:
            return response
        new = restyle(style, response.headers, response.status)
        if new is not None:
            for name in [k for k in response.headers if _is_rate(k)]:
                del response.headers[name]
            response.headers.update(new)
        return response

    return rewrite
