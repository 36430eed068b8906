"""General-VMCQ (``general_vmcq``): one record -> one multiple-choice ``Sample`` (pure).

A record holds ``question`` (text, may contain ``<image N>`` / ``<video N>`` / ``<audio N>``),
``options`` (a list; in TSV / CSV a JSON array string, a Python-literal list string is also
accepted; elements are text or placeholders, without ``A.`` prefixes) and ``answer`` (the
correct label). Labels run ``A``..``Z`` then ``1``, ``2``, ... (EvalScope's numbering).

The prompt is ``DEFAULT_TEMPLATE`` (EvalScope's chain-of-thought multiple-choice template,
byte for byte: no leading or trailing newline) or ``ctx.prompt_template``, filled with
``str.format`` from ``{question}``, ``{choices}`` (``A) option`` lines joined by ``\\n``) and
``{letters}`` (labels joined by ``,``).

Placeholders are expanded *after* rendering, inline where they stand in the whole prompt, so
an option that is ``<image 2>`` becomes ``... "\\nB) "``, image 2, ``"\\nC) "`` ... The text
parts are the rendered prompt cut at the placeholders and kept verbatim (no stripping), so
text parts and placeholders re-joined give back the rendered prompt byte for byte; the one
exception, as in EvalScope, is a text segment that is whitespace only (between two adjacent
placeholders, or after the last one), which is not sent. A prompt without media is sent as a
plain string.

Media: every non-empty media column is validated, referenced or not
(``media.check``: the file exists inside the allowed media roots and decodes, its bytes are
of its kind, the format is supported); a bad one makes the record bad, naming the column.
Per modality, the list column (``images``...) is ignored when *any* indexed column of that
modality is non-empty. A placeholder whose medium is absent or empty is a bad record naming
the column it lacks (EvalScope drops it from the prompt with a warning; a prompt that
silently lost a medium is not the question the dataset asks); ``<image 0>`` is a bad record.

``ctx.shuffle_choices`` shuffles the options for real (seeded by ``ctx.seed`` and the sample
id, so reruns are identical), renders them in the new order and remaps the answer; the
original options, answer and the order are kept in ``metadata``.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import orjson

from groundscope import media
from groundscope.bounds import MAX_OPTIONS
from groundscope.choices import option_letters
from groundscope.dataset import placeholders as ph
from groundscope.dataset.base import record_error
from groundscope.dataset.vqa import sample_id
from groundscope.errors import ConfigError, MediaError
from groundscope.types import (
    AnswerKind,
    ContentPart,
    MediaPart,
    MediaRef,
    Message,
    Origin,
    Sample,
)

if TYPE_CHECKING:  # the package __init__ imports this module
    from groundscope.dataset.base import FormatContext

__all__ = [
    "DEFAULT_TEMPLATE",
    "METADATA_FIELDS",
    "Arrangement",
    "answer_letter",
    "arrange_choices",
    "check_media",
    "fill_template",
    "metadata_fields",
    "parse_options",
    "prompt_content",
    "record_to_sample",
    "render_prompt",
    "user_messages",
]

DEFAULT_TEMPLATE = (
    "Answer the following multiple choice question. The last line of your response should be of "
    "the following format: 'ANSWER: [LETTER]' (without quotes) where [LETTER] is one of "
    "{letters}. Think step by step before answering.\n\n{question}\n\n{choices}"
)
METADATA_FIELDS = ("category", "subject", "group", "human_label")


# --- prompt --------------------------------------------------------------------------------


def fill_template(template: str, **fields: str) -> str:
    """``template.format(**fields)`` (as EvalScope fills it); a bad template is a ConfigError.

    >>> fill_template("Q: {question}", question="Why?")
    'Q: Why?'
    """
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        names = ", ".join("{" + name + "}" for name in fields)
        raise ConfigError(
            f"prompt_template: cannot fill it ({type(exc).__name__}: {exc}); it may use {names}; "
            "write a literal brace as {{ or }}"
        ) from None


def render_prompt(question: str, options: Sequence[str], template: str | None = None) -> str:
    """The full prompt text, placeholders still in it.

    >>> print(render_prompt("2 + 2?", ["3", "4"]).split("\\n\\n", 1)[1])
    2 + 2?
    <BLANKLINE>
    A) 3
    B) 4
    """
    letters = option_letters(len(options))
    choices = "\n".join(f"{letter}) {option}" for letter, option in zip(letters, options, strict=True))
    return fill_template(
        template or DEFAULT_TEMPLATE, question=question, choices=choices, letters=",".join(letters)
    )


def prompt_content(text: str, found: Mapping[ph.MediaKey, MediaRef]) -> str | tuple[ContentPart, ...]:
    """``text`` split at its placeholders into text and media parts, in order.

    Text segments are kept verbatim; whitespace-only ones are not sent, and neither is a
    placeholder whose medium is not in ``found``. Without any medium the content is the plain
    string (placeholders removed).
    """
    parts = ph.expand(text, found)
    if any(isinstance(part, MediaPart) for part in parts):
        return tuple(parts)
    return ph.PLACEHOLDER_RE.sub("", text)


def _require_referenced(
    text: str,
    found: Mapping[ph.MediaKey, MediaRef],
    record: Mapping[str, Any],
    origin: Origin,
) -> None:
    """A RecordError for the first placeholder of ``text`` that has no medium."""
    for key in ph.referenced(text):
        if key not in found:
            raise record_error(origin, ph.absent_column(key), _absent_reason(record, key))


def _absent_reason(record: Mapping[str, Any], key: ph.MediaKey) -> str:
    kind, index = key
    column, listed = ph.indexed_column(kind, index), f"{ph.list_column(kind)}[{index - 1}]"
    indexed = (ph.indexed_column(kind, i) for i in range(1, ph.MAX_INDEXED + 1))
    if _present(record.get(ph.list_column(kind))) and any(_present(record.get(c)) for c in indexed):
        return (
            f"no {kind} for {ph.placeholder(key)} ({ph.list_column(kind)} is ignored because "
            f"indexed {kind} columns are used, and {column} is absent or empty)"
        )
    if index > ph.MAX_INDEXED:
        last = ph.indexed_column(kind, ph.MAX_INDEXED)
        return f"no {kind} for {ph.placeholder(key)} (indexed columns stop at {last}; {listed} is absent)"
    return f"no {kind} for {ph.placeholder(key)} ({column} / {listed} absent or empty)"


def _present(value: Any) -> bool:
    """Non-empty, as the placeholder mechanism counts it (blank strings are empty)."""
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, bytes | list | tuple | dict):
        return bool(value)
    return value is not None


def user_messages(content: str | tuple[ContentPart, ...], system_prompt: str | None) -> tuple[Message, ...]:
    """The user message, after a system message when ``system_prompt`` is set."""
    user = Message("user", content)
    return (Message("system", system_prompt), user) if system_prompt else (user,)


# --- fields --------------------------------------------------------------------------------


def parse_options(value: Any, origin: Origin, field: str = "options") -> list[str]:
    """The option texts of a record: a list, a JSON array string or a Python list literal.

    Numbers become their text (as EvalScope's ``str(x)``); ``None``, lists and objects are a
    bad record, and so is an empty list.
    """
    if value is None:
        raise record_error(origin, field, "missing")
    problem = "expected a JSON array or a Python list literal of option texts"
    items = parse_literal(value, origin, field, problem) if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise record_error(origin, field, f"expected a list of options, got {type(items).__name__}")
    if not items:
        raise record_error(origin, field, "expected at least one option, got an empty list")
    if len(items) > MAX_OPTIONS:
        raise record_error(origin, field, f"{len(items)} options, over the limit of {MAX_OPTIONS}")
    options: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            options.append(item)
        elif isinstance(item, int | float):
            options.append(str(item))
        else:
            got = "null" if item is None else type(item).__name__
            raise record_error(origin, f"{field}[{i}]", f"expected text or a placeholder, got {got}")
    return options


def parse_literal(text: str, origin: Origin, field: str, problem: str) -> Any:
    """A cell holding a list as JSON or as a Python literal (``problem``: the error to give)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise record_error(origin, field, problem) from None


def _question(record: Mapping[str, Any], origin: Origin) -> str:
    value = record.get("question")
    if value is None:
        raise record_error(origin, "question", "missing")
    if not isinstance(value, str):
        raise record_error(origin, "question", f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise record_error(origin, "question", "empty")
    return value


def answer_letter(value: Any, letters: Sequence[str], origin: Origin) -> str:
    """The record's answer label, surrounding whitespace removed; it must be one of ``letters``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise record_error(origin, "answer", "missing")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # labels past Z are numbers: 27 options -> "1"
    if not isinstance(value, str):
        raise record_error(origin, "answer", f"expected an option label, got {type(value).__name__}")
    letter = value.strip()
    if letter in letters:
        return letter
    if letter.upper() in letters:  # a lower-case label is the same label (better than EvalScope)
        return letter.upper()
    allowed = ",".join(letters)
    raise record_error(origin, "answer", f"{letter!r} is not one of the option labels {allowed}")


def metadata_fields(record: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The listed record fields that are present, verbatim."""
    return {name: record[name] for name in names if record.get(name) not in (None, "")}


# --- shuffling -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arrangement:
    """Options in prompt order, the correct label in that order, and what to remember."""

    options: tuple[str, ...]
    answer: str
    metadata: Mapping[str, Any]


def arrange_choices(
    options: Sequence[str], answer: str, *, shuffle: bool, seed: int | None, sample: str
) -> Arrangement:
    """The options as they will be shown; shuffled (reproducibly) when ``shuffle`` is set.

    The shuffle is seeded by ``seed`` and the sample id, so it differs between samples but
    not between runs. The metadata keeps ``original_options``, ``original_answer`` and
    ``choice_order`` (for each shown option, its original 0-based position).
    """
    letters = option_letters(len(options))
    if not shuffle:
        return Arrangement(tuple(options), answer, {})
    order = list(range(len(options)))
    random.Random(f"{0 if seed is None else seed}:{sample}").shuffle(order)
    new_answer = letters[order.index(letters.index(answer))]
    meta = {"original_options": list(options), "original_answer": answer, "choice_order": order}
    return Arrangement(tuple(options[i] for i in order), new_answer, meta)


# --- media ---------------------------------------------------------------------------------


def check_media(ref: MediaRef, origin: Origin, column: str) -> MediaRef:
    """``ref`` if it is usable (``media.check``), else a ``RecordError`` naming ``column``."""
    try:
        media.check(ref)
    except MediaError as exc:
        raise record_error(origin, column, str(exc)) from None
    return ref


def _column(record: Mapping[str, Any], key: ph.MediaKey) -> str:
    """The column a collected medium came from: its indexed column, else its list element."""
    kind, index = key
    if index <= ph.MAX_INDEXED and _present(record.get(ph.indexed_column(kind, index))):
        return ph.indexed_column(kind, index)
    return f"{ph.list_column(kind)}[{index - 1}]"


def _all_media(record: Mapping[str, Any], origin: Origin, ctx: FormatContext) -> dict[ph.MediaKey, MediaRef]:
    found = ph.collect_media(record, origin, ctx.base_dir, wanted=None, list_ignored_when="any",
                             limit=ctx.max_media)
    return {key: check_media(ref, origin, _column(record, key)) for key, ref in found.items()}


def _check_placeholders(question: str, options: Sequence[str], origin: Origin) -> None:
    texts = [("question", question), *((f"options[{i}]", o) for i, o in enumerate(options))]
    for field, text in texts:
        problem = ph.bad_placeholder(text)
        if problem:
            raise record_error(origin, field, problem)


# --- the format ----------------------------------------------------------------------------


def record_to_sample(record: dict[str, Any], origin: Origin, ctx: FormatContext) -> Sample:
    """Convert one General-VMCQ record; a malformed one raises ``RecordError``."""
    question = _question(record, origin)
    options = parse_options(record.get("options"), origin)
    letters = option_letters(len(options))
    answer = answer_letter(record.get("answer"), letters, origin)
    _check_placeholders(question, options, origin)
    found = _all_media(record, origin, ctx)
    sid = sample_id(record, origin)
    shown = arrange_choices(options, answer, shuffle=ctx.shuffle_choices, seed=ctx.seed, sample=sid)
    text = render_prompt(question, shown.options, ctx.prompt_template)
    _require_referenced(text, found, record, origin)
    content = prompt_content(text, found)
    return Sample(
        id=sid,
        dataset=ctx.dataset,
        subset=ctx.subset,
        messages=user_messages(content, ctx.system_prompt),
        origin=origin,
        target=(shown.answer,),
        answer_kind=AnswerKind.CHOICE,
        choices=letters,
        question=question,
        metadata=MappingProxyType({**metadata_fields(record, METADATA_FIELDS), **shown.metadata}),
    )
