"""What a Ray run sends to its workers, checked before any request: Ray must be installed,
and the config goes out with every secret as the ``$NAME`` it was read from.

Anything passed to a Ray actor (arguments, ``runtime_env``) is serialised into Ray's object
store and may be logged, so a key never travels as a value: each worker resolves ``$NAME``
from its own environment (set it on every node: ``ray start`` inherits the shell's
environment; KubeRay: the pod's ``env`` from a Kubernetes Secret). A key given literally,
credentials in a URL, or a secret-looking ``generation_config`` value is refused for
``executor: ray`` with one line naming the field.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import orjson
from pydantic import SecretStr

from groundscope.config import TaskConfig
from groundscope.errors import ConfigError
from groundscope.keys import FieldPath, secret_fields, secret_values
from groundscope.redaction import Redactor, url_secrets

RAY_INSTALL = "pip install -e '.[ray]' in the groundscope clone (the extra, installed from source)"
_NOT_SECRET = ("", "EMPTY")  # no key, or EvalScope's "no key" placeholder


def require_ray() -> None:
    """A ``ConfigError`` saying how to install Ray, when it is not importable."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"executor: 'ray' needs Ray, which is not installed here: {RAY_INSTALL}")


def _where(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def shipped_config(cfg: TaskConfig) -> dict[str, Any]:
    """``cfg`` as data for the workers (``config.load_config`` reads it back there): every API
    key as its ``$NAME`` reference. A secret that has no reference is a ``ConfigError``."""
    data = cfg.model_dump(mode="json")
    for path, value in secret_fields(cfg):
        if isinstance(value, SecretStr):
            ref = getattr(value, "ref", None)
            raw = value.get_secret_value()
            if ref is None and raw not in _NOT_SECRET:
                raise ConfigError(
                    f"{_where(path)}: with executor ray a key must be given as $NAME (an environment "
                    "variable set on every Ray node), never as a value: values pass through "
                    "Ray's object store")
            shipped: str | None = ref or raw
        elif url_secrets(value):
            raise ConfigError(f"{_where(path)}: with executor ray the URL may not carry credentials "
                              "(they would pass through Ray's object store); give api_key: $NAME")
        else:
            continue
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = shipped
    text = orjson.dumps(data).decode()
    if Redactor(secret_values(cfg)).redact(text) != text:  # e.g. a token in generation_config
        raise ConfigError("generation_config: holds a secret-looking value; with executor ray it "
                          "would pass through Ray's object store (send it from an endpoint-side "
                          "setting, or run with executor local)")
    return data
