"""The VLMEvalKit TSV layouts (EvalScope's deprecated custom formats), without VLMEvalKit.

``legacy_mcq`` columns: ``index``, ``category`` (optional), ``answer``, ``question``, ``A``,
``B``, ... (at least two options, consecutive from ``A``; at most ``Z``), and ``image_path``
or ``image``; an optional ``hint`` is put before the question as ``Hint: ...`` (VLMEvalKit
shows it too). ``legacy_vqa`` columns: ``index``, ``answer``, ``question`` and
``image_path`` or ``image``.

Images, as VLMEvalKit reads them:

- ``image_path``: a path (relative paths resolve against the dataset file's directory, then
  the current directory), or a list of paths written as a JSON array or a Python list
  literal (``['a.jpg', 'b.jpg']``), for a question about several images.
- ``image``: base64 image data (no ``data:`` prefix needed), or a list of them written the
  same way. When both columns are filled, ``image`` wins, as in VLMEvalKit. VLMEvalKit's
  space-saving form, a short ``image`` value naming another row's ``index``, needs the whole
  file and is not supported: such a row is a bad record that says so.
- A row without an image is a bad record (VLMEvalKit drops it silently).

Every image is validated (``media.check``); an unusable one makes the record bad.

Prompts: the image(s) first, then the text. For MCQ the text is General-VMCQ's prompt
(``mcq.DEFAULT_TEMPLATE``: the question, then ``A) option`` lines and the ``ANSWER: X``
instruction), not VLMEvalKit's ``Question: ... Options: A. ...`` wording: our answer
extraction reads the ``ANSWER:`` line, which VLMEvalKit's prompt never asks for.
``shuffle_choices`` works as in General-VMCQ. For VQA the text is the question alone
(VLMEvalKit's default), or ``prompt_template`` filled with ``{question}``; it is scored by
exact match. Every legacy MCQ sample carries ``metadata["category"]`` (``"default"`` when the
column is absent or empty), from which the per-category accuracy rows are made.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from groundscope import media
from groundscope.choices import option_letters
from groundscope.dataset import mcq
from groundscope.dataset.base import record_error
from groundscope.dataset.vqa import sample_id
from groundscope.errors import MediaError
from groundscope.types import (
    AnswerKind,
    ContentPart,
    MediaPart,
    MediaRef,
    Modality,
    Origin,
    Sample,
    TextPart,
)

if TYPE_CHECKING:  # the package __init__ imports this module
    from groundscope.dataset.base import FormatContext

__all__ = [
    "DEFAULT_CATEGORY",
    "MIN_OPTIONS",
    "images",
    "letter_options",
    "mcq_record_to_sample",
    "vqa_record_to_sample",
]

DEFAULT_CATEGORY = "default"
MIN_OPTIONS = 2
_ROW_REFERENCE_MAX = 64  # VLMEvalKit reads an ``image`` value this short as another row's index


def _text(value: Any) -> str | None:
    """A cell as text: strings as they are, numbers as written (``3``, not ``3.0``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _required_text(record: Mapping[str, Any], field: str, origin: Origin) -> str:
    value = record.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise record_error(origin, field, "missing")
    text = _text(value)
    if text is None:
        raise record_error(origin, field, f"expected text, got {type(value).__name__}")
    return text


# --- options -------------------------------------------------------------------------------


def letter_options(record: Mapping[str, Any], origin: Origin) -> list[str]:
    """The texts of the option columns ``A``, ``B``, ... (consecutive, at least two)."""
    present = [letter for letter in string.ascii_uppercase if _filled(record.get(letter))]
    count = len(present)
    expected = list(string.ascii_uppercase[:count])
    if present != expected:
        gap = next(letter for letter, got in zip(expected, present, strict=True) if letter != got)
        after = present[expected.index(gap)]
        problem = f"empty, but option {after} is given; options must be consecutive from A"
        raise record_error(origin, gap, problem)
    if count < MIN_OPTIONS:
        missing = string.ascii_uppercase[count]
        raise record_error(origin, missing,
                           f"missing: at least {MIN_OPTIONS} options (A, B, ...) are required")
    options = [_text(record[letter]) for letter in present]
    for letter, text in zip(present, options, strict=True):
        if text is None:
            raise record_error(origin, letter, f"expected text, got {type(record[letter]).__name__}")
    return [text for text in options if text is not None]


def _filled(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


# --- images --------------------------------------------------------------------------------


def images(record: Mapping[str, Any], origin: Origin, base_dir: Path | None,
           limit: int | None = None) -> list[MediaRef]:
    """The row's images, validated: from ``image`` (base64) if filled, else ``image_path``
    (more than ``limit`` of them: a bad record, before any is looked at)."""
    if _filled(record.get("image")):
        column, values = "image", _listed(record["image"], origin, "image")
    elif _filled(record.get("image_path")):
        column, values = "image_path", _listed(record["image_path"], origin, "image_path")
    else:
        raise record_error(origin, "image_path",
                           "missing: give image_path (a path or a list) or image (base64)")
    if limit is not None and len(values) > limit:
        raise record_error(origin, column, f"{len(values)} images, over the limit of {limit} per "
                                    "record (max_media_per_record)")
    refs: list[MediaRef] = []
    for i, value in enumerate(values):
        field = column if len(values) == 1 else f"{column}[{i}]"
        if column == "image":
            _reject_row_reference(value, origin, field)
        try:
            ref = media.media_from_value(value, Modality.IMAGE, base_dir=base_dir)
        except MediaError as exc:
            raise record_error(origin, field, str(exc)) from None
        refs.append(mcq.check_media(ref, origin, field))
    return refs


def _listed(value: Any, origin: Origin, column: str) -> list[Any]:
    """One value, or the elements of a list (also a JSON / Python list literal string)."""
    if isinstance(value, str) and value.strip().startswith("[") and value.strip().endswith("]"):
        value = mcq.parse_literal(value.strip(), origin, column,
                                  "looks like a list but is neither JSON nor a Python literal")
    if not isinstance(value, list | tuple):
        return [value]
    items = [item for item in value if _filled(item)]
    if not items:
        raise record_error(origin, column, "an empty list: give at least one image")
    return items


def _reject_row_reference(value: Any, origin: Origin, field: str) -> None:
    if not isinstance(value, str):
        return
    text = value.strip()
    if len(text) > _ROW_REFERENCE_MAX or text.lower().startswith(("data:", "http://", "https://")):
        return
    raise record_error(
        origin,
        field,
        f"{text!r} is not base64 image data; VLMEvalKit reads a value this short as the index "
        "of another row whose image to reuse, which is not supported: repeat the base64 data, "
        "or give paths in image_path",
    )


def _content(refs: Sequence[MediaRef], text: str) -> tuple[ContentPart, ...]:
    return (*(MediaPart(ref) for ref in refs), TextPart(text))


# --- the formats ---------------------------------------------------------------------------


def mcq_record_to_sample(record: dict[str, Any], origin: Origin, ctx: FormatContext) -> Sample:
    """Convert one VLMEvalKit MCQ row; a malformed one raises ``RecordError``."""
    question = _required_text(record, "question", origin)
    options = letter_options(record, origin)
    letters = option_letters(len(options))
    answer = mcq.answer_letter(record.get("answer"), letters, origin)
    refs = images(record, origin, ctx.base_dir, ctx.max_media)
    sid = sample_id(record, origin)
    shown = mcq.arrange_choices(options, answer, shuffle=ctx.shuffle_choices, seed=ctx.seed, sample=sid)
    hint = _text(record.get("hint")) if _filled(record.get("hint")) else None
    shown_question = f"Hint: {hint}\n{question}" if hint else question
    text = mcq.render_prompt(shown_question, shown.options, ctx.prompt_template)
    category = _text(record.get("category")) if _filled(record.get("category")) else None
    return Sample(
        id=sid,
        dataset=ctx.dataset,
        subset=ctx.subset,
        messages=mcq.user_messages(_content(refs, text), ctx.system_prompt),
        origin=origin,
        target=(shown.answer,),
        answer_kind=AnswerKind.CHOICE,
        choices=letters,
        question=question,
        metadata=MappingProxyType({"category": category or DEFAULT_CATEGORY, **shown.metadata}),
    )


def vqa_record_to_sample(record: dict[str, Any], origin: Origin, ctx: FormatContext) -> Sample:
    """Convert one VLMEvalKit VQA row; a malformed one raises ``RecordError``.

    ``answer`` is optional (a row without one is scored ``no_answer``, never 0).
    """
    question = _required_text(record, "question", origin)
    answer = record.get("answer")
    target: tuple[str, ...] = ()
    if _filled(answer):
        text_answer = _text(answer)
        if text_answer is None:
            raise record_error(origin, "answer", f"expected text, got {type(answer).__name__}")
        target = (text_answer,)
    refs = images(record, origin, ctx.base_dir, ctx.max_media)
    text = mcq.fill_template(ctx.prompt_template, question=question) if ctx.prompt_template else question
    meta = mcq.metadata_fields(record, ("category",))
    return Sample(
        id=sample_id(record, origin),
        dataset=ctx.dataset,
        subset=ctx.subset,
        messages=mcq.user_messages(_content(refs, text), ctx.system_prompt),
        origin=origin,
        target=target,
        answer_kind=AnswerKind.FREE,
        question=question,
        metadata=MappingProxyType(meta),
    )
