"""Constants under EvalScope's import path (``from groundscope.constants import EvalType``)."""

from enum import StrEnum

__all__ = ["EvalType", "JudgeStrategy"]


class EvalType(StrEnum):
    """Where the evaluated model runs (``TaskConfig.eval_type``)."""

    OPENAI_API = "openai_api"
    SERVICE = "openai_api"  # EvalScope's older name for the same thing
    ANTHROPIC_API = "anthropic_api"  # the Anthropic Messages API
    OPENAI_RESPONSES_API = "openai_responses_api"  # the OpenAI Responses API
    MOCK = "mock"  # the built-in offline simulator


class JudgeStrategy(StrEnum):
    """``judge.strategy`` values."""

    AUTO = "auto"
    RULE = "rule"
    LLM = "llm"
    LLM_RECALL = "llm_recall"
