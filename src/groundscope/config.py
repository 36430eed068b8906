"""Task configuration: what to evaluate, against which endpoint, and how.

``TaskConfig`` accepts EvalScope's field names (``model``, ``api_url``, ``datasets``,
``dataset_args``, ``eval_batch_size``, ``judge``, ...) so an existing config carries over;
foreign spellings are translated in ``compat.py`` before validation. Unknown keys are an
error with a did-you-mean. API keys are ``SecretStr``: they print as ``**********``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator

from groundscope import compat
from groundscope.dataset.readers import DEFAULT_MAX_RECORD_BYTES
from groundscope.errors import ConfigError
from groundscope.media import DEFAULT_MAX_PIXELS

_ENV_REF = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class DatasetArgs(_Strict):
    """``dataset_args[<name>]``: where a dataset lives and how to turn it into prompts."""

    local_path: str | None = None
    subset_list: list[str] | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    metric_list: list[str] | None = None
    shuffle: bool = False
    shuffle_choices: bool = False
    few_shot_num: int = 0

    @field_validator("few_shot_num")
    @classmethod
    def _zero_shot_only(cls, v: int) -> int:
        if v != 0:
            raise ValueError("custom multimodal datasets are zero-shot; few_shot_num must be 0")
        return v

    @field_validator("metric_list")
    @classmethod
    def _known_metrics(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        out = []
        for name in v:
            canonical = compat.metric_name(name)
            if canonical is None:
                raise ValueError(
                    f"unknown metric {name!r}{_did_you_mean(name, compat.METRIC_NAMES)}; "
                    f"known: {', '.join(sorted(set(compat.METRIC_NAMES.values())))}"
                )
            out.append(canonical)
        return out


class JudgeModel(_Strict):
    """One judge endpoint."""

    model_id: str
    api_url: str
    api_key: SecretStr | None = None
    generation_config: dict[str, Any] = Field(default_factory=dict)


GroundingMetric = Literal["grounding", "completeness", "consistency"]


class GroundingConfig(_Strict):
    """``judge.grounding={...}``: the judge-driven grounding metrics (SPEC section 9).

    ``metrics`` are added to every free-form dataset's metrics (they can also be listed in
    ``dataset_args.<name>.metric_list`` without this block). ``models`` overrides the judge
    block's models for these steps. Each claim is verified ``votes`` times by every model
    (votes after the first use ``vote_temperature`` and a per-vote ``seed``); the verdict is
    the strict majority, else ``not_determinable``. ``not_determinable`` says how such a
    claim counts: ``unsupported`` (default, conservative: in the denominator, not
    supported), ``excluded`` (left out of the denominator) or ``supported``.
    """

    metrics: list[GroundingMetric] = Field(
        default_factory=lambda: ["grounding", "completeness", "consistency"])
    models: list[JudgeModel] = Field(default_factory=list)
    votes: int = Field(default=1, ge=1, le=15)
    vote_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    not_determinable: Literal["unsupported", "excluded", "supported"] = "unsupported"
    max_retries: int | None = Field(default=None, ge=0)

    @field_validator("models", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, Mapping) else v


class JudgeConfig(_Strict):
    """``judge={...}``: how free-form answers are judged (SPEC section 8)."""

    strategy: Literal["auto", "rule", "llm", "llm_recall"] = "auto"
    models: list[JudgeModel] = Field(default_factory=list)
    multimodal: bool = False
    max_retries: int = Field(default=2, ge=0)
    human_label_field: str = "human_label"
    grounding: GroundingConfig | None = None

    @field_validator("models", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            return [v]
        return v

    def all_models(self) -> list[JudgeModel]:
        """The judge models and the grounding block's own models (for secrets and URL checks)."""
        return [*self.models, *(self.grounding.models if self.grounding else [])]


class SimulatorArgs(_Strict):
    """Behaviour of the built-in offline model used by ``eval_type='mock'``."""

    accuracy: float = Field(default=0.8, ge=0.0, le=1.0)
    latency_ms: float = Field(default=0.0, ge=0.0)
    seed: int = 0
    judge_noise: float = Field(default=0.0, ge=0.0, le=1.0)  # share of flipped mock verdicts
    truth: str | None = None  # ground-truth file of the grounding mode (client/sim_grounding.py)


class TaskConfig(_Strict):
    """Everything one evaluation run needs. See the README for each field."""

    # api_key paths given as $NAME / ${NAME} -> that reference (saved instead of ***)
    _env_refs: dict[str, str] = PrivateAttr(default_factory=dict)

    model: str = "groundscope-sim"
    model_id: str | None = None
    api_url: str | None = None
    api_key: SecretStr | None = None
    eval_type: Literal["openai_api", "mock"] = "openai_api"
    datasets: list[str] = Field(default_factory=list, min_length=1)
    dataset_args: dict[str, DatasetArgs] = Field(default_factory=dict)
    limit: int | float | None = None
    eval_batch_size: int = Field(default=8, ge=1)
    generation_config: dict[str, Any] = Field(default_factory=dict)
    judge: JudgeConfig | None = None
    work_dir: str = "./outputs"
    no_timestamp: bool = False
    use_cache: str | None = None
    repeats: int = Field(default=1, ge=1)
    seed: int = 42
    ignore_errors: bool = False
    strict: bool = False
    debug: bool = False
    timeout: float = Field(default=300.0, gt=0)
    max_retries: int = Field(default=5, ge=0)
    retry_base_delay: float = Field(default=0.5, ge=0.0)
    retry_max_delay: float = Field(default=30.0, ge=0.0)
    max_image_pixels: int = Field(default=DEFAULT_MAX_PIXELS, ge=1)
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1)
    judge_concurrency: int | None = Field(default=None, ge=1)
    max_error_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    simulator: SimulatorArgs = Field(default_factory=SimulatorArgs)

    @field_validator("limit")
    @classmethod
    def _limit(cls, v: int | float | None) -> int | float | None:
        if v is None:
            return v
        if isinstance(v, float) and v.is_integer() and v >= 1:
            return int(v)
        if isinstance(v, float) and not 0.0 < v < 1.0:
            raise ValueError("a fractional limit must be in (0, 1); use an integer for a count")
        if isinstance(v, int) and v < 0:
            raise ValueError("limit must be >= 0")
        return v

    @property
    def model_name(self) -> str:
        """The name shown in reports and used for output folders."""
        return self.model_id or self.model

    def redacted(self) -> dict[str, Any]:
        """The config as JSON-able data with every secret replaced by ``***``."""
        data = self.model_dump(mode="json")
        refs = self._env_refs
        if self.api_key is not None:
            data["api_key"] = refs.get("api_key", "***")
        if self.judge is not None:
            blocks = [("judge", data["judge"])]
            if data["judge"].get("grounding"):
                blocks.append(("judge.grounding", data["judge"]["grounding"]))
            for where, block in blocks:
                for i, m in enumerate(block.get("models", [])):
                    if m.get("api_key") is not None:
                        m["api_key"] = refs.get(f"{where}.models[{i}].api_key", "***")
        return data

    def secrets(self) -> list[str]:
        """Every secret value in this config (for log/output scrubbing)."""
        found = []
        if self.api_key is not None:
            found.append(self.api_key.get_secret_value())
        if self.judge is not None:
            found += [m.api_key.get_secret_value() for m in self.judge.all_models() if m.api_key]
        return [s for s in found if s and s != "EMPTY"]


def expand_env(value: str, where: str) -> str:
    """Expand a value that is exactly ``$NAME`` or ``${NAME}`` from the environment."""
    m = _ENV_REF.match(value.strip())
    if not m:
        return value
    name = m.group(1) or m.group(2)
    if name not in os.environ:
        raise ConfigError(f"{where}: environment variable {name} is not set")
    return os.environ[name]


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_keys(data: Mapping[str, Any], model: type[BaseModel], where: str) -> None:
    allowed = set(model.model_fields)
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r}{_did_you_mean(key, allowed)}")


def _expand_secrets(data: dict[str, Any], refs: dict[str, str]) -> dict[str, Any]:
    """``data`` with ``$NAME`` API keys expanded; ``refs`` gets each expanded key's path and
    reference (a variable's name is no secret: saved configs keep it, so a later ``score``
    finds the key again)."""
    if isinstance(data.get("api_key"), str):
        data["api_key"] = _expand_key(data["api_key"], "api_key", refs)
    judge = data.get("judge")
    if isinstance(judge, Mapping):
        judge = _expand_model_keys(judge, "judge", refs)
        if isinstance(judge.get("grounding"), Mapping):
            judge["grounding"] = _expand_model_keys(judge["grounding"], "judge.grounding", refs)
        data["judge"] = judge
    return data


def _expand_key(value: str, where: str, refs: dict[str, str]) -> str:
    expanded = expand_env(value, where)
    if _ENV_REF.match(value.strip()):
        refs[where] = value.strip()
    return expanded


def _expand_model_keys(block: Mapping[str, Any], where: str, refs: dict[str, str]) -> dict[str, Any]:
    """``block`` with ``$ENV`` API keys of its ``models`` (one or a list) expanded."""
    block = dict(block)
    models = block.get("models")
    many = models if isinstance(models, list) else [models] if models else []
    fixed = []
    for i, m in enumerate(many):
        m = dict(m) if isinstance(m, Mapping) else m
        if isinstance(m, dict) and isinstance(m.get("api_key"), str):
            m["api_key"] = _expand_key(m["api_key"], f"{where}.models[{i}].api_key", refs)
        fixed.append(m)
    if models is not None:
        block["models"] = fixed
    return block


def _format_validation_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "config"
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def load_config(source: TaskConfig | Mapping[str, Any] | str | Path) -> TaskConfig:
    """Build a ``TaskConfig`` from a config object, a dict, or a YAML/JSON file path.

    Raises ``ConfigError`` with a one-line message naming the offending key.
    """
    if isinstance(source, TaskConfig):
        _cross_check(source)  # a config built in code gets the same checks as a dict
        return source
    if isinstance(source, str | Path):
        data = _read_config_file(Path(source))
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        raise ConfigError(f"cannot build a TaskConfig from {type(source).__name__}")
    data = compat.translate_task_config(data)
    _check_keys(data, TaskConfig, "config")
    for name, args in (data.get("dataset_args") or {}).items():
        if isinstance(args, Mapping):
            _check_keys(args, DatasetArgs, f"dataset_args.{name}")
    if isinstance(data.get("judge"), Mapping):
        _check_keys(data["judge"], JudgeConfig, "judge")
        if isinstance(data["judge"].get("grounding"), Mapping):
            _check_keys(data["judge"]["grounding"], GroundingConfig, "judge.grounding")
    refs: dict[str, str] = {}
    data = _expand_secrets(data, refs)
    try:
        cfg = TaskConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err)) from None
    cfg._env_refs.update(refs)
    _cross_check(cfg)
    return cfg


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise ConfigError(f"{path}: cannot parse config: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must hold a mapping of keys")
    return data


def _cross_check(cfg: TaskConfig) -> None:
    from groundscope.dataset import FORMATS

    for name in cfg.datasets:
        if name not in FORMATS:
            raise ConfigError(
                f"datasets: unknown dataset {name!r}{_did_you_mean(name, FORMATS)}; "
                f"known: {', '.join(sorted(FORMATS))}"
            )
    for name in cfg.dataset_args:
        if name not in cfg.datasets:
            raise ConfigError(
                f"dataset_args.{name}: not among --datasets ({', '.join(cfg.datasets)})"
                f"{_did_you_mean(name, cfg.datasets)}"
            )
    if cfg.eval_type == "openai_api" and not cfg.api_url:
        raise ConfigError("api_url: required for eval_type openai_api (or use --eval-type mock)")
    if cfg.eval_type == "openai_api" and cfg.api_url:
        from groundscope.client.openai import normalise_url

        normalise_url(cfg.api_url)  # a ConfigError now, before a run directory is made
    if cfg.judge is not None and cfg.judge.strategy in {"llm", "llm_recall"} and not cfg.judge.models:
        raise ConfigError(f"judge.models: strategy {cfg.judge.strategy!r} needs at least one model")
    if cfg.judge is not None:
        _check_judge_urls(cfg.judge, cfg.eval_type)


def _check_judge_urls(judge: JudgeConfig, eval_type: str) -> None:
    """A judge URL is http(s), or ``mock`` (the offline simulator) in an ``eval_type=mock`` run."""
    from urllib.parse import urlsplit

    own = judge.grounding.models if judge.grounding else []
    named = [(f"judge.models[{i}]", m) for i, m in enumerate(judge.models)]
    named += [(f"judge.grounding.models[{i}]", m) for i, m in enumerate(own)]
    for name, m in named:
        where = f"{name}.api_url"
        if m.api_url == "mock":
            if eval_type != "mock":
                raise ConfigError(f"{where}: 'mock' (the offline simulator) needs eval_type mock")
            continue
        parts = urlsplit(m.api_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{where}: must be an http(s) URL, or 'mock' with eval_type mock")
