"""The tool-calling keys of a chat message in a record: checked loosely, kept verbatim.

An OpenAI transcript may hold an assistant turn with ``tool_calls`` and ``tool`` messages
answering them by ``tool_call_id``; any message may carry a ``name``. They are forwarded on
the chat wire as the record gives them (EvalScope re-serialises the calls' arguments and
drops ``name``). Only their shapes are checked, each problem a ``RecordError`` naming the
field (``messages[2].tool_call_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from groundscope.dataset.base import record_error
from groundscope.types import Origin

__all__ = ["checked_tool_fields"]


def checked_tool_fields(i: int, raw: Mapping[str, Any], origin: Origin) -> dict[str, Any]:
    """The tool-calling keys of message ``i`` (``name``, ``tool_calls``, ``tool_call_id``),
    kept verbatim for the wire; their shapes are checked loosely: a ``tool`` message needs
    the ``tool_call_id`` it answers, ``tool_calls`` belong to an assistant turn and each
    needs an ``id``, and a function call (``type`` ``function``, the default) a ``function``
    with a ``name`` (``arguments``, if given, a string)."""
    out: dict[str, Any] = {}
    field = f"messages[{i}]"
    name = raw.get("name")
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise record_error(origin, f"{field}.name", "expected a non-empty string")
        out["name"] = name
    call_id = raw.get("tool_call_id")
    if raw["role"] == "tool":
        if not isinstance(call_id, str) or not call_id.strip():
            problem = "missing or empty (a tool message answers a tool call by its id)"
            raise record_error(origin, f"{field}.tool_call_id", problem)
        out["tool_call_id"] = call_id
    elif call_id is not None:
        raise record_error(origin, f"{field}.tool_call_id", "only a tool message answers a tool call")
    calls = raw.get("tool_calls")
    if calls is not None and calls != []:
        if raw["role"] != "assistant":
            raise record_error(origin, f"{field}.tool_calls", "only an assistant message makes tool calls")
        if not isinstance(calls, list):
            raise record_error(origin, f"{field}.tool_calls", f"expected a list, got {type(calls).__name__}")
        out["tool_calls"] = tuple(_tool_call(f"{field}.tool_calls[{k}]", call, origin)
                                  for k, call in enumerate(calls))
    return out


def _tool_call(field: str, call: Any, origin: Origin) -> Mapping[str, Any]:
    if not isinstance(call, dict):
        raise record_error(origin, field, f"expected an object, got {type(call).__name__}")
    if not isinstance(call.get("id"), str) or not call["id"].strip():
        raise record_error(origin, f"{field}.id", "missing or empty")
    kind = call.get("type", "function")
    if not isinstance(kind, str):
        raise record_error(origin, f"{field}.type", f"expected a string, got {type(kind).__name__}")
    if kind != "function":  # another kind of call (e.g. "custom"): its body as given
        return MappingProxyType(call)
    function = call.get("function")
    if not isinstance(function, dict):
        raise record_error(origin, f"{field}.function", "expected an object with name and arguments")
    if not isinstance(function.get("name"), str) or not function["name"].strip():
        raise record_error(origin, f"{field}.function.name", "missing or empty")
    if "arguments" in function and not isinstance(function["arguments"], str):
        raise record_error(origin, f"{field}.function.arguments",
                    "expected a string (the arguments as JSON text)")
    return MappingProxyType(call)
