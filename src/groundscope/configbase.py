"""What every config block shares: a strict pydantic model (unknown keys refused, frozen, no
inf / nan, no bool for a number), EvalScope's spellings of an API read as ours, the bounds of
a provider's limits, and the check of a ``generation_config`` (``config.py``,
``judgeconfig.py``).
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo, field_validator

from groundscope import compat
from groundscope.configfile import check_json_value

MAX_RPM, MAX_TPM = 10**8, 10**12  # requests / tokens a minute

# EvalScope's spellings (``service``, ``server``, ``simulator``) read as ours (compat.EVAL_TYPES)
EvalScopeName = BeforeValidator(lambda v: compat.EVAL_TYPES.get(v, v) if isinstance(v, str) else v)


class StrictModel(BaseModel):
    # allow_inf_nan=False: ``timeout: .inf`` or ``--timeout nan`` is an error, not a hang
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``rpm: true`` is a slip, not 1 (pydantic would read a bool as 0 / 1): a number
        field takes no true / false."""
        if isinstance(value, bool) and info.field_name in cls.model_fields:
            annotation = cls.model_fields[info.field_name].annotation
            kinds = get_args(annotation) or (annotation,)
            if bool not in kinds and (int in kinds or float in kinds):
                raise ValueError(f"a number is expected, not {str(value).lower()}")
        return value


def check_generation_config(v: dict[str, Any]) -> dict[str, Any]:
    """A ``generation_config`` that can be stored and sent: JSON values, and none of the
    OpenAI SDK's request options that are not body fields (``extra_headers``,
    ``extra_query``): they would go out inside the JSON body, not as headers or query.
    ``extra_body`` is honoured (its keys are merged into the request body)."""
    for key in ("extra_headers", "extra_query"):
        if key in v:
            raise ValueError(f"{key} is not supported (it is an HTTP request option, not a "
                             "generation setting); give the endpoint's key as api_key "
                             "and its query in api_url")
    return check_json_value(v)
