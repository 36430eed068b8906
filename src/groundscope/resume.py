"""Resume checks: what of a cached run (``--use-cache RUN_DIR``) may be reused.

A saved prediction is reused only when its request hash matches (same prompt, media,
model and generation config); its saved reviews only when, in addition, what scoring
reads of the sample (references, choices, metadata) is unchanged. A resume under a changed
config is reported once, naming the keys that changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from groundscope.errors import ConfigError, StoreError
from groundscope.rundir import read_run_config

log = logging.getLogger("groundscope")

# Keys about where and how a run executes: changing them never changes a result.
_EXECUTION_KEYS = frozenset({
    "use_cache", "work_dir", "no_timestamp", "debug", "schema_version", "format", "strict",
    "ignore_errors", "max_error_rate", "timeout", "max_retries", "retry_base_delay",
    "retry_max_delay", "rate_limit_budget", "eval_batch_size", "judge_concurrency", "api_url",
    "api_key",
    "media_roots",
    "max_response_bytes",
    "executor", "ray_address", "workers",  # local or Ray: the same results (scaleout/)
})


def scoring_view(sample_json: Mapping[str, Any]) -> bytes:
    """What scoring reads of a saved sample besides the answer, JSON-normalised.

    >>> scoring_view({"origin": "a:1", "target": ("x",)}) == scoring_view({"target": ["x"]})
    True
    """
    view = {k: v for k, v in sample_json.items() if k not in ("origin", "messages")}
    return orjson.dumps(view, option=orjson.OPT_SORT_KEYS, default=str)


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Top-level keys whose value differs between a cached run's config and its resume's.

    >>> config_changes({"seed": 1, "timeout": 5, "limit": 3}, {"seed": 2, "timeout": 9})
    ['seed']
    """
    common = old.keys() & new.keys()
    return sorted(k for k in common if k not in _EXECUTION_KEYS and old[k] != new[k])


def warn_config_changes(run_dir: Path, new: Mapping[str, Any]) -> None:
    """Log one warning when ``run_dir`` was written under a different config."""
    path = run_dir / "config.json"
    if not path.is_file():
        return
    try:
        old = read_run_config(run_dir)
    except (ConfigError, StoreError):
        log.warning("%s: unreadable; cannot tell whether the config changed", path)
        return
    changed = config_changes(old, new)
    if changed:
        log.warning("resuming %s with a changed config: %s; samples whose request or "
                    "reference changed are asked or scored again, never mixed",
                    run_dir, ", ".join(changed))


def check_same_shard(run_dir: Path, shard: str | None) -> None:
    """``--use-cache`` resumes a shard (``--shard K/N``) as that same shard, and a whole run
    as a whole run: a ``ConfigError`` (before anything is written) when the saved run's
    ``shard`` differs, since its directory would then hold two parts under one name."""
    if not (run_dir / "config.json").is_file():
        return
    saved = read_run_config(run_dir).get("shard")
    if saved != shard:
        was = f"shard {saved}" if saved else "a whole run (no --shard)"
        now = f"--shard {shard}" if shard else "without --shard"
        raise ConfigError(f"use_cache: {run_dir} is {was}; resume it as that, not {now}")
