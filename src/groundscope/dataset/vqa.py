"""General-VQA (``general_vqa``): one record -> one ``Sample`` (pure, no media bytes read).

A record holds ``messages`` (OpenAI chat messages: a list in JSONL / parquet, a JSON string in
TSV / CSV) and an optional ``answer`` (a string, a list of strings, or a number, which becomes
its text). Content is a string or a list of ``text`` / ``image_url`` / ``input_audio`` /
``video_url`` parts (a video's ``fps`` inside ``video_url`` or beside it; in a placeholder
column, a video dict's ``fps``). Roles are ``system``, ``developer``, ``user``, ``assistant``
and ``tool``: a tool-calling transcript (``tool_calls``, ``tool_call_id``, ``name``) is kept
verbatim for the wire (``dataset/tools.py``). Placeholders (``<image 1>``...) are expanded
only in ``user`` messages whose content is a plain string, and only the media they reference
are resolved. Every
medium a record uses (referenced by a placeholder or named by a structured part) must be
there and usable: one that is absent or empty (``"image_1": ""``, ``{}``), missing on disk,
unreadable, outside the allowed media roots, or whose bytes are not of its kind makes the
record bad, naming its column (``image_1``, ``images[0]``) or part. Nothing is silently
dropped from a prompt.

A record with a ``paraphrases`` list (of question texts) stands for several questions about
the same media: :func:`expand_paraphrases` (the format's ``expand`` step) turns it into one
record per question before conversion (ids ``<id>#p0`` for its own question, ``<id>#p1``...
for the paraphrases, all in the group ``group``, else ``<id>``). ``elements`` and
``paraphrases`` must be lists of non-empty strings (a JSON array string in TSV / CSV).
Human labels of grounding (``human_hallucinated``, ``human_claims``) are read and checked by
``dataset/labels.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import orjson

from groundscope import media
from groundscope.bounds import MAX_MESSAGES
from groundscope.dataset import placeholders as ph
from groundscope.dataset.base import record_error
from groundscope.dataset.labels import grounding_labels
from groundscope.dataset.tools import checked_tool_fields
from groundscope.errors import MediaError
from groundscope.types import (
    ContentPart,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Sample,
    TextPart,
)

if TYPE_CHECKING:  # the package __init__ imports this module
    from groundscope.dataset.base import FormatContext

__all__ = ["METADATA_FIELDS", "expand_paraphrases", "record_to_sample", "sample_id"]

ROLES = ("system", "developer", "user", "assistant", "tool")
METADATA_FIELDS = ("category", "group", "elements", "paraphrases", "human_label")
_LIST_METADATA = ("elements", "paraphrases")
# part type -> (modality, key of the medium inside the part body)
_MEDIA_PARTS = {
    "image_url": (Modality.IMAGE, "url"),
    "input_audio": (Modality.AUDIO, "data"),
    "video_url": (Modality.VIDEO, "url"),
}


def record_to_sample(record: dict[str, Any], origin: Origin, ctx: FormatContext) -> Sample:
    """Convert one General-VQA record; a malformed one raises ``RecordError``."""
    raw_messages = _raw_messages(record, origin)
    parts = _media_parts(raw_messages)
    ph.check_media_count(parts, ctx.max_media, origin)  # before any medium is looked at
    found = _placeholder_media(raw_messages, record, origin, ctx, ctx.max_media - parts)
    messages = [_message(i, raw, origin, ctx, found) for i, raw in enumerate(raw_messages)]
    if ctx.system_prompt and not any(m.role in ("system", "developer") for m in messages):
        messages.insert(0, Message("system", ctx.system_prompt))
    users = [m for m in messages if m.role == "user"]
    if not users:
        raise record_error(origin, "messages", "no user message")
    return Sample(
        id=sample_id(record, origin),
        dataset=ctx.dataset,
        subset=ctx.subset,
        messages=tuple(messages),
        origin=origin,
        target=_answer(record, origin),
        question=_question(users[-1]),
        metadata=_metadata(record, origin, ctx.human_label_field),
    )


def sample_id(record: Mapping[str, Any], origin: Origin) -> str:
    """The record's ``id`` (or ``index``) field when present, else ``<file stem>:<line>``."""
    for key in ("id", "index"):
        value = record.get(key)
        if value is not None and not isinstance(value, bool) and str(value).strip():
            return _number_text(value) if isinstance(value, int | float) else str(value)
    return f"{origin.path.stem}:{origin.line}"


def expand_paraphrases(record: dict[str, Any], origin: Origin) -> list[dict[str, Any]]:
    """One record per question of a record with ``paraphrases``; other records unchanged.

    A paraphrase replaces the text of the last user message and keeps its media: in a list
    of parts the first text part takes the paraphrase (the other text parts go); in a plain
    string the placeholders the paraphrase does not repeat are appended to it.

    >>> from pathlib import Path
    >>> rec = {"id": "q1", "messages": [{"role": "user", "content": "Count the cats.<image 1>"}],
    ...        "paraphrases": ["How many cats are there?"]}
    >>> [(r["id"], r["group"], r["messages"][0]["content"])
    ...  for r in expand_paraphrases(rec, Origin(Path("d.jsonl"), 1))]
    [('q1#p0', 'q1', 'Count the cats.<image 1>'), ('q1#p1', 'q1', 'How many cats are there?<image 1>')]
    """
    value = record.get("paraphrases")
    if value is None or value == "":
        return [record]
    texts = _string_list(value, origin, "paraphrases")
    raw = _raw_messages(record, origin)
    users = [i for i, m in enumerate(raw) if m["role"] == "user"]
    if not texts or not users:
        return [record]
    base = sample_id(record, origin)
    group = record.get("group")
    group = base if group is None or str(group).strip() == "" else group
    out = [{**record, "id": f"{base}#p0", "group": group, "paraphrases": None}]
    for k, text in enumerate(texts, 1):
        messages = list(raw)
        messages[users[-1]] = {**raw[users[-1]], "content": _rephrase(raw[users[-1]].get("content"), text)}
        out.append({**record, "messages": messages, "id": f"{base}#p{k}", "group": group,
                    "paraphrases": None})
    return out


def _rephrase(content: Any, text: str) -> Any:
    if isinstance(content, str):
        have = set(ph.referenced(text))
        return text + "".join(ph.placeholder(k) for k in dict.fromkeys(ph.referenced(content))
                              if k not in have)
    if not isinstance(content, list):
        return text  # conversion reports what is wrong with the original
    out: list[Any] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            if not any(isinstance(p, dict) and p.get("type") == "text" for p in out):
                out.append({"type": "text", "text": text})
            continue
        out.append(part)
    if not any(isinstance(p, dict) and p.get("type") == "text" for p in out):
        out.insert(0, {"type": "text", "text": text})
    return out


def _string_list(value: Any, origin: Origin, field: str) -> list[str]:
    """A list-of-strings field (a JSON array string in TSV / CSV), validated."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise record_error(origin, field, f"not a valid JSON array ({exc})") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise record_error(origin, field, "expected a list of non-empty strings")
    return value


def _raw_messages(record: Mapping[str, Any], origin: Origin) -> list[dict[str, Any]]:
    value = record.get("messages")
    if value is None:
        raise record_error(origin, "messages", "missing")
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise record_error(origin, "messages", f"not valid JSON ({exc})") from None
    if not isinstance(value, list) or not value:
        got = "an empty list" if value == [] else type(value).__name__
        raise record_error(origin, "messages", f"expected a non-empty list of messages, got {got}")
    if len(value) > MAX_MESSAGES:
        raise record_error(origin, "messages", f"{len(value)} messages, over the limit of {MAX_MESSAGES}")
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise record_error(origin, f"messages[{i}]", "expected an object with role and content")
        if message.get("role") not in ROLES:
            problem = f"unknown role {message.get('role')!r}; expected one of {', '.join(ROLES)}"
            raise record_error(origin, f"messages[{i}].role", problem)
    return value


def _media_parts(raw_messages: list[dict[str, Any]]) -> int:
    """How many structured media parts (``image_url`` ...) the raw messages hold."""
    return sum(isinstance(p, dict) and (p.get("type") or next(iter(p), None)) in _MEDIA_PARTS
               for m in raw_messages if isinstance(m.get("content"), list) for p in m["content"])


def _placeholder_media(
    raw_messages: list[dict[str, Any]],
    record: Mapping[str, Any],
    origin: Origin,
    ctx: FormatContext,
    limit: int,
) -> dict[ph.MediaKey, MediaRef]:
    """The media referenced by plain-text user messages, each checked (at most
    ``limit``, else the record is bad); one that is absent
    or unusable is a RecordError naming its column."""
    keys: list[ph.MediaKey] = []
    for i, message in enumerate(raw_messages):
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, str):
            continue
        problem = ph.bad_placeholder(content)
        if problem:
            raise record_error(origin, f"messages[{i}].content", problem)
        keys.extend(ph.referenced(content))
    if not keys:
        return {}
    keys = list(dict.fromkeys(keys))
    found = ph.collect_media(record, origin, ctx.base_dir, wanted=keys, limit=limit)
    for key in keys:
        ref = found.get(key)
        if ref is None:
            raise record_error(origin, ph.absent_column(key), _absent_reason(key, record, found))
        _check(ref, origin, _column_of(record, key))
    return found


def _column_of(record: Mapping[str, Any], key: ph.MediaKey) -> str:
    column = ph.indexed_column(*key)
    return column if column in record else f"{ph.list_column(key[0])}[{key[1] - 1}]"


def _check(ref: MediaRef, origin: Origin, field: str) -> None:
    """Cheap load-time validation: the file exists inside the media roots, size cap, magic
    bytes and format, image header and pixel cap."""
    try:
        media.check(ref, decode=False)
    except MediaError as exc:
        raise record_error(origin, field, str(exc)) from None


def _absent_reason(key: ph.MediaKey, record: Mapping[str, Any],
                   found: Mapping[ph.MediaKey, MediaRef]) -> str:
    kind, index = key
    used = ", ".join(ph.indexed_column(*k) for k in found
                     if k[0] == kind and record.get(ph.indexed_column(*k)))
    if used and record.get(ph.list_column(kind)):
        return (f"no {kind} for {ph.placeholder(key)} ({ph.indexed_column(kind, index)} is "
                f"absent; {ph.list_column(kind)} is ignored because {used} is used: indexed "
                "and list columns are not mixed)")
    if index > ph.MAX_INDEXED:
        where = f"indexed columns stop at {kind}_{ph.MAX_INDEXED} and {ph.list_column(kind)}"
        return f"no {kind} for {ph.placeholder(key)} ({where} has no element {index})"
    columns = f"{ph.indexed_column(kind, index)} / {ph.list_column(kind)}[{index - 1}]"
    return f"no {kind} for {ph.placeholder(key)} ({columns} absent or empty)"


def _message(
    i: int,
    raw: Mapping[str, Any],
    origin: Origin,
    ctx: FormatContext,
    found: Mapping[ph.MediaKey, MediaRef],
) -> Message:
    role, content = raw["role"], raw.get("content")
    tools = checked_tool_fields(i, raw, origin)
    if isinstance(content, str):
        if role == "user" and ph.PLACEHOLDER_RE.search(content):
            parts = ph.expand(content, found)
            return Message(role, tuple(parts) if parts else content, **tools)
        return Message(role, content, **tools)
    if content is None and role == "assistant":
        return Message(role, "", **tools)
    if not isinstance(content, list):
        got = type(content).__name__
        problem = f"expected a string or a list of content parts, got {got}"
        raise record_error(origin, f"messages[{i}].content", problem)
    field = f"messages[{i}].content"
    parts = (_part(f"{field}[{j}]", part, origin, ctx) for j, part in enumerate(content))
    return Message(role, tuple(parts), **tools)


def _part(field: str, part: Any, origin: Origin, ctx: FormatContext) -> ContentPart:
    if not isinstance(part, dict):
        raise record_error(origin, field, f"expected a content part object, got {type(part).__name__}")
    ptype = part.get("type")
    if ptype is None and len(part) == 1:  # {"image_url": {...}}: the type is the only key
        ptype = next(iter(part))
    if ptype == "text":
        if not isinstance(part.get("text"), str):
            raise record_error(origin, f"{field}.text", "expected a string")
        return TextPart(part["text"])
    if ptype not in _MEDIA_PARTS:
        known = ", ".join(["text", *_MEDIA_PARTS])
        raise record_error(origin, f"{field}.type", f"unknown part type {ptype!r}; expected {known}")
    fps = _video_fps(field, part, origin) if ptype == "video_url" else None
    return MediaPart(_part_media(f"{field}.{ptype}", ptype, part.get(ptype), origin, ctx, fps))


def _video_fps(field: str, part: Mapping[str, Any], origin: Origin) -> float | None:
    """A video part's ``fps``: inside ``video_url`` (where EvalScope reads it) or beside it
    (the wire form it is sent in); both, and different, is a bad record."""
    body = part.get("video_url")
    values: dict[str, float | None] = {}
    for where, holder in ((f"{field}.video_url.fps", body), (f"{field}.fps", part)):
        if isinstance(holder, Mapping) and holder.get("fps") is not None:
            try:
                values[where] = media.check_fps(holder["fps"])
            except MediaError as exc:
                raise record_error(origin, where, str(exc).removeprefix("fps: ")) from None
    if len(set(values.values())) > 1:
        raise record_error(origin, f"{field}.fps", f"differs from {field}.video_url.fps; give one")
    return next(iter(values.values()), None)


def _part_media(field: str, ptype: str, body: Any, origin: Origin, ctx: FormatContext,
                fps: float | None = None) -> MediaRef:
    kind, value_key = _MEDIA_PARTS[ptype]
    if isinstance(body, str) and ptype != "input_audio":
        body = {value_key: body}
    if not isinstance(body, dict):
        raise record_error(origin, field, f"expected an object with {value_key!r}")
    value = body.get(value_key)
    if not isinstance(value, str) or not value.strip():
        raise record_error(origin, f"{field}.{value_key}", "missing or empty")
    detail = body.get("detail")
    if detail is not None and not isinstance(detail, str):
        raise record_error(origin, f"{field}.detail", "expected a string")
    try:
        fmt = media.check_format(kind, body.get("format"))
    except MediaError as exc:
        raise record_error(origin, f"{field}.format", str(exc)) from None
    try:
        ref = media.media_from_value(value, kind, format=fmt, base_dir=ctx.base_dir,
                                     detail=detail, fps=fps)
    except MediaError as exc:
        raise record_error(origin, f"{field}.{value_key}", str(exc)) from None
    _check(ref, origin, f"{field}.{value_key}")
    return ref


def _number_text(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _answer(record: Mapping[str, Any], origin: Origin) -> tuple[str, ...]:
    value = record.get("answer")
    items = value if isinstance(value, list) else [value]
    answers: list[str] = []
    for k, item in enumerate(items):
        field = f"answer[{k}]" if isinstance(value, list) else "answer"
        if item is None or item == "":
            continue
        if isinstance(item, str):
            answers.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            answers.append(_number_text(item))
        else:
            got = type(item).__name__
            problem = f"expected a string, a list of strings or a number, got {got}"
            raise record_error(origin, field, problem)
    return tuple(answers)


def _question(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = (p.text.strip() for p in message.content if isinstance(p, TextPart))
    return " ".join(t for t in texts if t)


def _metadata(record: Mapping[str, Any], origin: Origin,
              human_label_field: str = "human_label") -> Mapping[str, Any]:
    meta: dict[str, Any] = {}
    for key in METADATA_FIELDS:
        value = record.get(key)
        if value is None or (key in _LIST_METADATA and value == ""):
            continue
        if key in _LIST_METADATA:
            value = _string_list(value, origin, key)
        meta[key] = value
    if record.get(human_label_field) is not None:  # the configured label column, one name
        meta["human_label"] = record[human_label_field]
    meta.update(grounding_labels(record, origin))  # human_hallucinated, human_claims
    return MappingProxyType(meta)
