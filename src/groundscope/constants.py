"""Constants under EvalScope's import path (``from groundscope.constants import EvalType``).

The ``Literal`` types are the one source: ``TaskConfig`` validates with them and the enums
are built from them (``typing.get_args``).
"""

from enum import StrEnum
from typing import Literal, get_args

__all__ = ["EvalType", "EvalTypeName", "JudgeStrategy", "JudgeStrategyName", "ModelAPI"]

# The model APIs (client/apis.py): the evaluated model's and each judge model's ``eval_type``.
ModelAPI = Literal["openai_api", "anthropic_api", "openai_responses_api"]
# Where the evaluated model runs (``TaskConfig.eval_type``): an API, ``mock`` (the built-in
# offline simulator) or ``answers`` (answers read from the records or an answers file, no model).
EvalTypeName = Literal[ModelAPI, "mock", "answers"]
# ``judge.strategy`` values.
JudgeStrategyName = Literal["auto", "rule", "llm", "llm_recall"]


def _members(names: object) -> dict[str, str]:
    return {str(v).upper(): str(v) for v in get_args(names)}


# SERVICE: EvalScope's older name for OPENAI_API
EvalType = StrEnum("EvalType", {**_members(EvalTypeName), "SERVICE": "openai_api"})  # type: ignore[misc]
EvalType.__doc__ = "Where the evaluated model runs (``TaskConfig.eval_type``)."
JudgeStrategy = StrEnum("JudgeStrategy", _members(JudgeStrategyName))  # type: ignore[misc]
JudgeStrategy.__doc__ = "``judge.strategy`` values."
