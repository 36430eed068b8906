"""Reading config text with bounds: a YAML/JSON config file, a JSON command-line value, a
run directory's ``config.json``.

A config is untrusted text (downloaded with a dataset, pasted from an issue). Before any of
it is used:

- at most ``MAX_CONFIG_BYTES`` (1 MiB) is read: a bigger file or flag is refused unread;
- YAML is composed into its node graph first (``yaml.SafeLoader``: no Python objects, no
  tags) and the graph is measured *as if every alias were expanded*, memoised per node, so
  measuring costs the file's size, not the expansion's. More than ``MAX_CONFIG_NODES``
  (100,000) values, nesting deeper than ``MAX_CONFIG_DEPTH`` (64) or an alias inside its
  own anchor (a cycle) is refused before a single Python object is built. A "billion
  laughs" file (nine levels of ten aliases) is 10**9 values: refused in milliseconds;
- JSON has no aliases: the parsed value is walked with the same node and depth bounds.

Every refusal is a one-line ``ConfigError`` naming the file (or flag) and what was wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from groundscope.bounds import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_NODES
from groundscope.errors import ConfigError
from groundscope.fileio import read_regular

__all__ = ["check_json_value", "parse_json_text", "read_config_file", "read_json_file"]

_INT_RANGE = (-(2**63), 2**64 - 1)  # what JSON writers (orjson) and servers take


def _read_bounded(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {what} is over {MAX_CONFIG_BYTES} bytes (1 MiB); refused")
    return data


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML (``.yaml``/``.yml``) or JSON config file as a dict, within the bounds."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    raw = _read_bounded(path, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if path.suffix.lower() in {".yaml", ".yml"}:
        data = _load_yaml(text, str(path))
    else:
        data = parse_json_text(text, str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must hold a mapping of keys")
    return data


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON file holding a mapping (a run directory's ``config.json``) as a dict, within
    the bounds (a damaged or foreign file is a one-line ``ConfigError``, never a traceback)."""
    try:  # a run directory is untrusted: a regular file only (no FIFO, device or symlink)
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read run config: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: run config is over {MAX_CONFIG_BYTES} bytes (1 MiB); refused")
    data = parse_json_text(raw.decode("utf-8", "replace"), str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a run config must hold a mapping of keys")
    return data


def parse_json_text(text: str, where: str) -> Any:
    """JSON text (a file's or a flag's, named by ``where``) parsed within the bounds."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: over {MAX_CONFIG_BYTES} characters (1 MiB); refused")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested deeper than {MAX_CONFIG_DEPTH} levels; refused") from None
    _check_json(value, where)
    return value


def _check_json(value: Any, where: str) -> None:
    problem = _json_problem(value)
    if problem:
        raise ConfigError(f"{where}: {problem}; refused")


def _json_problem(value: Any) -> str | None:
    """What makes ``value`` too big, too deep or not storable as JSON, or None."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_CONFIG_NODES:
            return f"more than {MAX_CONFIG_NODES} values"
        if depth > MAX_CONFIG_DEPTH:
            return f"nested deeper than {MAX_CONFIG_DEPTH} levels"
        if isinstance(item, int) and not isinstance(item, bool) and \
                not _INT_RANGE[0] <= item <= _INT_RANGE[1]:
            return f"the integer {item:.3g} is out of the 64-bit range"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{item} is not a finite number"
        children = item.values() if isinstance(item, dict) else \
            item if isinstance(item, list | tuple) else ()
        stack.extend((child, depth + 1) for child in children)
    return None


def check_json_value(value: Any) -> Any:
    """``value`` if it is plain, bounded JSON (finite numbers, 64-bit integers), else a
    ``ValueError`` (for pydantic validators of free-form blocks such as ``generation_config``).

    >>> check_json_value({"max_tokens": 64})
    {'max_tokens': 64}
    >>> check_json_value({"max_tokens": 10**30})
    Traceback (most recent call last):
    ...
    ValueError: the integer 1e+30 is out of the 64-bit range
    """
    problem = _json_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _load_yaml(text: str, where: str) -> Any:
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml(node, where)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}{_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested deeper than {MAX_CONFIG_DEPTH} levels; refused") from None
    finally:
        loader.dispose()


def _yaml_problem(exc: Exception) -> str:
    """``:line: problem`` of a YAML error (one line; PyYAML's own text spans several)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
    at = f":{mark.line + 1}" if mark is not None else ""
    return f"{at}: cannot parse config: {problem}"


def _children(node: Any) -> Iterator[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _check_yaml(root: Any, where: str) -> None:
    """Refuse a node graph whose alias-expanded tree is too big, too deep or cyclic.

    Sizes and depths are memoised per node (an alias is the same node object as its anchor),
    so a graph of n nodes costs O(n) to measure whatever it expands to.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = list(_children(node))
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_.discard(key)
            if size[key] > MAX_CONFIG_NODES:
                raise ConfigError(f"{where}: more than {MAX_CONFIG_NODES} values once YAML "
                                  "aliases are expanded (an alias bomb?); refused")
            if depth[key] > MAX_CONFIG_DEPTH:
                raise ConfigError(f"{where}: nested deeper than {MAX_CONFIG_DEPTH} levels; refused")
            continue
        if key in size:
            continue
        if key in open_:
            raise ConfigError(f"{where}: a YAML alias refers to its own anchor (a cycle); refused")
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
