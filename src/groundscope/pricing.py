"""Prices of tokens, and what a number of tokens costs.

``pricing`` in a config maps a model id (as sent to the API: the evaluated model or a judge's
``model_id``) to a :class:`Price`, in currency units per million tokens. A model without a
price has no cost (``None``), never a guessed one.

    >>> p = Price(input=2.5, output=10.0)
    >>> round(p.cost(prompt_tokens=1_000_000, completion_tokens=100_000), 6)
    3.5
    >>> round(Price(input=2.0, output=8.0, cached_input=0.5).cost(1000, 0, cached_tokens=400), 6)
    0.0014
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_PRICED_MODELS = 256
_MAX_PRICE = 1e6  # per million tokens: far above any real price, still finite


class Price(BaseModel):
    """Input (prompt) and output (completion, reasoning included) prices per million tokens;
    ``cached_input``, when given, is the price of prompt tokens the provider served from its
    prompt cache (else they cost ``input``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0.0, le=_MAX_PRICE, allow_inf_nan=False)
    output: float = Field(ge=0.0, le=_MAX_PRICE, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0.0, le=_MAX_PRICE, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        """``input: true`` is a slip, not a price of 1 (pydantic reads a bool as 0 / 1)."""
        if isinstance(value, bool):
            raise ValueError(f"a number is expected, not {str(value).lower()}")
        return value

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """The cost of a number of tokens (``cached_tokens`` is part of ``prompt_tokens``)."""
        cached = min(max(cached_tokens, 0), prompt_tokens) if self.cached_input is not None else 0
        fresh = prompt_tokens - cached
        total = fresh * self.input + completion_tokens * self.output
        if cached:
            total += cached * (self.cached_input or 0.0)
        return total / 1_000_000
