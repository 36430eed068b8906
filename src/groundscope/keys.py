"""API keys and the other secrets a config holds: the key type, the one walk over a config
model that finds them, and a config's redacted form (config.json, task_config.yaml, the HTML
page, ``--dry-run``).

A key given as exactly ``$NAME`` / ``${NAME}`` is read from the environment and remembers the
name (``ApiKey.ref``), so a saved config keeps the name, never the value. The walk takes any
pydantic model (``TaskConfig``, ``JudgeModel`` ...) and finds every ``SecretStr``, every
credential-carrying URL and every secret-looking value of a ``generation_config``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, SecretStr

from groundscope.redaction import (
    Redactor,
    mask_secret_fields,
    redact_strings,
    redact_url,
    secret_field_values,
    url_secrets,
)

__all__ = ["URL_FIELDS", "ApiKey", "FieldPath", "Secret", "redacted", "saved_key", "secret_fields",
           "secret_values", "unset_keys_listed"]

_ENV_REF = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")
URL_FIELDS = frozenset({"api_url"})  # fields whose URL may carry credentials (redaction.py)


class ApiKey(SecretStr):
    """An API key: prints as ``**********``; ``ref`` is the ``$NAME`` it was read from (a
    variable's name is no secret: a saved config keeps it, so a later ``score`` finds the key)."""

    def __init__(self, secret_value: str, ref: str | None = None) -> None:
        super().__init__(secret_value)
        self.ref = ref


def _api_key(value: Any) -> Any:
    """A key given as exactly ``$NAME`` or ``${NAME}`` is read from the environment."""
    if not isinstance(value, str):
        return value
    m = _ENV_REF.match(value.strip())
    if not m:
        return ApiKey(value)
    name = m.group(1) or m.group(2)
    if name not in os.environ:
        unset = _UNSET.get()
        if unset is None:
            raise ValueError(f"environment variable {name} is not set")
        if name not in unset:
            unset.append(name)
        return ApiKey("", ref=value.strip())
    return ApiKey(os.environ[name], ref=value.strip())


_UNSET: ContextVar[list[str] | None] = ContextVar("unset_key_variables", default=None)


@contextmanager
def unset_keys_listed() -> Iterator[list[str]]:
    """Within it, a ``$NAME`` key whose variable is unset loads as an empty key and its name
    is added to the list yielded (in order, once each), instead of failing on the first:
    ``--dry-run`` estimates without keys, and a run names every missing variable at once."""
    names: list[str] = []
    token = _UNSET.set(names)
    try:
        yield names
    finally:
        _UNSET.reset(token)


Secret = Annotated[SecretStr, BeforeValidator(_api_key)]


def saved_key(value: Any) -> str | None:
    """A key as a saved config holds it, to load again: a ``$NAME`` reference whose variable
    is set here stays (expanded on load); a hidden key (``***``) or an unset variable is none."""
    if not isinstance(value, str) or value == "***":
        return None
    m = _ENV_REF.match(value.strip())
    if m and (m.group(1) or m.group(2)) not in os.environ:
        return None
    return value


FieldPath = tuple[str | int, ...]


def secret_fields(model: BaseModel, path: FieldPath = ()) -> Iterator[tuple[FieldPath, SecretStr | str]]:
    """Every API key and credential-carrying URL in ``model`` and the models inside it, with
    its path (the one walk ``secret_values`` and ``redacted`` share)."""
    for name in type(model).model_fields:
        yield from _leaves(getattr(model, name), (*path, name), url=name in URL_FIELDS)


def _leaves(value: Any, here: FieldPath, url: bool) -> Iterator[tuple[FieldPath, SecretStr | str]]:
    if isinstance(value, SecretStr) or (url and isinstance(value, str)):
        yield here, value
    elif isinstance(value, BaseModel):
        yield from secret_fields(value, here)
    elif isinstance(value, list | dict):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _leaves(item, (*here, key), url=False)


def secret_values(model: BaseModel) -> list[str]:
    """Every secret value in ``model``: keys (after ``$NAME`` expansion), URL credentials and
    the values under secret-looking keys of its generation configs."""
    found: list[str] = []
    for _, value in secret_fields(model):
        found += [value.get_secret_value()] if isinstance(value, SecretStr) else url_secrets(value)
    for block in _generation_configs(model.model_dump(mode="json")):  # e.g. a header's token
        found += secret_field_values(block)
    return [s for s in found if s and s != "EMPTY"]


def _generation_configs(data: Any) -> Iterator[Any]:
    """Every ``generation_config`` block in dumped config data (the model's, each judge's)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from [value] if key == "generation_config" else _generation_configs(value)
    elif isinstance(data, list):
        for value in data:
            yield from _generation_configs(value)


def _mask_generation_configs(data: Any) -> Any:
    """``data`` with :func:`~groundscope.redaction.mask_secret_fields` applied to every
    ``generation_config`` block in it."""
    if isinstance(data, dict):
        return {k: mask_secret_fields(v) if k == "generation_config" else _mask_generation_configs(v)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_mask_generation_configs(v) for v in data]
    return data


def redacted(model: BaseModel) -> dict[str, Any]:
    """``model`` as JSON-able data: each key as ``***`` (or the ``$NAME`` it came from), each
    URL without its credentials (``redaction.redact_url``), secret-looking generation
    settings as ``***`` and every known secret hidden from every string."""
    data = model.model_dump(mode="json")
    for path, value in secret_fields(model):
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(value, SecretStr):
            parent[path[-1]] = getattr(value, "ref", None) or "***"
        else:
            parent[path[-1]] = redact_url(value)
    # secret-looking keys in generation configs (headers, tokens) are masked whole, and every
    # known secret is hidden from every string, whatever key it sits under
    return redact_strings(_mask_generation_configs(data), Redactor(secret_values(model)))
