"""Task configuration: what to evaluate, against which endpoint, and how.

``TaskConfig`` accepts EvalScope's field names (``model``, ``api_url``, ``datasets``,
``dataset_args``, ``eval_batch_size``, ``judge``, ...) so an existing config carries over;
foreign spellings are translated in ``compat.py`` before validation. Pydantic does every
check: an unknown key in any block is its ``extra_forbidden`` error, shown with a did-you-mean
(``format_validation_error``); the checks across fields are model validators. Every API key
is one type, ``ApiKey`` (``$NAME`` expanded, printed as ``**********``, saved as ``***`` or its
``$NAME``; ``keys.py``); ``secrets`` and ``redacted`` walk a model's fields for them.

The judge block lives in ``judgeconfig.py`` and the base every block shares in
``configbase.py``; their public names are re-exported here (``from groundscope.config import
JudgeConfig`` keeps working, as EvalScope's ``TaskConfig`` import does).
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from groundscope import compat
from groundscope.bounds import MAX_SEED, MAX_SUBSETS, check_limit
from groundscope.configbase import MAX_RPM, MAX_TPM, EvalScopeName, StrictModel, check_generation_config
from groundscope.configfile import read_config_file
from groundscope.constants import EvalTypeName, ModelAPI
from groundscope.defaults import (
    DEFAULT_ANSWERS_MODEL,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RATE_LIMIT_BUDGET,
    DEFAULT_RETRY_BASE_DELAY,
    DEFAULT_RETRY_MAX_DELAY,
    DEFAULT_TIMEOUT,
)
from groundscope.errors import ConfigError
from groundscope.judgeconfig import (
    GroundingConfig,
    GroundingMetric,
    JudgeConfig,
    JudgeModel,
    JudgeModels,
    check_judge_urls,
)
from groundscope.keys import Secret, redacted, secret_values
from groundscope.media import PYAV_HINT, MediaSettings, have_pyav
from groundscope.pricing import MAX_PRICED_MODELS, Price
from groundscope.sharding import parse_shard

__all__ = ["DatasetArgs", "GroundingConfig", "GroundingMetric", "JudgeConfig", "JudgeModel",
           "JudgeModels", "SimulatorArgs", "TaskConfig", "check_generation_config",
           "format_validation_error", "load_config"]


class DatasetArgs(StrictModel):
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


class SimulatorArgs(StrictModel):
    """Behaviour of the built-in offline model used by ``eval_type='mock'``."""

    accuracy: float = Field(default=0.8, ge=0.0, le=1.0)
    latency_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    judge_noise: float = Field(default=0.0, ge=0.0, le=1.0)  # share of flipped mock verdicts
    truth: str | None = None  # ground-truth file of the grounding mode (simulator/grounding.py)
    api: ModelAPI = "openai_api"  # the API a mock run speaks to its simulator (it serves all)
    # a provider's limits, answered with 429s and x-ratelimit-* headers (simulator/limits.py)
    rpm: int | None = Field(default=None, ge=1, le=MAX_RPM)
    tpm: int | None = Field(default=None, ge=1, le=MAX_TPM)
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000)


class TaskConfig(StrictModel):
    """Everything one evaluation run needs. See the README for each field.

    Every number is bounded here, so a value at the edge (``limit: 0``, ``seed: -1``,
    ``timeout: .inf``, ``repeats: 1e9``) is a one-line error naming the field before any
    request: ``limit`` follows ``bounds.check_limit``; seeds are numpy's 0..2**32-1.
    """

    model: str = "groundscope-sim"
    model_id: str | None = None
    api_url: str | None = None
    api_key: Secret | None = None
    eval_type: Annotated[EvalTypeName, EvalScopeName] = "openai_api"
    # an answers file joined by sample id (answers/); implies eval_type answers
    answers: str | None = Field(default=None, min_length=1, max_length=4096)
    datasets: list[str] = Field(default_factory=list, min_length=1)
    dataset_args: dict[str, DatasetArgs] = Field(default_factory=dict)
    limit: int | float | None = None
    eval_batch_size: int = Field(default=8, ge=1, le=4096)
    rpm: int | None = Field(default=None, ge=1, le=MAX_RPM)  # the model endpoint's requests
    tpm: int | None = Field(default=None, ge=1, le=MAX_TPM)  # and tokens a minute (None: no limit)
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
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=86_400.0)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=100)
    retry_base_delay: float = Field(default=DEFAULT_RETRY_BASE_DELAY, ge=0.0, le=3600.0)
    retry_max_delay: float = Field(default=DEFAULT_RETRY_MAX_DELAY, ge=0.0, le=3600.0)
    # seconds a rate-limited (429) request is retried for, past max_retries (client/retry.py)
    rate_limit_budget: float = Field(default=DEFAULT_RATE_LIMIT_BUDGET, ge=0.0, le=86_400.0)
    max_image_pixels: int = Field(default=DEFAULT_MAX_PIXELS, ge=1, le=2**31 - 1)
    # what the endpoint accepts (media/settings.py): a video as N frames (0: the video itself),
    # at video_fps (else evenly); images downscaled to a side / bytes; audio converted to wav
    # (None: on for eval_type openai_api, whose chat API takes only wav and mp3)
    video_frames: int = Field(default=0, ge=0, le=64)
    video_fps: float | None = Field(default=None, gt=0, le=60.0)
    max_image_side: int | None = Field(default=None, ge=64, le=65_536)
    max_image_bytes: int | None = Field(default=None, ge=1024, le=DEFAULT_MAX_BYTES)
    audio_transcode: bool | None = None
    # local media are read only inside the dataset's folder, the working directory and these
    media_roots: list[str] = Field(default_factory=list)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1024, le=1024**3)
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=1024, le=2**31 - 1)
    judge_concurrency: int | None = Field(default=None, ge=1, le=4096)
    max_media_per_record: int = Field(default=64, ge=1, le=1024)
    max_error_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    simulator: SimulatorArgs = Field(default_factory=SimulatorArgs)
    pricing: dict[str, Price] = Field(default_factory=dict, max_length=MAX_PRICED_MODELS)
    shard: str | None = None  # "K/N": this run asks the K-th of N parts (sharding.py)
    # scale-out (docs/scale-out.md): "ray" runs the samples on Ray actors (groundscope[ray]);
    # ray_address: an existing cluster (None: a local Ray); workers: None = one per cluster CPU
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = Field(default=None, min_length=1, max_length=1024)
    workers: int | None = Field(default=None, ge=1, le=1024)

    @model_validator(mode="wrap")
    @classmethod
    def _unknown_keys(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """An unknown key, in any block, is the one-line ``ConfigError`` ``load_config`` gives
        (``TaskConfig(...)`` in code says the same); other errors stay pydantic's."""
        try:
            return handler(data)
        except ValidationError as err:
            if any(e["type"] == "extra_forbidden" for e in err.errors()):
                raise ConfigError(format_validation_error(err)) from None
            raise

    @model_validator(mode="before")
    @classmethod
    def _answers_defaults(cls, data: Any) -> Any:
        """An answers file implies ``eval_type: answers``, whose model name defaults to
        ``answers`` (the name the reports give the answers)."""
        if not isinstance(data, dict):
            return data
        if data.get("answers") is not None and data.get("eval_type") is None:
            data = {**data, "eval_type": "answers"}
        if data.get("eval_type") == "answers" and data.get("model") is None:
            data = {**data, "model": DEFAULT_ANSWERS_MODEL}
        return data

    @model_validator(mode="after")
    def _across_fields(self) -> TaskConfig:
        _cross_check(self)
        return self

    def media_settings(self) -> MediaSettings:
        """The media conversions of this run (``audio_transcode`` resolved by eval_type)."""
        transcode = self.eval_type == "openai_api" if self.audio_transcode is None else self.audio_transcode
        return MediaSettings(video_frames=self.video_frames, video_fps=self.video_fps,
                             max_image_side=self.max_image_side,
                             max_image_bytes=self.max_image_bytes, audio_transcode=transcode)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, v: Any) -> int | float | None:
        return check_limit(v)

    @field_validator("shard")
    @classmethod
    def _shard(cls, v: str | None) -> str | None:
        return None if v is None else "{}/{}".format(*parse_shard(v))

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
        return check_generation_config(v)

    @property
    def model_name(self) -> str:
        """The name shown in reports and used for output folders: ``model_id``, by default
        the model's last path part, as EvalScope's (``Qwen/Qwen2.5-VL`` -> ``Qwen2.5-VL``)."""
        return self.model_id or compat.default_model_id(self.model)

    def redacted(self) -> dict[str, Any]:
        """The config as JSON-able data with every secret replaced by ``***``; URLs without
        user-info and with secret-looking query values as ``***`` (``redaction.redact_url``)."""
        return redacted(self)

    def secrets(self) -> list[str]:
        """Every secret value in this config: API keys (after ``$NAME`` expansion) and the
        credentials URLs carry, the model's and every judge's (for redaction)."""
        return secret_values(self)


def _did_you_mean(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _element(tp: Any) -> Any:
    """``tp`` without ``Annotated``/``None``; a list's or dict's element type."""
    while get_origin(tp) in (Annotated, Union, types.UnionType, list, dict):
        args = [a for a in get_args(tp) if a is not type(None)]
        tp = args[0] if get_origin(tp) in (Annotated, Union, types.UnionType) else args[-1]
    return tp


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model that validated the block at ``loc`` (a path from ``TaskConfig``)."""
    tp: Any = TaskConfig
    for part in loc:
        if isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = _element(tp.model_fields[part].annotation)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _where(loc: tuple[str | int, ...]) -> str:
    """``("judge", "models", 0, "api_key")`` -> ``judge.models[0].api_key``; ``config`` for ()."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    return text or "config"


def format_validation_error(err: ValidationError) -> str:
    """One line: an unknown key (the shallowest, in any block) with a did-you-mean among its
    block's fields, else the first error's field path, its problem and the value given."""
    errors = err.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        loc = min(unknown, key=lambda e: len(e["loc"]))["loc"]
        key, where = str(loc[-1]), _where(loc[:-1])
        if not loc[:-1] and key in compat.UNSUPPORTED_TASK_KEYS:
            return f"config: {key!r} {compat.UNSUPPORTED_TASK_KEYS[key]}"
        model = _model_at(loc[:-1])
        return f"{where}: unknown key {key!r}{_did_you_mean(key, model.model_fields if model else [])}"
    first = errors[0]
    msg = " ".join(first["msg"].removeprefix("Value error, ").split())
    msg = re.sub(r" or instance of \w+$", "", msg)  # a file has no classes: "a valid dictionary"
    value = first.get("input")
    got = ""
    if first["type"] != "value_error" and isinstance(value, int | float | str) and \
            not isinstance(value, bool):
        text = repr(value)
        got = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{_where(first['loc'])}: {msg}{got}{more}"


def load_config(source: TaskConfig | Mapping[str, Any] | str | Path) -> TaskConfig:
    """Build a ``TaskConfig`` from a config object, a dict, or a YAML/JSON file path.

    Raises ``ConfigError`` with a one-line message naming the offending key.
    """
    if isinstance(source, TaskConfig):
        return source  # validated, cross-checks included, when it was built
    if isinstance(source, str | Path):
        data = read_config_file(source)
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        raise ConfigError(f"cannot build a TaskConfig from {type(source).__name__}")
    try:
        return TaskConfig.model_validate(compat.translate_task_config(data))
    except ValidationError as err:
        raise ConfigError(format_validation_error(err)) from None


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
    if cfg.answers is not None or cfg.eval_type == "answers":
        _check_answers(cfg)
    if cfg.eval_type not in ("mock", "answers") and not cfg.api_url:
        raise ConfigError(f"api_url: required for eval_type {cfg.eval_type} (or use --eval-type mock)")
    if cfg.eval_type not in ("mock", "answers") and cfg.api_url:
        from groundscope.client.apis import wire_api

        wire_api(cfg.eval_type).endpoint(cfg.api_url, cfg.api_key)  # a ConfigError now
    if cfg.judge is not None and cfg.judge.strategy in {"llm", "llm_recall"} and not cfg.judge.models:
        raise ConfigError(f"judge.models: strategy {cfg.judge.strategy!r} needs at least one model")
    if cfg.judge is not None:
        check_judge_urls(cfg.judge, cfg.eval_type)
    if (cfg.video_frames or cfg.audio_transcode) and not have_pyav():
        flag = "video_frames" if cfg.video_frames else "audio_transcode"
        raise ConfigError(f"{flag}: needs PyAV, which is not installed: {PYAV_HINT}")


def _check_answers(cfg: TaskConfig) -> None:
    """``eval_type answers`` (implied by ``answers``): no endpoint; the model name defaults to
    ``answers``; one answer per sample unless an answers file numbers its repeats."""
    if cfg.answers is not None and cfg.eval_type != "answers":
        raise ConfigError(f"answers: an answers file needs eval_type answers, not {cfg.eval_type}")
    if cfg.executor == "ray":
        raise ConfigError("executor: ray does not run eval_type answers (nothing to scale out); "
                          "use the local executor")
    if cfg.repeats > 1 and cfg.answers is None:
        raise ConfigError("repeats: a record holds one answer; give an answers file with a "
                          "'repeat' field to grade several")
