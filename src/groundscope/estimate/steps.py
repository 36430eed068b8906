"""Requests per step of a run, counted sample by sample: exact for the evaluated model (1 per
sample and repeat; transport retries of 429s / 5xx not counted), upper bounds for the judge
steps, as the scorers declare them beside the code that makes the requests
(``scoring/requests.py``: ``request_steps`` / ``request_bounds``, and ``group_bounds`` for
consistency's groups; the formulas are in the scorers' docstrings: ``scoring/judged.py``,
``scoring/grounding.py``, ``scoring/consistency.py``). This module only sums them.

A reply that breaks its contract gets up to R repair turns (``judge.max_repairs``; for the
grounding steps ``judge.grounding.max_repairs`` when set): "with repairs" is requests x
(1 + R). Identical requests are answered from the run's cache, so a run may send fewer.

Judge prompt tokens are those of the real prompts (``scoring/judge_prompt.py``,
``scoring/grounding_prompt.py``, media included where they carry them) with the answer left
empty, plus the answer at the evaluated model's completion cap (without one:
:data:`ASSUMED_ANSWER_TOKENS`) for each answer a prompt quotes, and a claim at
``max_claim_chars`` / 4 tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groundscope.config import TaskConfig
from groundscope.estimate.tokens import TokenCounter, completion_cap
from groundscope.scoring import Scorer
from groundscope.scoring.judge import judge_ids
from groundscope.scoring.requests import GroupBounded, JudgeStep, RequestBound, RequestBounded
from groundscope.tokens import CHARS_PER_TOKEN
from groundscope.types import Message, Sample
from groundscope.usage import STEPS

ASSUMED_ANSWER_TOKENS = 256


@dataclass
class StepRow:
    """One step's requests to one model: ``model`` is its display id, ``model_id`` the id sent
    (and priced); ``exact`` for the evaluated model, else an upper bound; ``cap`` the
    completion tokens one request may produce (None: no cap is sent)."""

    step: str
    model: str
    model_id: str
    exact: bool
    repairs: int
    cap: int | None
    requests: int = 0
    prompt_tokens: int = 0
    fallback: int = 0  # requests made only after a batch broke its contract (verify: batch)

    @property
    def requests_with_repairs(self) -> int:
        return (self.requests + self.fallback) * (1 + self.repairs)

    @property
    def completion_tokens(self) -> int | None:
        """The completion bound: requests x cap (None without a cap)."""
        return None if self.cap is None else self.requests * self.cap

    def add(self, requests: int, tokens_each: int) -> None:
        self.requests += requests
        self.prompt_tokens += requests * tokens_each


@dataclass(frozen=True, slots=True)
class Tokens:
    """The token rules the scorers' bounds are counted with (``scoring.requests.TokenEstimate``)."""

    counter: TokenCounter
    answer: int

    def prompt(self, messages: Sequence[Message]) -> int:
        return self.counter.prompt(messages)

    def chars(self, n: int) -> int:
        return math.ceil(n / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class DatasetSteps:
    """A dataset's scorers that declare judge requests (those of groups apart)."""

    bounded: tuple[RequestBounded, ...] = ()
    grouped: tuple[GroupBounded, ...] = ()


class Steps:
    """The rows of a run, filled one sample at a time (see the module docstring)."""

    def __init__(self, cfg: TaskConfig, counter: TokenCounter) -> None:
        self.cfg, self.counter = cfg, counter
        api = cfg.simulator.api if cfg.eval_type == "mock" else cfg.eval_type
        cap = completion_cap(cfg.generation_config, api)
        self.tokens = Tokens(counter, cap or ASSUMED_ANSWER_TOKENS)
        self.model = StepRow("model", cfg.model, cfg.model, True, 0, cap)
        self._rows: dict[tuple[str, int], StepRow] = {}
        self._steps: dict[str, JudgeStep] = {}
        self._groups: dict[tuple[int, str, str], list[Any]] = {}

    def rows(self) -> list[StepRow]:
        judged = sorted(self._rows.items(), key=lambda kv: (STEPS.index(kv[0][0]), kv[0][1]))
        return [self.model, *(row for _, row in judged)]

    def for_dataset(self, scorers: Sequence[Scorer]) -> DatasetSteps:
        """The judge steps of a dataset's scorers; each gets its rows, if only to show 0."""
        steps = DatasetSteps(tuple(s for s in scorers if isinstance(s, RequestBounded)),
                             tuple(s for s in scorers if isinstance(s, GroupBounded)))
        for scorer in steps.bounded:
            for step in scorer.request_steps():
                self._steps.setdefault(step.step, step)
                for i in range(len(step.models)):
                    self._row(step.step, i)
        return steps

    def _row(self, step: str, i: int) -> StepRow:
        row = self._rows.get((step, i))
        if row is None:
            models = self._steps[step].models
            m = models[i]
            row = StepRow(step, judge_ids(models)[i], m.model_id, False, self._steps[step].repairs,
                          completion_cap(m.generation_config, m.eval_type))
            self._rows[(step, i)] = row
        return row

    def _add(self, bounds: Sequence[RequestBound], repeats: int) -> None:
        for b in bounds:
            row = self._row(b.step, b.model)
            row.add(repeats * b.requests, b.tokens_each)
            row.fallback += repeats * b.fallback

    def sample(self, subset: str, sample: Sample, steps: DatasetSteps) -> None:
        """Count one sample's requests (every repeat)."""
        r = self.cfg.repeats
        if self.cfg.eval_type != "answers":  # answers are read, not asked
            self.model.add(r, self.counter.prompt(sample.messages, tally=True))
        declared = (b for s in steps.bounded for b in s.request_bounds(sample, self.tokens))
        self._add(list(dict.fromkeys(declared)), r)  # declared twice: one set (the cache)
        for i, scorer in enumerate(steps.grouped):
            member = scorer.group_member(sample)
            if member is not None:
                self._groups.setdefault((i, subset, member[0]), []).append(member[1])

    def finish_groups(self, steps: DatasetSteps) -> None:
        """Count a dataset's group requests, once all its groups are known."""
        bounds: dict[tuple[str, str, RequestBound], None] = {}
        for (i, subset, group), members in self._groups.items():
            for b in steps.grouped[i].group_bounds(members, self.tokens):
                bounds[(subset, group, b)] = None  # two equal scorers: one set of requests
        self._add([b for *_, b in bounds], self.cfg.repeats)
        self._groups.clear()
