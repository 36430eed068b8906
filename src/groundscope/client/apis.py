"""The model APIs by name (``TaskConfig.eval_type``, a judge model's ``eval_type``). Each
wire format's module is imported when its API is first asked for: a run on one API does not
import the other two (the Anthropic and Responses modules: ~13 ms of a ~0.65 s start-up).

>>> wire_api("anthropic_api").name
'anthropic_api'
"""

from __future__ import annotations

import importlib

from groundscope.client.wire import WireAPI

# name -> (module, the WireAPI's name in it)
_MODULES: dict[str, tuple[str, str]] = {
    "openai_api": ("groundscope.client.openai", "CHAT"),
    "anthropic_api": ("groundscope.client.anthropic", "MESSAGES"),
    "openai_responses_api": ("groundscope.client.responses", "RESPONSES"),
}
API_NAMES = tuple(_MODULES)


def wire_api(name: str) -> WireAPI:
    """The wire API called ``name`` (a ``KeyError`` for another name: config validates it)."""
    module, attr = _MODULES[name]
    api: WireAPI = getattr(importlib.import_module(module), attr)
    return api
