"""Requests per step of a run, counted sample by sample: exact for the evaluated model, upper
bounds for the judge steps, read off the scorers' code paths (``scoring/judged.py``,
``scoring/grounding.py``, ``scoring/consistency.py``).

Per sample and repeat, with J judge models (``judge.models``), G grounding models
(``judge.grounding.models``, else the judge models), V ``votes`` and K ``max_claims``:

============= ====================================================================
model         1 (exact; transport retries of 429s / 5xx not counted)
correctness   J, for a free-form sample with a reference (strategy ``llm``; a
              multiple-choice sample is matched by its letter: 0), or any sample
              with a reference whose ROUGE-L recall the judge may re-check
              (``llm_recall``); an empty answer makes none
claims        1 (the first grounding model), for a sample with an image or video
verification  K x V per grounding model, for the same samples (an answer's first K
              claims are verified, each by every model V times); with
              ``verify: batch``, V per grounding model (one request per answer and
              vote), and "with repairs" adds the per-claim fallback of a batch that
              still breaks its contract after its repairs: K x V x (1 + R)
completeness  1 (the first grounding model), for a record with 1..``max_elements``
              expected elements
equivalence   per paraphrase group (subset, ``group``, repeat) of n samples, with
              m = min(n, ``max_group_size``): m(m-1)/2 answer pairs, plus for the m
              members with most references the sum of min(references, 16)
              (answer-vs-reference checks); none when m < 2
============= ====================================================================

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

from groundscope.bounds import MAX_REFERENCES
from groundscope.config import JudgeModel, TaskConfig
from groundscope.estimate.tokens import CHARS_PER_TOKEN, TokenCounter, completion_cap
from groundscope.scoring import Scorer
from groundscope.scoring.consistency import ConsistencyScorer
from groundscope.scoring.grounding import (
    CompletenessScorer,
    GroundingScorer,
    grounding_models,
    grounding_options,
    visual_media,
)
from groundscope.scoring.grounding_prompt import (
    claims_messages,
    completeness_messages,
    equivalence_messages,
    verify_batch_messages,
    verify_messages,
)
from groundscope.scoring.judge import judge_ids
from groundscope.scoring.judge_prompt import judge_messages
from groundscope.scoring.judged import JudgedAccuracy, RecallScorer
from groundscope.types import AnswerKind, Sample
from groundscope.usage import STEPS, step_of

ASSUMED_ANSWER_TOKENS = 256
CORRECTNESS = step_of("judge")  # the steps are named as ``summary.usage`` names them


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
class DatasetSteps:
    """Which judge steps a dataset's scorers take."""

    judged: bool = False
    recall: bool = False
    grounding: bool = False
    completeness: bool = False
    consistency: bool = False


class Steps:
    """The rows of a run, filled one sample at a time (see the module docstring)."""

    def __init__(self, cfg: TaskConfig, counter: TokenCounter) -> None:
        self.cfg, self.counter = cfg, counter
        api = cfg.simulator.api if cfg.eval_type == "mock" else cfg.eval_type
        cap = completion_cap(cfg.generation_config, api)
        self.answer = cap or ASSUMED_ANSWER_TOKENS
        self.model = StepRow("model", cfg.model, cfg.model, True, 0, cap)
        self._rows: dict[tuple[str, int], StepRow] = {}
        judge = cfg.judge
        self._opts = grounding_options(judge)
        self._judges = list(judge.models) if judge else []
        self._grounders = grounding_models(judge)
        self._repairs = judge.max_repairs if judge else 0
        self._g_repairs = self._repairs if self._opts.max_repairs is None \
            else self._opts.max_repairs
        self._groups: dict[tuple[str, str], list[tuple[str, int]]] = {}

    def rows(self) -> list[StepRow]:
        judged = sorted(self._rows.items(), key=lambda kv: (STEPS.index(kv[0][0]), kv[0][1]))
        return [self.model, *(row for _, row in judged)]

    def for_dataset(self, scorers: Sequence[Scorer]) -> DatasetSteps:
        """The judge steps of a dataset's scorers; each gets its rows, if only to show 0."""
        steps = DatasetSteps(judged=any(isinstance(s, JudgedAccuracy) for s in scorers),
                             recall=any(isinstance(s, RecallScorer) for s in scorers),
                             grounding=any(isinstance(s, GroundingScorer) for s in scorers),
                             completeness=any(isinstance(s, CompletenessScorer) for s in scorers),
                             consistency=any(isinstance(s, ConsistencyScorer) for s in scorers))
        for step, on, models in ((CORRECTNESS, steps.judged or steps.recall, self._judges),
                                 ("claims", steps.grounding, self._grounders[:1]),
                                 ("verification", steps.grounding, self._grounders),
                                 ("completeness", steps.completeness, self._grounders[:1]),
                                 ("equivalence", steps.consistency, self._grounders[:1])):
            for i in range(len(models) if on else 0):
                self._row(step, i)
        return steps

    def _row(self, step: str, i: int) -> StepRow:
        row = self._rows.get((step, i))
        if row is None:
            grounding = step != CORRECTNESS
            models: list[JudgeModel] = self._grounders if grounding else self._judges
            m = models[i]
            row = StepRow(step, judge_ids(models)[i], m.model_id, False,
                          self._g_repairs if grounding else self._repairs,
                          completion_cap(m.generation_config, m.eval_type))
            self._rows[(step, i)] = row
        return row

    def sample(self, subset: str, sample: Sample, steps: DatasetSteps) -> None:
        """Count one sample's requests (every repeat)."""
        r, prompt, opts = self.cfg.repeats, self.counter.prompt, self._opts
        if self.cfg.eval_type != "answers":  # answers are read, not asked
            self.model.add(r, prompt(sample.messages, tally=True))
        referenced = any(t.strip() for t in sample.target)
        free = sample.answer_kind is AnswerKind.FREE
        if referenced and (steps.recall or (steps.judged and free)) and self.cfg.judge:
            tokens = prompt(judge_messages(sample, "", multimodal=self.cfg.judge.multimodal))
            for i in range(len(self._judges)):
                self._row(CORRECTNESS, i).add(r, tokens + self.answer)
        visual = visual_media(sample)
        if steps.grounding and visual:
            self._row("claims", 0).add(r, prompt(claims_messages(sample.question, "")) + self.answer)
            claim = math.ceil(opts.max_claim_chars / CHARS_PER_TOKEN)
            single = prompt(verify_messages("", visual)) + claim
            batch = prompt(verify_batch_messages([""] * opts.max_claims, visual)) \
                + opts.max_claims * claim
            for i in range(len(self._grounders)):
                row = self._row("verification", i)
                if opts.verify == "batch":
                    row.add(r * opts.votes, batch)
                    row.fallback += r * opts.votes * opts.max_claims
                else:
                    row.add(r * opts.max_claims * opts.votes, single)
        elements = [str(e) for e in sample.metadata.get("elements") or ()]
        if steps.completeness and 1 <= len(elements) <= opts.max_elements:
            tokens = prompt(completeness_messages("", elements)) + self.answer
            self._row("completeness", 0).add(r, tokens)
        group = sample.metadata.get("group")
        if steps.consistency and group is not None and str(group) != "":
            refs = len(dict.fromkeys(t for t in sample.target if t.strip()))
            members = self._groups.setdefault((subset, str(group)), [])
            members.append((sample.question, min(refs, MAX_REFERENCES)))

    def finish_groups(self, steps: DatasetSteps) -> None:
        """Count a dataset's equivalence requests, once all its groups are known."""
        if steps.consistency:
            for members in self._groups.values():
                m = min(len(members), self._opts.max_group_size)
                if m < 2:
                    continue
                refs = sorted((n for _, n in members), reverse=True)[:m]
                requests = (m * (m - 1) // 2 + sum(refs)) * self.cfg.repeats
                tokens = self.counter.prompt(equivalence_messages(members[0][0], "", ""))
                self._row("equivalence", 0).add(requests, tokens + 2 * self.answer)
        self._groups.clear()
