"""The judge block of a task config: ``judge={...}`` (``JudgeConfig``), its models
(``JudgeModel``) and its grounding block (``GroundingConfig``); pydantic, every number bounded.
``groundscope.config`` re-exports them (``from groundscope.config import JudgeConfig``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from groundscope import compat
from groundscope.bounds import MAX_JUDGE_MODELS
from groundscope.configbase import MAX_RPM, MAX_TPM, EvalScopeName, StrictModel, check_generation_config
from groundscope.constants import JudgeStrategyName, ModelAPI
from groundscope.errors import ConfigError
from groundscope.keys import Secret, secret_values


class JudgeModel(StrictModel):
    """One judge endpoint; ``eval_type`` names its API (as EvalScope's judge entries do)."""

    model_id: str
    api_url: str
    api_key: Secret | None = None
    eval_type: Annotated[ModelAPI, EvalScopeName] = "openai_api"
    generation_config: dict[str, Any] = Field(default_factory=dict)
    rpm: int | None = Field(default=None, ge=1, le=MAX_RPM)  # its provider's limits (None:
    tpm: int | None = Field(default=None, ge=1, le=MAX_TPM)  # none); see client/ratelimit.py

    def secrets(self) -> list[str]:
        """Its API key and the credentials its URL carries (for redaction)."""
        return secret_values(self)

    @field_validator("generation_config")
    @classmethod
    def _storable(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_generation_config(v)


GroundingMetric = Literal["grounding", "completeness", "consistency"]
# ``models``: one model (a mapping) or a list of them
JudgeModels = Annotated[list[JudgeModel],
                        BeforeValidator(lambda v: [v] if isinstance(v, Mapping) else v),
                        Field(max_length=MAX_JUDGE_MODELS)]


class GroundingConfig(StrictModel):
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

    ``verify`` says how claims are verified: ``per_claim`` (default: one request per claim,
    vote and model) or ``batch`` (one request per answer, vote and model, replying with an
    ordered verdict list; a batch that still breaks its contract after its repairs is
    verified per claim for that answer and counted; ``scoring/verification.py``).
    """

    metrics: list[GroundingMetric] = Field(
        default_factory=lambda: ["grounding", "completeness", "consistency"])
    models: JudgeModels = Field(default_factory=list)
    votes: int = Field(default=1, ge=1, le=15)
    vote_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    not_determinable: Literal["unsupported", "excluded", "supported"] = "unsupported"
    max_repairs: int | None = Field(default=None, ge=0, le=10)
    max_claims: int = Field(default=32, ge=1, le=1024)
    max_claim_chars: int = Field(default=500, ge=16, le=100_000)
    max_elements: int = Field(default=64, ge=1, le=1024)
    max_group_size: int = Field(default=16, ge=2, le=256)
    verify: Literal["per_claim", "batch"] = "per_claim"

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return compat.renamed_key(data, "max_retries", "max_repairs", "judge.grounding")


class JudgeConfig(StrictModel):
    """``judge={...}``: how free-form answers are judged (README: LLM judge).

    A judge reply longer than ``max_reply_chars`` is not parsed: it counts as a broken
    reply (a repair turn, which quotes only its first ``max_reply_chars`` characters).
    """

    strategy: JudgeStrategyName = "auto"
    models: JudgeModels = Field(default_factory=list)
    multimodal: bool = False
    max_repairs: int = Field(default=2, ge=0, le=10)
    max_reply_chars: int = Field(default=262_144, ge=1024, le=16 << 20)
    human_label_field: str = "human_label"
    grounding: GroundingConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        # ``max_retries`` meant these repair turns here and transport retries in the task
        # config: one name, two meanings. The judge's is ``max_repairs`` now.
        return compat.renamed_key(data, "max_retries", "max_repairs", "judge")

    def all_models(self) -> list[JudgeModel]:
        """The judge models and the grounding block's own models (for secrets and URL checks)."""
        return [*self.models, *(self.grounding.models if self.grounding else [])]


def check_judge_urls(judge: JudgeConfig, eval_type: str) -> None:
    """A judge URL is http(s), or ``mock`` (the offline simulator) in an ``eval_type=mock`` or
    ``answers`` run (the latter starts a judge-only simulator);
    it does not carry credentials (user:password@) and an API key at once."""
    from urllib.parse import urlsplit

    from groundscope.client.apis import wire_api

    own = judge.grounding.models if judge.grounding else []
    named = [(f"judge.models[{i}]", m) for i, m in enumerate(judge.models)]
    named += [(f"judge.grounding.models[{i}]", m) for i, m in enumerate(own)]
    for name, m in named:
        where = f"{name}.api_url"
        if m.api_url == "mock":
            if eval_type not in ("mock", "answers"):
                raise ConfigError(f"{where}: 'mock' (the offline simulator) needs eval_type mock "
                                  "or answers")
            continue
        parts = urlsplit(m.api_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{where}: must be an http(s) URL, or 'mock' with eval_type mock")
        try:
            wire_api(m.eval_type).endpoint(m.api_url, m.api_key)
        except ConfigError as exc:
            raise ConfigError(f"{name}.{exc}") from None
