"""The model APIs by name (``TaskConfig.eval_type``, a judge model's ``eval_type``).

>>> wire_api("anthropic_api").name
'anthropic_api'
"""

from __future__ import annotations

from groundscope.client.anthropic import MESSAGES
from groundscope.client.openai import CHAT
from groundscope.client.responses import RESPONSES
from groundscope.client.wire import WireAPI

WIRE_APIS: dict[str, WireAPI] = {api.name: api for api in (CHAT, MESSAGES, RESPONSES)}
API_NAMES = tuple(WIRE_APIS)


def wire_api(name: str) -> WireAPI:
    """The wire API called ``name`` (a ``KeyError`` for another name: config validates it)."""
    return WIRE_APIS[name]
