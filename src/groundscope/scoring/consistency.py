"""Consistency: do paraphrases of one question about one image get the same answer?

A *group* is the samples of one subset that share a ``group`` id (records with the same
``group`` field, or the samples a record's ``paraphrases`` list expands into), per repeat.

Per sample, :class:`ConsistencyScorer` records a member row: the answer, its normalised form
(``scoring/normalise.py``: case, punctuation, articles, number words, yes/no forms) and the
references. When the dataset is done (``scoring/groups.py``), each group of n >= 2 answered
members is scored once:

- two answers *agree* when their normalised forms are equal; two different closed forms
  (yes / no / numbers) disagree without a call; any other pair of forms is asked of the
  judge (``{"equivalent": true|false}``, cached under ``equivalence``; one request per pair
  of distinct forms, the answers in sorted order, quoting the group's question: the one of
  its first member by sample id);
- ``consistency`` = agreeing answer pairs / all n(n-1)/2 pairs (1 when every answer agrees,
  0 when all differ) — a graded agreement rate, not the share of distinct answers;
- ``consistent_correct`` = 1 when every answer is correct, else 0, where an answer is correct
  when it agrees (by the same test) with one of its references; only for groups whose
  members all have references.

A group with fewer than two answers is ``no_answer``; a group where an equivalence check got
no usable reply is ``judge_failed``; both are excluded and counted. The group row's detail
lists each member, each compared pair and how it was decided (``normalised``, ``closed
form`` or ``judge`` with the judge's reason).

Bounds: a group is scored on its first ``max_group_size`` (``judge.grounding``, 16) answered
members by sample id; the others are counted in ``detail.members_over_limit``, so a group
costs at most 16 * 15 / 2 = 120 equivalence requests (a record with 59 paraphrases asked
1,770 before). An answer is compared with at most ``bounds.MAX_REFERENCES`` (16) distinct
references (the rest are counted in the member's ``references_over_limit``).

>>> agreement({"2": 2, "2 wheels": 1}, {("2", "2 wheels"): True})
1.0
>>> agreement({"yes": 2, "no": 1}, {("no", "yes"): False})
0.3333333333333333
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Any

from groundscope.bounds import MAX_REFERENCES
from groundscope.scoring.base import unusable
from groundscope.scoring.grounding_prompt import (
    EQUIVALENCE_SHAPE,
    equivalence_messages,
    parse_equivalence,
)
from groundscope.scoring.normalise import normalise_answer, same_answer
from groundscope.scoring.requests import JudgeStep, RequestBound, TokenEstimate
from groundscope.types import Prediction, Sample, Score, ScoreStatus
from groundscope.usage import metering

if TYPE_CHECKING:
    from groundscope.scoring.judge import JudgePanel

GROUP_KEYS = ("consistency", "consistent_correct")


def agreement(counts: Mapping[str, int], agree: Mapping[tuple[str, str], bool]) -> float:
    """Share of agreeing answer pairs, from form multiplicities and form-pair decisions."""
    n = sum(counts.values())
    pairs = n * (n - 1) // 2
    same = sum(c * (c - 1) // 2 for c in counts.values())
    same += sum(counts[a] * counts[b] for (a, b), ok in agree.items() if ok)
    return same / pairs


@dataclass
class Equivalence:
    """Answer-vs-answer decisions of one run: rules first, the judge for free-form pairs."""

    panel: JudgePanel

    async def same(self, question: str, a: str, b: str) -> tuple[bool | None, dict[str, Any]]:
        """Whether raw answers ``a`` and ``b`` agree (None: the judge gave no answer)."""
        na, nb = normalise_answer(a), normalise_answer(b)
        rule = same_answer(na, nb)
        if rule is not None:
            return rule, {"by": "normalised" if rule else "closed form"}
        first, second = sorted((a, b))
        reply = await self.panel.ask(0, equivalence_messages(question, first, second),
                                     parse_equivalence, purpose="equivalence",
                                     shape=EQUIVALENCE_SHAPE)
        if reply.value is None:
            return None, {"by": "judge", "error": reply.error}
        return reply.value.equivalent, {"by": "judge", "reason": reply.value.reason}

    async def correct(self, question: str, answer: str, references: Sequence[str]
                      ) -> tuple[bool | None, dict[str, Any]]:
        """Whether ``answer`` agrees with one of ``references`` (None: undecided)."""
        failed: dict[str, Any] | None = None
        for ref in references:
            ok, how = await self.same(question, answer, ref)
            if ok:
                return True, {**how, "reference": ref}
            if ok is None:
                failed = how
        return (None, failed) if failed else (False, {})


@dataclass(frozen=True, slots=True)
class MemberRow:
    """An answered member of a group, read once from its member row (see ``score``)."""

    sample_id: str
    question: str
    answer: str
    normalised: str
    references: Sequence[str]
    references_over_limit: int = 0

    @classmethod
    def of(cls, row: Score) -> MemberRow:
        d = row.detail
        return cls(row.sample_id, str(d["question"]), d["answer"], d["normalised"], d["references"],
                   int(d.get("references_over_limit", 0)))


@dataclass(frozen=True, slots=True)
class ConsistencyScorer:
    """Member rows per sample; one ``consistency_group`` row per group (see the module)."""

    panel: JudgePanel
    max_group_size: int = 16
    name: str = "consistency"
    keys: tuple[str, ...] = ()
    group_name: str = "consistency_group"
    group_keys: tuple[str, ...] = field(default=GROUP_KEYS)

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        group = sample.metadata.get("group")
        bad = unusable(sample, prediction, self.name)
        if bad is not None:
            return bad if group is None else replace(bad, detail={**bad.detail, "group": str(group)})
        if group is None or str(group) == "":
            return Score(sample.id, self.name, ScoreStatus.NO_ANSWER,
                         detail={"reason": "the record is in no paraphrase group"},
                         repeat=prediction.repeat)
        answer = prediction.text
        norm = normalise_answer(answer)
        refs = list(dict.fromkeys(r for r in sample.target if r.strip()))
        detail = {"group": str(group), "question": sample.question, "answer": answer,
                  "normalised": norm, "references": refs[:MAX_REFERENCES]}
        if len(refs) > MAX_REFERENCES:
            detail["references_over_limit"] = len(refs) - MAX_REFERENCES
        return Score(sample.id, self.name, ScoreStatus.OK, extracted=norm, detail=detail,
                     repeat=prediction.repeat)

    def request_steps(self) -> list[JudgeStep]:
        return [JudgeStep("equivalence", self.panel.cfg.models[:1], self.panel.cfg.max_repairs)]

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> list[RequestBound]:
        return []  # a member row asks nothing: its group does (group_bounds)

    def group_member(self, sample: Sample) -> tuple[str, tuple[str, int]] | None:
        """A grouped sample's group id, question and number of distinct references (at most
        ``MAX_REFERENCES``)."""
        group = sample.metadata.get("group")
        if group is None or str(group) == "":
            return None
        refs = len(dict.fromkeys(t for t in sample.target if t.strip()))
        return str(group), (sample.question, min(refs, MAX_REFERENCES))

    def group_bounds(self, members: Sequence[tuple[str, int]], tokens: TokenEstimate
                     ) -> list[RequestBound]:
        """A group of n members, m = min(n, ``max_group_size``): m(m-1)/2 answer pairs, plus
        for the m members with most references the sum of their references (answer-vs-reference
        checks); none when m < 2. The prompt quotes the first member's question and two
        answers."""
        m = min(len(members), self.max_group_size)
        if m < 2:
            return []
        refs = sorted((n for _, n in members), reverse=True)[:m]
        each = tokens.prompt(equivalence_messages(members[0][0], "", "")) + 2 * tokens.answer
        return [RequestBound("equivalence", 0, m * (m - 1) // 2 + sum(refs), each)]

    async def score_groups(self, members: Sequence[Score]) -> list[Score]:
        groups: dict[tuple[str, int], list[Score]] = {}
        for m in members:
            if "group" in m.detail:
                groups.setdefault((str(m.detail["group"]), m.repeat), []).append(m)
        check = Equivalence(self.panel)
        return list(await asyncio.gather(*(self._group(check, gid, repeat, rows)
                                           for (gid, repeat), rows in sorted(groups.items()))))

    async def _group(self, check: Equivalence, gid: str, repeat: int,
                     rows: Sequence[Score]) -> Score:
        """One group's score, with the equivalence calls made for it (its ``usage``)."""
        with metering() as meter:  # this task's own scope: the groups run side by side
            score = await self._score_group(check, gid, repeat, rows)
        return replace(score, usage=meter.to_json()) if meter else score

    async def _score_group(self, check: Equivalence, gid: str, repeat: int,
                           rows: Sequence[Score]) -> Score:
        answered = [MemberRow.of(m) for m in sorted(rows, key=lambda m: m.sample_id)
                    if m.status is ScoreStatus.OK]
        over = len(answered) - self.max_group_size
        answered = answered[:self.max_group_size]
        detail: dict[str, Any] = {
            "group": gid,
            "members": [{"sample_id": m.sample_id, "answer": m.answer, "normalised": m.normalised}
                        for m in answered],
            "unanswered": sorted(m.sample_id for m in rows if m.status is not ScoreStatus.OK)}
        if over > 0:
            detail["members_over_limit"] = over
        refs_over = sum(m.references_over_limit for m in answered)
        if refs_over:
            detail["references_over_limit"] = refs_over
        sid = f"group:{gid}"
        if len(answered) < 2:
            return Score(sid, self.group_name, ScoreStatus.NO_ANSWER, repeat=repeat,
                         detail={**detail, "reason": "fewer than two answers in the group"})
        question = answered[0].question
        forms: dict[str, str] = {}
        for m in answered:
            forms.setdefault(m.normalised, m.answer)
        pairs = list(combinations(sorted(forms), 2))
        decided = await asyncio.gather(*(check.same(question, forms[a], forms[b]) for a, b in pairs))
        detail["pairs"] = [{"answer_1": forms[a], "answer_2": forms[b], "equivalent": ok, **how}
                           for (a, b), (ok, how) in zip(pairs, decided, strict=True)]
        values: dict[str, float] = {}
        if all(ok is not None for ok, _ in decided):
            counts = Counter(m.normalised for m in answered)
            agree = {p: bool(ok) for p, (ok, _) in zip(pairs, decided, strict=True)}
            values["consistency"] = agreement(counts, agree)
        referenced = all(m.references for m in answered)
        if referenced:
            verdicts = await asyncio.gather(*(check.correct(question, m.answer, m.references)
                                              for m in answered))
            for member, (ok, how) in zip(detail["members"], verdicts, strict=True):
                member.update(correct=ok, **({"correct_by": how} if how else {}))
            if all(ok is not None for ok, _ in verdicts):
                values["consistent_correct"] = 1.0 if all(ok for ok, _ in verdicts) else 0.0
        if "consistency" not in values or (referenced and "consistent_correct" not in values):
            return Score(sid, self.group_name, ScoreStatus.JUDGE_FAILED, repeat=repeat,
                         detail={**detail, "judge_failed": "an equivalence check got no usable reply"})
        detail["agreement"] = values["consistency"]
        return Score(sid, self.group_name, ScoreStatus.OK, values=values, detail=detail,
                     repeat=repeat)
