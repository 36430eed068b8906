"""The grounding steps' wire contracts: the requests a judge is sent and the replies it must give
(pure; README: Grounding metrics).

Every request is one user message whose first line is a marker (the offline simulator uses it
to recognise the step), then the instructions and the quoting note, then the inputs, each
quoted in its own block ``<tag>\\n...\\n</tag>`` (``quoting.py``: ``&``, ``<``, ``>`` as
entities, so an answer, claim or element cannot close its block), then the reply shape.
Only the verification request carries media (the sample's images / videos after the text).
The ``-v2`` markers name this quoting (``-v1`` quoted verbatim).

- claim extraction, marker ``[groundscope-grounding/claims-v2]``: quotes the question and
  the answer; reply ``{"claims": ["...", ...]}`` (may be empty);
- verification, ``[groundscope-grounding/verify-v2]``: quotes one claim, then the media;
  reply ``{"verdict": "supported" | "contradicted" | "not_determinable", "reason": "..."}``;
- batch verification (``judge.grounding.verify: batch``),
  ``[groundscope-grounding/verify-batch-v1]``: quotes an answer's N claims in numbered
  blocks ``<claim_1>`` ... ``<claim_N>``, then the media; reply
  ``{"verdicts": [{"claim": 1, "verdict": "...", "reason": "..."}, ...]}``: exactly N
  entries, entry k for claim k, no other key (its own contract, so v1; quoted as the -v2
  steps are);
- completeness, ``[groundscope-grounding/completeness-v2]``: quotes the answer and every
  expected element; reply ``{"covered": ["<element copied verbatim>", ...]}``; an element
  the judge copies in its quoted form (``&amp;``) is read back unquoted;
- equivalence, ``[groundscope-grounding/equivalence-v2]``: quotes the question and two
  answers; reply ``{"equivalent": true | false, "reason": "..."}``.

Replies are read with ``json_reply.extract_object`` (``<think>`` removed, the last top-level
object binds) and then checked strictly here; a broken reply raises ``ReplyError``, which the
panel turns into a repair turn (``judge_prompt.repair_messages`` with the step's ``*_SHAPE``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from groundscope.scoring.json_reply import (
    ReplyError,
    extract_object,
    optional_text,
    required,
    shown,
)
from groundscope.scoring.quoting import QUOTING_NOTE, block, blocks, unescape
from groundscope.types import ContentPart, MediaPart, MediaRef, Message, TextPart

CLAIMS_MARKER = "[groundscope-grounding/claims-v2]"
VERIFY_MARKER = "[groundscope-grounding/verify-v2]"
VERIFY_BATCH_MARKER = "[groundscope-grounding/verify-batch-v1]"
COMPLETENESS_MARKER = "[groundscope-grounding/completeness-v2]"
EQUIVALENCE_MARKER = "[groundscope-grounding/equivalence-v2]"
MARKERS = (CLAIMS_MARKER, VERIFY_MARKER, VERIFY_BATCH_MARKER, COMPLETENESS_MARKER,
           EQUIVALENCE_MARKER)

CHECK_VERDICTS = ("supported", "contradicted", "not_determinable")
CLAIMS_SHAPE = '{"claims": ["<claim>", ...]}'
VERIFY_SHAPE = ('{"verdict": "supported" or "contradicted" or "not_determinable", '
                '"reason": "<one sentence>"}')
COMPLETENESS_SHAPE = '{"covered": ["<element copied verbatim>", ...]}'
EQUIVALENCE_SHAPE = '{"equivalent": true or false, "reason": "<one sentence>"}'

_CLAIMS_RULES = """You split an answer about an image into atomic claims that can each be \
checked by looking at the image.

- One fact per claim, as a short self-contained sentence: resolve pronouns and use the \
question for context ("2" to "How many wheels does the car have?" is the claim "The car has \
2 wheels.").
- Only what the answer asserts about what is visible: leave out opinions, hedges, advice, \
general knowledge and mere restatements of the question.
- Do not repeat a claim. An answer that asserts nothing visually checkable (a refusal, \
"I don't know") has no claims: reply with an empty list."""

_VERIFY_RULES = """Look at the attached image(s) and decide whether the claim below is true \
of them.

- supported: the image clearly shows that the claim is true.
- contradicted: the image clearly shows that the claim is false.
- not_determinable: the image does not show enough to tell (when in doubt, choose this)."""

_VERIFY_BATCH_RULES = """Look at the attached image(s) and decide, for each numbered claim \
below, whether it is true of them. Judge every claim on its own.

- supported: the image clearly shows that the claim is true.
- contradicted: the image clearly shows that the claim is false.
- not_determinable: the image does not show enough to tell (when in doubt, choose this)."""

_COMPLETENESS_RULES = """Decide which of the expected visual elements listed below the answer \
mentions. An element counts as mentioned when the answer refers to it, in any wording \
(synonyms, paraphrases, a more specific name); it does not count when the answer only hints \
at it or denies it. Match each element at most once."""

_EQUIVALENCE_RULES = """Decide whether the two answers below give the same answer to the \
question. Differences of wording, format, number spelling ("2" vs "two"), capitalisation \
or extra explanation do not matter; a different meaning does ("yes" vs "no", "a tower" vs \
"a bridge")."""

_REPLY = "Reply with exactly one JSON object and no other text:\n{shape}"


def _prompt(marker: str, rules: str, quoted: Sequence[tuple[str, str]], shape: str) -> str:
    parts = [f"{marker}\n{rules}\n{QUOTING_NOTE}", *(block(tag, text) for tag, text in quoted),
             _REPLY.format(shape=shape)]
    return "\n\n".join(parts)


def claims_messages(question: str, answer: str) -> tuple[Message, ...]:
    """The claim-extraction request: the question and the answer, quoted (text only).

    >>> print(claims_messages("How many?", "Two.")[0].content.split("\\n\\n")[-2])
    <answer>
    Two.
    </answer>
    """
    text = _prompt(CLAIMS_MARKER, _CLAIMS_RULES, [("question", question), ("answer", answer)],
                   CLAIMS_SHAPE)
    return (Message("user", text),)


def verify_messages(claim: str, media: Sequence[MediaRef]) -> tuple[Message, ...]:
    """The verification request: one claim, quoted, then the media it is checked against."""
    text = _prompt(VERIFY_MARKER, _VERIFY_RULES, [("claim", claim)], VERIFY_SHAPE)
    parts: tuple[ContentPart, ...] = (TextPart(text), *(MediaPart(m) for m in media))
    return (Message("user", parts),)


def verify_batch_shape(count: int) -> str:
    """The reply shape of a batch of ``count`` claims (the prompt's and the repair turn's).

    >>> verify_batch_shape(2).splitlines()[-1]
    'exactly 2 entries, one per claim, in claim order: claim 1 first, claim 2 last'
    """
    return (f'{{"verdicts": [{{"claim": 1, "verdict": "supported" or "contradicted" or '
            f'"not_determinable", "reason": "<one sentence>"}}, ...]}}\n'
            f"exactly {count} entries, one per claim, in claim order: claim 1 first, "
            f"claim {count} last")


def verify_batch_messages(claims: Sequence[str], media: Sequence[MediaRef]
                          ) -> tuple[Message, ...]:
    """The batch verification request: every claim quoted in its numbered block
    (``<claim_1>`` ...), then the media they are checked against."""
    quoted_claims = [(f"claim_{k}", claim) for k, claim in enumerate(claims, 1)]
    text = _prompt(VERIFY_BATCH_MARKER, _VERIFY_BATCH_RULES, quoted_claims,
                   verify_batch_shape(len(claims)))
    parts: tuple[ContentPart, ...] = (TextPart(text), *(MediaPart(m) for m in media))
    return (Message("user", parts),)


def completeness_messages(answer: str, elements: Sequence[str]) -> tuple[Message, ...]:
    """The completeness request: the answer and every expected element, quoted."""
    blocks = [("answer", answer), *(("element", e) for e in elements)]
    return (Message("user", _prompt(COMPLETENESS_MARKER, _COMPLETENESS_RULES, blocks,
                                    COMPLETENESS_SHAPE)),)


def equivalence_messages(question: str, first: str, second: str) -> tuple[Message, ...]:
    """The equivalence request: the question and two answers, quoted."""
    blocks = [("question", question), ("answer_1", first), ("answer_2", second)]
    return (Message("user", _prompt(EQUIVALENCE_MARKER, _EQUIVALENCE_RULES, blocks,
                                    EQUIVALENCE_SHAPE)),)


def quoted(prompt: str, tag: str) -> list[str]:
    """The text of every block ``tag`` of a prompt built here, in order, as it was before
    quoting (used by the simulator).

    >>> quoted(completeness_messages("a dog", ["dog", "salt & <pepper>"])[0].content, "element")
    ['dog', 'salt & <pepper>']
    """
    return blocks(prompt, tag)


_NUMBERED_CLAIM = re.compile(r"<claim_(\d{1,6})>\n([^<]*)\n</claim_\1>")


def batch_claims(prompt: str) -> list[str]:
    """The claims of a batch verification prompt, in their numbered order, unquoted (used
    by the simulator; a quoted claim holds no ``<``, so one linear scan finds the blocks).

    >>> batch_claims(verify_batch_messages(["a <b>", "c"], ())[0].content[0].text)
    ['a <b>', 'c']
    """
    found = {int(m.group(1)): unescape(m.group(2)) for m in _NUMBERED_CLAIM.finditer(prompt)}
    return [found[k] for k in range(1, len(found) + 1) if k in found]


# ---------------------------------------------------------------- replies


def _strings(obj: dict[str, object], key: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        raise ReplyError(f'the JSON object has no "{key}" key')
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ReplyError(f'"{key}" must be a list of strings')
    return [v.strip() for v in value if v.strip()]


def parse_claims(text: str) -> tuple[str, ...]:
    """The claims of an extraction reply (blank ones dropped, repeats removed, order kept).

    >>> parse_claims('{"claims": ["The dog is brown.", " ", "The dog is brown."]}')
    ('The dog is brown.',)
    >>> parse_claims('{"claims": []}')
    ()
    """
    return tuple(dict.fromkeys(_strings(extract_object(text), "claims")))


@dataclass(frozen=True, slots=True)
class Check:
    """A verification reply: ``verdict`` is one of :data:`CHECK_VERDICTS`."""

    verdict: str
    reason: str


def parse_check(text: str) -> Check:
    """The verdict of a verification reply; case, spaces and hyphens are forgiven.

    >>> parse_check('{"verdict": "Not determinable", "reason": "too dark"}')
    Check(verdict='not_determinable', reason='too dark')
    """
    obj = extract_object(text)
    return Check(_check_label(required(obj, "verdict"), '"verdict"'),
                 optional_text(obj, "reason"))


def _check_label(raw: object, where: str) -> str:
    label = re.sub(r"[\s\-]+", "_", raw.strip().lower()) if isinstance(raw, str) else None
    if label not in CHECK_VERDICTS:
        raise ReplyError(f'{where} must be one of {", ".join(CHECK_VERDICTS)}; got {shown(raw)}')
    return label


_ENTRY_KEYS = frozenset({"claim", "verdict", "reason"})


def parse_checks(text: str, count: int) -> tuple[Check, ...]:
    """The ``count`` verdicts of a batch verification reply, in claim order.

    Strict: the object has only ``verdicts``, a list of exactly ``count`` objects; entry k
    has only ``claim`` (the integer k: entries in claim order), ``verdict`` (read as
    :func:`parse_check` reads it) and an optional ``reason``. Anything else, a wrong
    count or order above all, is a ``ReplyError`` (a repair turn), never padded or cut.

    >>> parse_checks('{"verdicts": [{"claim": 1, "verdict": "supported", "reason": "r"}]}', 1)
    (Check(verdict='supported', reason='r'),)
    >>> parse_checks('{"verdicts": [{"claim": 1, "verdict": "supported"}]}', 2)
    Traceback (most recent call last):
    ...
    groundscope.scoring.json_reply.ReplyError: 2 claims were sent but "verdicts" has 1 entries
    """
    obj = extract_object(text)
    if set(obj) - {"verdicts"}:
        raise ReplyError(f'unexpected key {shown(min(set(obj) - {"verdicts"}))}: the object has '
                         'only "verdicts"')
    items = required(obj, "verdicts")
    if not isinstance(items, list):
        raise ReplyError('"verdicts" must be a list of objects')
    if len(items) != count:
        raise ReplyError(f'{count} claims were sent but "verdicts" has {len(items)} entries')
    return tuple(_entry(item, k) for k, item in enumerate(items, 1))


def _entry(item: object, k: int) -> Check:
    where = f"verdicts[{k - 1}]"
    if not isinstance(item, dict):
        raise ReplyError(f"{where} must be an object, got {shown(item)}")
    if set(item) - _ENTRY_KEYS:
        raise ReplyError(f"{where} has an unexpected key {shown(min(set(item) - _ENTRY_KEYS))}")
    number = item.get("claim")
    if type(number) is not int:  # bool and 1.0 are not claim numbers
        raise ReplyError(f'{where}: "claim" must be the claim number {k}, got {shown(number)}')
    if number != k:
        raise ReplyError(f"{where} is for claim {shown(number)}, but entry {k} must be for claim "
                         f"{k} (one entry per claim, in claim order)")
    return Check(_check_label(required(item, "verdict"), f'{where}: "verdict"'),
                 optional_text(item, "reason"))


def parse_covered(text: str) -> list[str]:
    """The covered elements of a completeness reply, as the judge wrote them; an element
    copied in its quoted form (``&amp;``, ``&lt;``, ``&gt;``) is unquoted.

    >>> parse_covered('{"covered": ["dog", "salt &amp; pepper"]}')
    ['dog', 'salt & pepper']
    """
    return [unescape(item) for item in _strings(extract_object(text), "covered")]


@dataclass(frozen=True, slots=True)
class EquivalenceReply:
    """An equivalence reply: whether two answers give the same answer, and why."""

    equivalent: bool
    reason: str


def parse_equivalence(text: str) -> EquivalenceReply:
    """An equivalence reply; ``equivalent`` must be a JSON boolean.

    >>> parse_equivalence('{"equivalent": true, "reason": "both say two"}')
    EquivalenceReply(equivalent=True, reason='both say two')
    """
    obj = extract_object(text)
    value = obj.get("equivalent")
    if not isinstance(value, bool):
        raise ReplyError(f'"equivalent" must be true or false, got {shown(value)}')
    return EquivalenceReply(value, optional_text(obj, "reason"))
