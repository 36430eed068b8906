"""Task configuration: what to evaluate, against which endpoint, and how.

``TaskConfig`` accepts EvalScope's field names (``model``, ``api_url``, ``datasets``,
``dataset_args``, ``eval_batch_size``, ``judge``, ...) so an existing config carries over;
foreign spellings are translated in ``compat.py`` before validation. Unknown keys are an
error with a did-you-mean. API keys are ``SecretStr``: they print as ``**********``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator

from groundscope import compat
from groundscope.bounds import MAX_JUDGE_MODELS, MAX_SEED, MAX_SUBSETS, check_limit
from groundscope.client.limits import DEFAULT_MAX_RESPONSE_BYTES
from groundscope.configfile import check_json_value, read_config_file
from groundscope.dataset.readers import DEFAULT_MAX_RECORD_BYTES
from groundscope.errors import ConfigError
from groundscope.media import DEFAULT_MAX_PIXELS
from groundscope.redaction import redact_url, url_secrets

_ENV_REF = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")
# The model APIs (client/apis.py): the evaluated model's and each judge model's ``eval_type``.
ModelAPI = Literal["openai_api", "anthropic_api", "openai_responses_api"]


class _Strict(BaseModel):
    # allow_inf_nan=False: ``timeout: .inf`` or ``--timeout nan`` is an error, not a hang
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False)


class DatasetArgs(_Strict):
    """``dataset_args[<name>]``: where a dataset lives and how to turn it into prompts."""

    local_path: str | None = None
    subset_list: list[str] | None = Field(default=None, max_length=MAX_SUBSETS)
    system_prompt: str | None = None
    prompt_template: str | None = None
    metric_list: list[str] | None = Field(default=None, max_length=32)
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
    """One judge endpoint; ``eval_type`` names its API (as EvalScope's judge entries do)."""

    model_id: str
    api_url: str
    api_key: SecretStr | None = None
    eval_type: ModelAPI = "openai_api"
    generation_config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("eval_type", mode="before")
    @classmethod
    def _eval_type(cls, v: Any) -> Any:
        return compat.EVAL_TYPES.get(v, v) if isinstance(v, str) else v

    def secrets(self) -> list[str]:
        """Its API key and the credentials its URL carries (for redaction)."""
        return _secrets(self.api_url, self.api_key)

    @field_validator("generation_config")
    @classmethod
    def _storable(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_json_value(v)


GroundingMetric = Literal["grounding", "completeness", "consistency"]


class GroundingConfig(_Strict):
    """``judge.grounding={...}``: the judge-driven grounding metrics (README: Grounding metrics).

    ``metrics`` are added to every free-form dataset's metrics (they can also be listed in
    ``dataset_args.<name>.metric_list`` without this block). ``models`` overrides the judge
    block's models for these steps. Each claim is verified ``votes`` times by every model
    (votes after the first use ``vote_temperature`` and a per-vote ``seed``); the verdict is
    the strict majority, else ``not_determinable``. ``not_determinable`` says how such a
    claim counts: ``unsupported`` (default, conservative: in the denominator, not
    supported), ``excluded`` (left out of the denominator) or ``supported``.

    Bounds on the judge fan-out (untrusted answers and judge replies; the report shows each
    and every count it cut): an answer's first ``max_claims`` claims are verified, the rest
    are counted, not sent; a claim longer than ``max_claim_chars`` is invalid: counted,
    never sent; a record with more than ``max_elements`` expected elements is not scored
    for completeness; a paraphrase group is scored on its first ``max_group_size``
    answered members (by sample id), so it costs at most n(n-1)/2 equivalence requests.
    """

    metrics: list[GroundingMetric] = Field(
        default_factory=lambda: ["grounding", "completeness", "consistency"])
    models: list[JudgeModel] = Field(default_factory=list, max_length=MAX_JUDGE_MODELS)
    votes: int = Field(default=1, ge=1, le=15)
    vote_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    not_determinable: Literal["unsupported", "excluded", "supported"] = "unsupported"
    max_retries: int | None = Field(default=None, ge=0, le=10)
    max_claims: int = Field(default=32, ge=1, le=1024)
    max_claim_chars: int = Field(default=500, ge=16, le=100_000)
    max_elements: int = Field(default=64, ge=1, le=1024)
    max_group_size: int = Field(default=16, ge=2, le=256)

    @field_validator("models", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, Mapping) else v


class JudgeConfig(_Strict):
    """``judge={...}``: how free-form answers are judged (README: LLM judge).

    A judge reply longer than ``max_reply_chars`` is not parsed: it counts as a broken
    reply (a repair turn, which quotes only its first ``max_reply_chars`` characters).
    """

    strategy: Literal["auto", "rule", "llm", "llm_recall"] = "auto"
    models: list[JudgeModel] = Field(default_factory=list, max_length=MAX_JUDGE_MODELS)
    multimodal: bool = False
    max_retries: int = Field(default=2, ge=0, le=10)
    max_reply_chars: int = Field(default=262_144, ge=1024, le=16 << 20)
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
    latency_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    judge_noise: float = Field(default=0.0, ge=0.0, le=1.0)  # share of flipped mock verdicts
    truth: str | None = None  # ground-truth file of the grounding mode (simulator/grounding.py)
    api: ModelAPI = "openai_api"  # the API a mock run speaks to its simulator (it serves all)


class TaskConfig(_Strict):
    """Everything one evaluation run needs. See the README for each field.

    Every number is bounded here, so a value at the edge (``limit: 0``, ``seed: -1``,
    ``timeout: .inf``, ``repeats: 1e9``) is a one-line error naming the field before any
    request: ``limit`` follows ``bounds.check_limit``; seeds are numpy's 0..2**32-1.
    """

    # api_key paths given as $NAME / ${NAME} -> that reference (saved instead of ***)
    _env_refs: dict[str, str] = PrivateAttr(default_factory=dict)

    model: str = "groundscope-sim"
    model_id: str | None = None
    api_url: str | None = None
    api_key: SecretStr | None = None
    eval_type: Literal["openai_api", "anthropic_api", "openai_responses_api", "mock"] = "openai_api"
    datasets: list[str] = Field(default_factory=list, min_length=1)
    dataset_args: dict[str, DatasetArgs] = Field(default_factory=dict)
    limit: int | float | None = None
    eval_batch_size: int = Field(default=8, ge=1, le=4096)
    generation_config: dict[str, Any] = Field(default_factory=dict)
    judge: JudgeConfig | None = None
    work_dir: str = "./outputs"
    no_timestamp: bool = False
    use_cache: str | None = None
    repeats: int = Field(default=1, ge=1, le=1000)
    seed: int = Field(default=42, ge=0, le=MAX_SEED)
    ignore_errors: bool = False
    strict: bool = False
    debug: bool = False
    timeout: float = Field(default=300.0, gt=0)
    max_retries: int = Field(default=5, ge=0)
    retry_base_delay: float = Field(default=0.5, ge=0.0)
    retry_max_delay: float = Field(default=30.0, ge=0.0)
    max_image_pixels: int = Field(default=DEFAULT_MAX_PIXELS, ge=1)
    # local media are read only inside the dataset's folder, the working directory and these
    media_roots: list[str] = Field(default_factory=list)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024, le=1024**3)
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1024, le=2**31 - 1)
    judge_concurrency: int | None = Field(default=None, ge=1)
    timeout: float = Field(default=300.0, gt=0, le=86_400.0)
    max_retries: int = Field(default=5, ge=0, le=100)
    retry_base_delay: float = Field(default=0.5, ge=0.0, le=3600.0)
    retry_max_delay: float = Field(default=30.0, ge=0.0, le=3600.0)
    max_image_pixels: int = Field(default=DEFAULT_MAX_PIXELS, ge=1, le=2**31 - 1)
    max_media_per_record: int = Field(default=64, ge=1, le=1024)
    judge_concurrency: int | None = Field(default=None, ge=1, le=4096)
    max_error_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    simulator: SimulatorArgs = Field(default_factory=SimulatorArgs)

    @pydantic.model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:  # TaskConfig(...) in code: the same one-line errors
        if isinstance(data, Mapping):
            _check_keys(data, cls, "config")
        return data

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, v: Any) -> int | float | None:
        return check_limit(v)

    @field_validator("datasets")
    @classmethod
    def _once_each(cls, v: list[str]) -> list[str]:
        twice = sorted({name for name in v if v.count(name) > 1})
        if twice:
            raise ValueError(f"{twice[0]!r} is listed more than once")
        return v

    @field_validator("media_roots")
    @classmethod
    def _media_roots(cls, v: list[str]) -> list[str]:
        if any(not d.strip() for d in v):
            raise ValueError("an empty directory name")
        return v

    @field_validator("generation_config")
    @classmethod
    def _storable(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_json_value(v)

    @property
    def model_name(self) -> str:
        """The name shown in reports and used for output folders: ``model_id``, by default
        the model's last path part, as EvalScope's (``Qwen/Qwen2.5-VL`` -> ``Qwen2.5-VL``)."""
        return self.model_id or compat.default_model_id(self.model)

    def redacted(self) -> dict[str, Any]:
        """The config as JSON-able data with every secret replaced by ``***``; URLs without
        user-info and with secret-looking query values as ``***`` (``redaction.redact_url``)."""
        data = self.model_dump(mode="json")
        refs = self._env_refs
        if self.api_key is not None:
            data["api_key"] = refs.get("api_key", "***")
        if data.get("api_url"):
            data["api_url"] = redact_url(data["api_url"])
        if self.judge is not None:
            blocks = [("judge", data["judge"])]
            if data["judge"].get("grounding"):
                blocks.append(("judge.grounding", data["judge"]["grounding"]))
            for where, block in blocks:
                for i, m in enumerate(block.get("models", [])):
                    m["api_url"] = redact_url(m["api_url"])
                    if m.get("api_key") is not None:
                        m["api_key"] = refs.get(f"{where}.models[{i}].api_key", "***")
        return data

    def secrets(self) -> list[str]:
        """Every secret value in this config: API keys (after ``$NAME`` expansion) and the
        credentials URLs carry, the model's and every judge's (for redaction)."""
        found = _secrets(self.api_url, self.api_key)
        if self.judge is not None:
            found += [s for m in self.judge.all_models() for s in m.secrets()]
        return found


def _secrets(api_url: str | None, api_key: SecretStr | None) -> list[str]:
    found = url_secrets(api_url)
    if api_key is not None:
        found.append(api_key.get_secret_value())
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
        if model is TaskConfig and key in compat.UNSUPPORTED_TASK_KEYS:
            raise ConfigError(f"{where}: {key!r} {compat.UNSUPPORTED_TASK_KEYS[key]}")
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
    """One line: the first error's field path, its problem and the value given."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "config"
    msg = " ".join(first["msg"].removeprefix("Value error, ").split())
    value = first.get("input")
    got = ""
    if first["type"] != "value_error" and isinstance(value, int | float | str) and \
            not isinstance(value, bool):
        text = repr(value)
        got = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {msg}{got}{more}"


def load_config(source: TaskConfig | Mapping[str, Any] | str | Path) -> TaskConfig:
    """Build a ``TaskConfig`` from a config object, a dict, or a YAML/JSON file path.

    Raises ``ConfigError`` with a one-line message naming the offending key.
    """
    if isinstance(source, TaskConfig):
        _cross_check(source)  # a config built in code gets the same checks as a dict
        return source
    if isinstance(source, str | Path):
        data = read_config_file(source)
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        raise ConfigError(f"cannot build a TaskConfig from {type(source).__name__}")
    data = compat.translate_task_config(data)
    _check_keys(data, TaskConfig, "config")
    all_args = data.get("dataset_args")
    for name, args in (all_args.items() if isinstance(all_args, Mapping) else ()):
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
    if cfg.eval_type != "mock" and not cfg.api_url:
        raise ConfigError(f"api_url: required for eval_type {cfg.eval_type} (or use --eval-type mock)")
    if cfg.eval_type != "mock" and cfg.api_url:
        from groundscope.client.apis import wire_api

        wire_api(cfg.eval_type).endpoint(cfg.api_url, cfg.api_key)  # a ConfigError now
    if cfg.judge is not None and cfg.judge.strategy in {"llm", "llm_recall"} and not cfg.judge.models:
        raise ConfigError(f"judge.models: strategy {cfg.judge.strategy!r} needs at least one model")
    if cfg.judge is not None:
        _check_judge_urls(cfg.judge, cfg.eval_type)


def _check_judge_urls(judge: JudgeConfig, eval_type: str) -> None:
    """A judge URL is http(s), or ``mock`` (the offline simulator) in an ``eval_type=mock`` run;
    it does not carry credentials (user:password@) and an API key at once."""
    from urllib.parse import urlsplit

    from groundscope.client.apis import wire_api

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
        try:
            wire_api(m.eval_type).endpoint(m.api_url, m.api_key)
        except ConfigError as exc:
            raise ConfigError(f"{name}.{exc}") from None
