"""The media placeholder mechanism shared by General-VQA and General-VMCQ.

Text may hold ``<image N>``, ``<video N>`` and ``<audio N>`` (also ``<image_N>``; lower case
only; N is 1-based). The record supplies the media in indexed columns ``image_k``,
``video_k``, ``audio_k`` (k in 1..100; ``image_101`` is never read), with optional
``video_k_format`` / ``audio_k_format`` hints, or in plural list columns ``images``,
``videos``, ``audios`` (uncapped; element i is index i+1; in TSV/CSV a JSON array string).

The two representations are not mixed, per modality: the list is ignored when an indexed
column is non-empty. Which indexed columns count is the caller's policy: VQA looks only at
the *referenced* ones (``list_ignored_when="referenced"``), VMCQ at *any*
(``list_ignored_when="any"``).

``expand`` turns text into content parts: text between placeholders is kept verbatim as
text parts (whitespace-only segments dropped). Both formats make a record whose placeholder
has no usable medium a bad record, naming :func:`absent_column`, so no placeholder is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import orjson

from groundscope import media as media_mod
from groundscope.dataset.base import record_error
from groundscope.errors import MediaError, RecordError
from groundscope.types import ContentPart, MediaPart, MediaRef, Modality, Origin, TextPart

__all__ = [
    "MAX_INDEXED",
    "PLACEHOLDER_RE",
    "ListPolicy",
    "MediaKey",
    "absent_column",
    "bad_placeholder",
    "check_media_count",
    "collect_media",
    "expand",
    "indexed_column",
    "list_column",
    "placeholder",
    "referenced",
]

PLACEHOLDER_RE = re.compile(r"<(image|video|audio)[ _](\d+)>")
MAX_INDEXED = 100
KINDS = (Modality.IMAGE, Modality.VIDEO, Modality.AUDIO)

MediaKey = tuple[Modality, int]
ListPolicy = Literal["referenced", "any"]


def placeholder(key: MediaKey) -> str:
    """The canonical spelling of a placeholder: ``<image 1>``."""
    return f"<{key[0]} {key[1]}>"


def indexed_column(kind: Modality, index: int) -> str:
    return f"{kind}_{index}"


def list_column(kind: Modality) -> str:
    return f"{kind}s"


def absent_column(key: MediaKey) -> str:
    """The column a record lacks when ``key`` has no medium: ``image_2``, or past the
    indexed columns, the list element (``images[100]``)."""
    kind, index = key
    return indexed_column(kind, index) if index <= MAX_INDEXED else f"{list_column(kind)}[{index - 1}]"


def referenced(text: str) -> list[MediaKey]:
    """The placeholders in ``text``, each once, in order of first appearance."""
    keys = ((Modality(match.group(1)), int(match.group(2))) for match in PLACEHOLDER_RE.finditer(text))
    return list(dict.fromkeys(keys))


def bad_placeholder(text: str) -> str | None:
    """A problem with the placeholders of ``text`` (an index 0), or None."""
    for match in PLACEHOLDER_RE.finditer(text):
        if int(match.group(2)) == 0:
            return f"placeholder {match.group(0)} is invalid: media indices start at 1"
    return None


def expand(text: str, media: Mapping[MediaKey, MediaRef]) -> list[ContentPart]:
    """Split ``text`` at its placeholders into text and media parts, in order.

    Text segments are kept verbatim; whitespace-only ones are dropped, and so is a
    placeholder whose key is not in ``media``.
    """
    parts: list[ContentPart] = []
    last = 0
    for match in PLACEHOLDER_RE.finditer(text):
        _append_text(parts, text[last : match.start()])
        ref = media.get((Modality(match.group(1)), int(match.group(2))))
        if ref is not None:
            parts.append(MediaPart(ref))
        last = match.end()
    _append_text(parts, text[last:])
    return parts


def _append_text(parts: list[ContentPart], segment: str) -> None:
    if segment.strip():
        parts.append(TextPart(segment))


def collect_media(
    record: Mapping[str, Any],
    origin: Origin,
    base_dir: Path | None,
    *,
    wanted: Iterable[MediaKey] | None = None,
    list_ignored_when: ListPolicy = "referenced",
    limit: int | None = None,
) -> dict[MediaKey, MediaRef]:
    """The media a record supplies, as MediaRefs keyed by ``(kind, index)``.

    ``wanted=None`` collects every non-empty media column (VMCQ validates them all);
    otherwise only the listed keys are looked at and other columns are never parsed.
    Absent or empty values are simply not in the result. A value that cannot be used is a
    ``RecordError`` naming its column (``image_2``, ``images[1]``, ``audio_1_format``).
    More than ``limit`` media is a ``RecordError`` before any of them is looked at.
    """
    wanted_by_kind: dict[Modality, set[int]] | None = None
    if wanted is not None:
        wanted_by_kind = {kind: set() for kind in KINDS}
        for kind, index in wanted:
            wanted_by_kind[Modality(kind)].add(index)
    found: dict[MediaKey, MediaRef] = {}
    raw = {kind: _raw_values(record, origin, kind, None if wanted_by_kind is None
                             else wanted_by_kind[kind], list_ignored_when) for kind in KINDS}
    check_media_count(sum(len(v) for v in raw.values()), limit, origin)
    for kind, values in raw.items():
        for index, (column, value) in values.items():
            hint = _format_hint(record, origin, kind, index)
            try:
                ref = media_mod.media_from_value(value, kind, format=hint, base_dir=base_dir)
            except MediaError as exc:
                raise record_error(origin, column, str(exc)) from None
            found[(kind, index)] = ref
    return found


def check_media_count(count: int, limit: int | None, origin: Origin) -> None:
    """A ``RecordError`` when a record supplies more than ``limit`` media."""
    if limit is not None and count > limit:
        raise record_error(origin, "<media>",
                          f"{count} media, over the limit of {limit} per record "
                          "(max_media_per_record)")


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str | bytes | list | tuple | dict):
        return bool(value.strip() if isinstance(value, str) else value)
    return True


def _raw_values(
    record: Mapping[str, Any],
    origin: Origin,
    kind: Modality,
    indices: Collection[int] | None,
    policy: ListPolicy,
) -> dict[int, tuple[str, Any]]:
    """Index -> (column, raw value) for one modality, indexed columns or else the list."""
    if indices is not None and not indices:
        return {}
    in_range = range(1, MAX_INDEXED + 1)
    looked_at = in_range if indices is None else sorted(i for i in indices if i in in_range)
    values = {
        index: (indexed_column(kind, index), record[indexed_column(kind, index)])
        for index in looked_at
        if _present(record.get(indexed_column(kind, index)))
    }
    if policy == "any":
        ignore_list = any(_present(record.get(indexed_column(kind, i))) for i in in_range)
    else:
        ignore_list = bool(values)
    if ignore_list or not _present(record.get(list_column(kind))):
        return values
    items = _parse_list(record[list_column(kind)], origin, list_column(kind))
    return {
        position + 1: (f"{list_column(kind)}[{position}]", value)
        for position, value in enumerate(items)
        if _present(value) and (indices is None or position + 1 in indices)
    }


def _parse_list(value: Any, origin: Origin, column: str) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise RecordError(
                origin.path, origin.line, column, f"expected a JSON array of media values ({exc})"
            ) from None
        if isinstance(parsed, list):
            return parsed
        value = parsed
    raise RecordError(
        origin.path,
        origin.line,
        column,
        f"expected a list of media values, got {type(value).__name__}",
    )


def _format_hint(record: Mapping[str, Any], origin: Origin, kind: Modality, index: int) -> str | None:
    if kind is Modality.IMAGE or index > MAX_INDEXED:
        return None
    column = f"{indexed_column(kind, index)}_format"
    hint = record.get(column)
    if not _present(hint):
        return None
    if not isinstance(hint, str):
        raise record_error(origin, column, "expected a format name string")
    try:
        return media_mod.check_format(kind, hint)
    except MediaError as exc:
        raise record_error(origin, column, str(exc)) from None
