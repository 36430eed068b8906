"""General-VQA: record -> Sample, and the lazy loader (limit, strict, subsets, examples)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from groundscope import media
from groundscope.dataset import FORMATS, FormatContext, get_format, load_samples, vqa
from groundscope.errors import ConfigError, DatasetError, RecordError
from groundscope.types import MediaPart, MediaRef, Message, Modality, Origin, Sample, TextPart
from media_fixtures import (
    EXAMPLES,
    b64,
    data_uri,
    image_bytes,
    make_media_dir,
    user,
    wav_bytes,
    write_delimited,
    write_jsonl,
    write_parquet,
)

IMAGE, AUDIO, VIDEO = Modality.IMAGE, Modality.AUDIO, Modality.VIDEO


@pytest.fixture
def ds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dataset directory ``tmp_path/vqa`` next to real media in ``tmp_path/media``, run
    from ``tmp_path`` (so ``../media`` is inside the working directory, a media root)."""
    make_media_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vqa").mkdir()
    return tmp_path / "vqa"


def convert(record: dict[str, Any], ds: Path, line: int = 1, **ctx: Any) -> Sample:
    origin = Origin(ds / "data.jsonl", line)
    return vqa.record_to_sample(record, origin, FormatContext("general_vqa", "data", ds, **ctx))


def bad(record: dict[str, Any], ds: Path, line: int = 3) -> str:
    with pytest.raises(RecordError) as info:
        convert(record, ds, line)
    return str(info.value)


def parts(message: Message) -> list[Any]:
    assert isinstance(message.content, tuple)
    return [p.text if isinstance(p, TextPart) else p.media for p in message.content]


# --- OpenAI messages -----------------------------------------------------------------------


def test_structured_parts_of_every_kind(ds: Path) -> None:
    content = [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": "../media/dog.jpg", "detail": "high"}},
        {"type": "input_audio", "input_audio": {"data": "../media/tone.wav", "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(wav_bytes()), "format": "wav"}},
        {"type": "video_url", "video_url": {"url": "../media/clip.mp4"}},
        {"type": "image_url", "image_url": {"url": data_uri(image_bytes("PNG"), "image/png")}},
    ]
    sample = convert({"messages": [user(content)], "answer": "x"}, ds)
    got = parts(sample.messages[0])
    assert got[0] == "Compare"
    assert got[1] == MediaRef(IMAGE, "../media/dog.jpg", detail="high", base_dir=ds)
    assert got[2] == MediaRef(AUDIO, "../media/tone.wav", format="wav", base_dir=ds)
    assert got[3].kind is AUDIO and media.load(got[3])[0] == wav_bytes()
    assert got[4] == MediaRef(VIDEO, "../media/clip.mp4", base_dir=ds)
    assert got[5].source.startswith("data:image/png;base64,")
    assert media.wire_part(got[1])["image_url"]["detail"] == "high"


def test_roles_multi_turn_and_system_prompt(ds: Path) -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        user("First?"),
        {"role": "assistant", "content": "One."},
        user("Second?"),
    ]
    sample = convert({"messages": messages}, ds, system_prompt="IGNORED")
    assert [m.role for m in sample.messages] == ["developer", "user", "assistant", "user"]
    assert sample.question == "Second?"
    plain = convert({"messages": [user("Hi")]}, ds, system_prompt="You are a VQA model.")
    assert plain.messages[0] == Message("system", "You are a VQA model.")
    own = convert({"messages": [{"role": "system", "content": "Mine"}, user("Hi")]}, ds, system_prompt="X")
    assert [m.content for m in own.messages] == ["Mine", "Hi"]


def test_part_type_inferred_from_a_single_key_and_string_urls(ds: Path) -> None:
    content = [{"image_url": "../media/dog.jpg"}, {"type": "video_url", "video_url": "../media/clip.mp4"}]
    got = parts(convert({"messages": [user(content)]}, ds).messages[0])
    assert [r.kind for r in got] == [IMAGE, VIDEO]


C0 = "messages[0].content[0]"


def img(body: Any) -> dict[str, Any]:
    return user([{"type": "image_url", "image_url": body}])


def aud(body: Any) -> dict[str, Any]:
    return user([{"type": "input_audio", "input_audio": body}])


@pytest.mark.parametrize(
    ("message", "field", "problem"),
    [
        (user([{"type": "text", "text": "a"}, {"type": "image"}]), "messages[0].content[1].type",
         "unknown part type 'image'"),
        (user([{"type": "text", "text": 5}]), f"{C0}.text", "expected a string"),
        (user(["just a string"]), C0, "expected a content part object"),
        (img({}), f"{C0}.image_url.url", "missing or empty"),
        (img({"url": "x.jpg", "detail": 3}), f"{C0}.image_url.detail", "expected a string"),
        (aud({"data": "../media/tone.wav", "format": "ogg"}), f"{C0}.input_audio.format",
         "unsupported audio format 'ogg'"),
        (aud("../media/tone.wav"), f"{C0}.input_audio", "expected an object"),
        (img({"url": "../media/nope.jpg"}), f"{C0}.image_url.url",
         "image file not found: '../media/nope.jpg'"),
        (img({"url": "data:image/png;base64,@@"}), f"{C0}.image_url.url", "data URI: invalid base64"),
        (user(42), "messages[0].content", "expected a string or a list of content parts, got int"),
        ({"role": "robot", "content": "x"}, "messages[0].role", "unknown role 'robot'"),
        ({"role": "tool", "content": "x"}, "messages[0].tool_call_id", "missing or empty"),
        ("hello", "messages[0]", "expected an object"),
    ],
)  # fmt: skip
def test_bad_parts_name_the_field(ds: Path, message: Any, field: str, problem: str) -> None:
    text = bad({"messages": [message]}, ds)
    assert text.startswith(f"{ds / 'data.jsonl'}:3: {field}: {problem}")


@pytest.mark.parametrize(
    ("record", "field", "problem"),
    [
        ({}, "messages", "missing"),
        ({"messages": "[{oops"}, "messages", "not valid JSON"),
        ({"messages": []}, "messages", "expected a non-empty list of messages, got an empty list"),
        ({"messages": {"role": "user"}}, "messages", "expected a non-empty list of messages, got dict"),
        ({"messages": [{"role": "assistant", "content": "a"}]}, "messages", "no user message"),
        ({"messages": [user("q")], "answer": True}, "answer", "expected a string"),
        ({"messages": [user("q")], "answer": ["a", {"b": 1}]}, "answer[1]", "expected a string"),
        ({"messages": [user("q")], "elements": "[broken"}, "elements", "not a valid JSON array"),
    ],
)  # fmt: skip
def test_bad_records(ds: Path, record: dict[str, Any], field: str, problem: str) -> None:
    assert bad(record, ds).startswith(f"{ds / 'data.jsonl'}:3: {field}: {problem}")


def test_assistant_content_may_be_null(ds: Path) -> None:
    sample = convert({"messages": [user("q"), {"role": "assistant", "content": None}, user("r")]}, ds)
    assert sample.messages[1] == Message("assistant", "")


# --- answer, id, question, metadata --------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "target"),
    [
        ("Dog", ("Dog",)),
        (["Dog", "Puppy"], ("Dog", "Puppy")),
        (42, ("42",)),
        (2.5, ("2.5",)),
        (3.0, ("3",)),
        ([1, "two"], ("1", "two")),
        (None, ()),
        ("", ()),
    ],
)
def test_answer_forms(ds: Path, answer: Any, target: tuple[str, ...]) -> None:
    record: dict[str, Any] = {"messages": [user("q")]}
    if answer is not None:
        record["answer"] = answer
    assert convert(record, ds).target == target


def test_sample_id_from_id_index_or_position(ds: Path) -> None:
    base = {"messages": [user("q")]}
    assert convert({**base, "id": "abc"}, ds).id == "abc"
    assert convert({**base, "index": 17}, ds).id == "17"
    assert convert({**base, "index": 4.0}, ds).id == "4"
    assert convert({**base, "id": "x", "index": 2}, ds).id == "x"
    assert convert({**base, "id": ""}, ds, line=9).id == "data:9"
    assert convert(base, ds, line=12).id == "data:12"


def test_sample_fields_and_metadata(ds: Path) -> None:
    record = {
        "messages": [user("What?")],
        "category": "animals",
        "group": "g1",
        "elements": '["dog", "grass"]',  # a JSON string, as in TSV
        "paraphrases": ["What is it?"],
        "human_label": "A",
        "unrelated": "dropped",
    }
    sample = convert(record, ds, line=5)
    assert (sample.dataset, sample.subset, sample.origin) == (
        "general_vqa",
        "data",
        Origin(ds / "data.jsonl", 5),
    )
    assert dict(sample.metadata) == {
        "category": "animals",
        "group": "g1",
        "elements": ["dog", "grass"],
        "paraphrases": ["What is it?"],
        "human_label": "A",
    }
    assert dict(convert({"messages": [user("q")]}, ds).metadata) == {}


# --- placeholders --------------------------------------------------------------------------


def test_placeholders_expand_in_plain_user_messages(ds: Path) -> None:
    record = {
        "messages": [user("<image 1> Watch <video 1> and describe both.")],
        "image_1": "../media/dog.jpg",
        "video_1": "../media/clip.mp4",
    }
    sample = convert(record, ds)
    assert parts(sample.messages[0]) == [
        MediaRef(IMAGE, "../media/dog.jpg", base_dir=ds),
        " Watch ",
        MediaRef(VIDEO, "../media/clip.mp4", base_dir=ds),
        " and describe both.",
    ]
    assert sample.question == "Watch and describe both."


def test_structured_content_and_other_roles_are_untouched(ds: Path) -> None:
    record = {
        "messages": [
            {"role": "system", "content": "<image 1> in system"},
            {"role": "user", "content": [{"type": "text", "text": "<image 1> What animal is this?"}]},
            {"role": "assistant", "content": "<image 1> as assistant"},
            user("plain, no placeholder"),
        ],
        "image_1": "../media/dog.jpg",
    }
    sample = convert(record, ds)
    assert sample.messages[0].content == "<image 1> in system"
    assert sample.messages[1].content == (TextPart("<image 1> What animal is this?"),)
    assert sample.messages[2].content == "<image 1> as assistant"
    assert sample.messages[3].content == "plain, no placeholder"


def test_only_referenced_media_are_resolved(ds: Path) -> None:
    record = {
        "messages": [user("What is this?<image 1>")],
        "image_1": "../media/dog.jpg",
        "image_2": "data:image/png;base64,@@@not-base64",
        "audio_1": 123,
        "audio_1_format": "flac",
        "videos": "not json",
    }
    assert parts(convert(record, ds).messages[0])[1].source == "../media/dog.jpg"


def test_referenced_malformed_medium_is_a_bad_record(ds: Path) -> None:
    record = {"messages": [user("<image 1> and <audio 2>")], "image_1": "../media/dog.jpg", "audio_2": 5}
    assert bad(record, ds, line=4) == (f"{ds / 'data.jsonl'}:4: audio_2: unusable audio value of type int")
    hint = {"messages": [user("<audio 1>")], "audio_1": "../media/tone.wav", "audio_1_format": "aac"}
    assert bad(hint, ds).startswith(f"{ds / 'data.jsonl'}:3: audio_1_format: unsupported audio format")


def test_index_zero_is_a_bad_record(ds: Path) -> None:
    text = bad({"messages": [user("Look <image 0>")], "image_1": "../media/dog.jpg"}, ds)
    problem = "placeholder <image 0> is invalid: media indices start at 1"
    assert text == f"{ds / 'data.jsonl'}:3: messages[0].content: {problem}"


def test_list_columns_and_precedence_in_vqa(ds: Path) -> None:
    listed = {"messages": [user("<image 1><image 2>")], "images": '["../media/dog.jpg", "../media/cat.png"]'}
    assert [r.source for r in parts(convert(listed, ds).messages[0])] == [
        "../media/dog.jpg",
        "../media/cat.png",
    ]
    # a referenced indexed column is set: the list is ignored, so <image 2> has no medium
    mixed = {**listed, "image_1": "../media/cat.png"}
    assert bad(mixed, ds) == (
        f"{ds / 'data.jsonl'}:3: image_2: no image for <image 2> (image_2 is absent; images is "
        "ignored because image_1 is used: indexed and list columns are not mixed)")
    # an unreferenced indexed column does not block the list (VQA policy)
    unref = {
        "messages": [user("<image 2>")],
        "image_1": "x.jpg",
        "images": ["../media/dog.jpg", "../media/cat.png"],
    }
    assert [r.source for r in parts(convert(unref, ds).messages[0])] == ["../media/cat.png"]


@pytest.mark.parametrize(("extra", "field", "problem"), [
    ({}, "image_2", "no image for <image 2> (image_2 / images[1] absent or empty)"),
    ({"image_2": ""}, "image_2", "no image for <image 2> (image_2 / images[1] absent or empty)"),
    ({"image_2": {}}, "image_2", "no image for <image 2> (image_2 / images[1] absent or empty)"),
    ({"image_2": "../media/gone.jpg"}, "image_2", "image file not found: '../media/gone.jpg'"),
    ({"image_2": {"path": "../media/gone.jpg"}}, "image_2", "image file not found"),
    ({"images": ["../media/dog.jpg", "  "]}, "image_2", "no image for <image 2>"),
])
def test_a_referenced_medium_absent_empty_or_missing_is_a_bad_record(
        ds: Path, caplog: pytest.LogCaptureFixture, extra: dict[str, Any], field: str,
        problem: str) -> None:
    """Never dropped from the prompt with a warning: the record is bad, naming the column."""
    record = {"messages": [user("Describe <image 1> and <image 2>.")], **extra}
    if "images" not in extra:
        record["image_1"] = "../media/dog.jpg"
    with caplog.at_level(logging.WARNING, logger="groundscope"):
        text = bad(record, ds)
    assert text.startswith(f"{ds / 'data.jsonl'}:3: {field}: {problem}")
    assert caplog.records == []


def test_past_image_100_only_the_list_can_supply_a_medium(ds: Path) -> None:
    indexed = {"messages": [user("Look <image 101>")], "image_101": "../media/dog.jpg"}
    assert bad(indexed, ds) == (f"{ds / 'data.jsonl'}:3: images[100]: no image for <image 101> "
                                "(indexed columns stop at image_100 and images has no element 101)")
    listed = {"messages": [user("<image 101>")], "images": ["../media/dog.jpg"] * 101}
    assert parts(convert(listed, ds).messages[0])[0].source == "../media/dog.jpg"


def test_relative_media_resolve_against_the_dataset_dir_then_cwd(
    ds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # "media/dog.jpg" exists only relative to the CWD
    record = {"messages": [user("<image 1>")], "image_1": "media/dog.jpg"}
    ref = parts(convert(record, ds).messages[0])[0]
    assert media.exists(ref) and media.load(ref)[1] == "image/jpeg"


def test_parquet_struct_media(ds: Path) -> None:
    png = image_bytes("PNG")
    messages = '[{"role": "user", "content": "<image 1> what?"}]'
    rows = [
        {"messages": messages, "image_1": {"bytes": png, "path": "x.png"}},
        {"messages": messages, "image_1": {"bytes": None, "path": "../media/dog.jpg"}},
    ]
    path = write_parquet(ds / "pq.parquet", rows)
    samples = [s for _, s in load_samples("general_vqa", path, ["pq"])]
    assert parts(samples[0].messages[0])[0].source == png
    assert media.load(parts(samples[0].messages[0])[0])[1] == "image/png"
    assert parts(samples[1].messages[0])[0].source == "../media/dog.jpg"
    assert samples[1].id == "pq:2"


# --- TSV -----------------------------------------------------------------------------------


def test_tsv_messages_are_json_strings(ds: Path) -> None:
    messages = [
        user(
            [
                {"type": "text", "text": "What?"},
                {"type": "image_url", "image_url": {"url": "../media/dog.jpg"}},
            ]
        )
    ]
    rows = [[messages, "Dog", ["dog"]], ["[oops", "x", ""]]
    path = write_delimited(ds / "t.tsv", ["messages", "answer", "elements"], rows)
    items = [item for _, item in load_samples("general_vqa", path, ["t"])]
    sample = items[0]
    assert isinstance(sample, Sample)
    assert sample.target == ("Dog",) and sample.question == "What?"
    assert sample.metadata["elements"] == ["dog"]
    assert isinstance(items[1], RecordError)
    assert str(items[1]).startswith(f"{path}:3: messages: not valid JSON")


# --- the loader ----------------------------------------------------------------------------


def records(n: int, missing_from: int | None = None) -> list[dict[str, Any]]:
    out = []
    for i in range(1, n + 1):
        image = "../media/dog.jpg" if missing_from is None or i < missing_from else f"../media/none{i}.jpg"
        out.append({"messages": [user(f"Q{i} <image 1>")], "image_1": image, "answer": str(i)})
    return out


def test_limit_int_per_subset(ds: Path) -> None:
    write_jsonl(ds / "a.jsonl", records(5))
    write_jsonl(ds / "b_test.jsonl", records(3))
    got = list(load_samples("general_vqa", ds, None, limit=2))
    assert [(sub, s.id) for sub, s in got] == [
        ("a", "a:1"),
        ("a", "a:2"),
        ("b", "b_test:1"),
        ("b", "b_test:2"),
    ]
    with pytest.raises(ConfigError, match=r"^limit: must be a record count >= 1"):
        list(load_samples("general_vqa", ds, ["a"], limit=0))  # the one rule (bounds.py)


def test_limit_fraction_floors_like_evalscope(ds: Path) -> None:
    write_jsonl(ds / "a.jsonl", records(10))
    assert len(list(load_samples("general_vqa", ds, ["a"], limit=0.25))) == 2
    assert len(list(load_samples("general_vqa", ds, ["a"], limit=0.01))) == 1  # at least one
    with pytest.raises(ConfigError, match=r"^limit: 1.0 is ambiguous"):
        list(load_samples("general_vqa", ds, ["a"], limit=1.0))


def test_limit_is_applied_before_any_media_is_looked_at(
    ds: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_jsonl(ds / "a.jsonl", [*records(3), *records(3, missing_from=1), "{bad json"])
    calls: list[str] = []
    real_check = media.check

    def spy(ref: MediaRef, **kwargs: Any) -> None:
        calls.append(str(ref.source))
        real_check(ref, **kwargs)

    monkeypatch.setattr(media, "check", spy)
    with caplog.at_level(logging.WARNING, logger="groundscope"):
        got = list(load_samples("general_vqa", ds, ["a"], limit=3, strict=True))
    assert len(got) == 3 and calls == ["../media/dog.jpg"] * 3
    assert caplog.records == []


def test_bad_records_are_yielded_or_raised_with_strict(ds: Path) -> None:
    path = write_jsonl(
        ds / "a.jsonl", [*records(1), "[1]", {"messages": [user("x")], "answer": {}}, *records(1)]
    )
    items = [item for _, item in load_samples("general_vqa", ds, ["a"])]
    assert [type(i).__name__ for i in items] == ["Sample", "RecordError", "RecordError", "Sample"]
    assert str(items[1]) == f"{path}:2: <json>: expected a JSON object, got array"
    assert str(items[2]).startswith(f"{path}:3: answer: ")
    stream = load_samples("general_vqa", ds, ["a"], strict=True)
    assert isinstance(next(stream)[1], Sample)  # lazy: the bad record has not been read yet
    with pytest.raises(RecordError, match=":2: <json>"):
        next(stream)


def test_loader_context_and_errors(ds: Path) -> None:
    write_jsonl(ds / "a.jsonl", records(1))
    ((_, sample),) = load_samples("general_vqa", ds, ["a"], ctx_kwargs={"system_prompt": "Be terse."})
    assert sample.messages[0] == Message("system", "Be terse.")
    with pytest.raises(ConfigError, match="did you mean 'general_vqa'"):
        list(load_samples("general_vqaa", ds))
    with pytest.raises(ConfigError, match="bad dataset options"):
        list(load_samples("general_vqa", ds, ["a"], ctx_kwargs={"colour": "red"}))
    with pytest.raises(ConfigError, match="bad dataset options"):
        list(load_samples("general_vqa", ds, ["a"], ctx_kwargs={"subset": "zzz"}))
    for limit in (-1, 1.5, 0.0, True, "three", float("nan")):
        with pytest.raises(ConfigError, match="limit"):
            list(load_samples("general_vqa", ds, ["a"], limit=limit))  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="no file for subset 'zzz'"):
        list(load_samples("general_vqa", ds, ["zzz"]))
    empty = ds.parent / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match="no dataset files"):
        list(load_samples("general_vqa", empty))


def test_registry() -> None:
    fmt = get_format("general_vqa")
    assert fmt is FORMATS["general_vqa"]
    assert (fmt.pretty_name, fmt.split, fmt.default_metrics, fmt.primary_metric) == (
        "General-VQA", "test", ("BLEU", "Rouge"), "rouge-l-r",
    )  # fmt: skip


# --- the bundled examples ------------------------------------------------------------------


def test_bundled_examples_load_and_encode() -> None:
    vqa_dir = EXAMPLES / "vqa"

    def load(path: Path, subset: str) -> list[Any]:
        return [s for _, s in load_samples("general_vqa", path, [subset], strict=True)]

    jsonl = load(vqa_dir / "example_openai.jsonl", "example_openai")
    tsv = load(vqa_dir / "example_openai.tsv", "example_openai")
    assert len(jsonl) == len(tsv) >= 9
    for a, b in zip(jsonl, tsv, strict=True):  # TSV rows start at line 2 (the header is line 1)
        assert (a.messages, a.target, a.question) == (b.messages, b.target, b.question)
        assert (a.id, b.id) == (f"example_openai:{a.origin.line}", f"example_openai:{a.origin.line + 1}")
    placeholder = load(vqa_dir, "example_placeholder")
    assert [s.target for s in placeholder][:5] == [
        ("Dog",),
        ("Museum",),
        ("Tokyo",),
        ("Tesla",),
        ("Running",),
    ]
    mixed = placeholder[-1].messages[0]
    assert [type(p).__name__ for p in mixed.content] == ["MediaPart", "TextPart", "MediaPart", "TextPart"]
    kinds = {m.kind for s in [*jsonl, *placeholder] for m in s.media()}
    assert kinds == {IMAGE, AUDIO, VIDEO}
    for sample in [*jsonl, *placeholder]:
        for ref in sample.media():
            media.check(ref)
            assert media.wire_part(ref)["type"] in ("image_url", "input_audio", "video_url")
    system = next(s for s in jsonl if s.messages[0].role == "system")
    assert isinstance(system.messages[1].content[1], MediaPart)
    assert system.messages[1].content[1].media.detail == "high"
