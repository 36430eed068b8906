"""The correctness judge's wire contract: the request it is sent and the reply it must give (pure).

Request (one user message; with ``multimodal`` the sample's media follow the text)::

    [groundscope-judge/correctness-v2]
    ...grading rules...
    ...quoting note (quoting.QUOTING_NOTE)...

    <question>
    {Sample.question, quoted}
    </question>

    <reference_answer>          one block per reference, quoted
    {reference}
    </reference_answer>

    <predicted_answer>
    {the prediction, quoted}
    </predicted_answer>
    ...grade as A: CORRECT / B: INCORRECT, reply with one JSON object...

Quoted: ``&``, ``<`` and ``>`` are written as ``&amp;``, ``&lt;`` and ``&gt;`` inside a block
(``quoting.py``), so a prediction cannot close its block and forge a second reference; the
rules tell the judge so. (``correctness-v1`` quoted verbatim.)

Reply: exactly one JSON object ``{"reasoning": "...", "verdict": "A" | "B"}`` (A correct,
B incorrect), read by :func:`parse_verdict` with the rules of ``json_reply``. A reply that
breaks the contract gets a *repair* turn (:func:`repair_messages`): the bad reply is quoted
back as the assistant's turn and the judge is told what was wrong, so the retried request
differs from the first one (a deterministic judge would otherwise repeat itself) and every
attempt stays cacheable.

The first line is a marker the offline simulator uses to recognise judge requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundscope.scoring.json_reply import ReplyError, extract_object, optional_text, required, shown
from groundscope.scoring.quoting import QUOTING_NOTE, block, blocks
from groundscope.types import ContentPart, MediaPart, Message, Sample, TextPart

JUDGE_MARKER = "[groundscope-judge/correctness-v2]"
VERDICT_LABELS = {"A": True, "B": False}

_RULES = """You are grading a predicted answer to a question against the reference answer(s). \
Decide whether the predicted answer is correct.

- It is correct when it gives the same answer as a reference answer; when several reference \
answers are listed, agreeing with any one of them is enough.
- Differences of wording, formatting, capitalisation or number spelling ("2" vs "two") \
do not matter, nor does extra explanation, as long as nothing in it contradicts the reference.
- It is incorrect when it gives a different answer, hedges between several answers, refuses, \
or gives only part of what the reference requires."""

_MEDIA_RULE = """- The media attached after this text are the ones the question was asked \
about; use them to resolve ambiguity, but the reference answer stays authoritative."""

_REPLY = """Grade the predicted answer as one of:
A: CORRECT
B: INCORRECT

Reply with exactly one JSON object and no other text:
{"reasoning": "<one or two sentences>", "verdict": "A" or "B"}"""

VERDICT_SHAPE = '{"reasoning": "<one or two sentences>", "verdict": "A" or "B"}'
_REPAIR = """Your reply could not be used: {problem}. Reply again with exactly one JSON \
object and no other text:
{shape}"""

def judge_prompt(question: str, references: Sequence[str], prediction: str, *,
                 with_media: bool = False) -> str:
    """The judge's text: rules, then question, references and prediction, quoted.

    >>> print(judge_prompt("What animal?", ["Dog"], "a <b>dog</b>").split("\\n\\n")[2:4])
    ['<question>\\nWhat animal?\\n</question>', '<reference_answer>\\nDog\\n</reference_answer>']
    >>> judge_prompt("Q?", ["A"], "B</predicted_answer>").count("</predicted_answer>")
    1
    """
    rules = _RULES + ("\n" + _MEDIA_RULE if with_media else "") + "\n" + QUOTING_NOTE
    parts = [JUDGE_MARKER + "\n" + rules, block("question", question)]
    parts += [block("reference_answer", ref) for ref in references]
    parts += [block("predicted_answer", prediction), _REPLY]
    return "\n\n".join(parts)


def judge_messages(sample: Sample, prediction: str, *, multimodal: bool = False) -> tuple[Message, ...]:
    """The judge request for one sample and prediction (media only with ``multimodal``)."""
    refs = [r for r in sample.target if r.strip()]
    media = sample.media() if multimodal else ()
    text = judge_prompt(sample.question, refs, prediction, with_media=bool(media))
    if not media:
        return (Message("user", text),)
    parts: tuple[ContentPart, ...] = (TextPart(text), *(MediaPart(m) for m in media))
    return (Message("user", parts),)


def repair_messages(messages: Sequence[Message], bad_reply: str, problem: str, *,
                    shape: str | None = None) -> tuple[Message, ...]:
    """``messages`` plus the bad reply (as the assistant) and a request to fix it.

    ``shape`` is the JSON object the reply must have (default: the verdict's); the
    grounding steps pass their own.
    """
    fix = _REPAIR.format(problem=problem, shape=shape or VERDICT_SHAPE)
    return (*messages, Message("assistant", bad_reply), Message("user", fix))


@dataclass(frozen=True, slots=True)
class Verdict:
    """A usable judge reply: ``label`` is ``A`` (correct) or ``B`` (incorrect)."""

    label: str
    reasoning: str

    @property
    def correct(self) -> bool:
        return VERDICT_LABELS[self.label]


def parse_verdict(text: str) -> Verdict:
    """The verdict in a judge reply; ``ReplyError`` when the contract is broken.

    The label must be ``A`` or ``B`` (surrounding spaces and case are forgiven, nothing
    else: ``"CORRECT"``, ``"C"`` or a missing ``verdict`` are errors). ``reasoning`` is
    optional and kept as text.

    >>> parse_verdict('{"reasoning": "same animal", "verdict": "A"}')
    Verdict(label='A', reasoning='same animal')
    """
    obj = extract_object(text)
    raw = required(obj, "verdict")
    label = raw.strip().upper() if isinstance(raw, str) else None
    if label not in VERDICT_LABELS:
        raise ReplyError(f'"verdict" must be "A" or "B", got {shown(raw)}')
    return Verdict(label, optional_text(obj, "reasoning"))


def split_prompt(text: str) -> tuple[str, list[str], str] | None:
    """Inverse of :func:`judge_prompt`: ``(question, references, prediction)``, or None.

    Used by the simulator to answer judge requests. Quoted texts contain no tags, so each
    block is found by its tags alone.
    """
    if not text.startswith(JUDGE_MARKER):
        return None
    questions, predictions = blocks(text, "question"), blocks(text, "predicted_answer")
    if len(questions) != 1 or len(predictions) != 1:
        return None
    return questions[0], blocks(text, "reference_answer"), predictions[0]
