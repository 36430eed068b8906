"""groundscope.dataset.placeholders: the regex, media columns, list precedence, expansion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundscope.dataset import placeholders as ph
from groundscope.errors import RecordError
from groundscope.types import MediaPart, MediaRef, Modality, Origin, TextPart
from media_fixtures import b64, data_uri, image_bytes, wav_bytes

IMAGE, AUDIO, VIDEO = Modality.IMAGE, Modality.AUDIO, Modality.VIDEO
ORIGIN = Origin(Path("/data/ds.jsonl"), 7)


def collect(record: dict[str, Any], **kw: Any) -> dict[ph.MediaKey, MediaRef]:
    return ph.collect_media(record, ORIGIN, Path("/data"), **kw)


def sources(found: dict[ph.MediaKey, MediaRef]) -> dict[ph.MediaKey, Any]:
    return {key: ref.source for key, ref in found.items()}


# --- the pattern ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<image_1>", [(IMAGE, 1)]),
        ("<image 1>", [(IMAGE, 1)]),
        ("<video 2> and <audio_3>", [(VIDEO, 2), (AUDIO, 3)]),
        ("<image 01>", [(IMAGE, 1)]),
        ("<image 1><image 1><image 2>", [(IMAGE, 1), (IMAGE, 2)]),  # each once, in order
        ("<image 2> then <image 1>", [(IMAGE, 2), (IMAGE, 1)]),
        ("<image 101>", [(IMAGE, 101)]),
        ("<Image 1> <IMAGE 1> <image1> <image  1> <image-1> <images 1> < image 1>", []),
        ("no placeholders", []),
    ],
)
def test_referenced(text: str, expected: list[ph.MediaKey]) -> None:
    assert ph.referenced(text) == expected


def test_index_zero_is_a_bad_placeholder() -> None:
    assert ph.bad_placeholder("<image 1> ok") is None
    problem = ph.bad_placeholder("look <image 0>")
    assert problem == "placeholder <image 0> is invalid: media indices start at 1"
    assert ph.bad_placeholder("<audio_00>") is not None


# --- expand --------------------------------------------------------------------------------

IMG1 = MediaRef(IMAGE, "a.jpg")
IMG2 = MediaRef(IMAGE, "b.jpg")
VID1 = MediaRef(VIDEO, "v.mp4")


def test_expand_keeps_text_verbatim_around_media() -> None:
    parts = ph.expand("<image 1> Watch <video 1> and describe both.", {(IMAGE, 1): IMG1, (VIDEO, 1): VID1})
    assert parts == [MediaPart(IMG1), TextPart(" Watch "), MediaPart(VID1), TextPart(" and describe both.")]


def test_expand_adjacent_and_whitespace_only_segments() -> None:
    media = {(IMAGE, 1): IMG1, (IMAGE, 2): IMG2}
    assert ph.expand("<image 1><image_2>", media) == [MediaPart(IMG1), MediaPart(IMG2)]
    assert ph.expand("  <image 1> \n\t <image 2>  ", media) == [MediaPart(IMG1), MediaPart(IMG2)]
    assert ph.expand("What is this?<image 1>", media) == [TextPart("What is this?"), MediaPart(IMG1)]


def test_expand_drops_placeholders_without_media() -> None:
    assert ph.expand("A <image 3> B", {}) == [TextPart("A "), TextPart(" B")]
    assert ph.expand("<image 3>", {}) == []
    assert ph.expand("plain", {}) == [TextPart("plain")]
    assert ph.expand("<Image 1>", {(IMAGE, 1): IMG1}) == [TextPart("<Image 1>")]  # not a placeholder


# --- indexed columns -----------------------------------------------------------------------


def test_indexed_columns_for_every_kind_with_format_hints() -> None:
    record = {
        "image_1": "a.jpg",
        "video_2": "https://x.test/v",
        "video_2_format": "MOV",
        "audio_1": b64(wav_bytes()),
        "audio_1_format": "wav",
    }
    found = collect(record)
    assert sources(found) == {
        (IMAGE, 1): "a.jpg",
        (VIDEO, 2): "https://x.test/v",
        (AUDIO, 1): record["audio_1"],
    }
    assert found[(VIDEO, 2)].format == "mov"
    assert found[(AUDIO, 1)].format == "wav"
    assert found[(IMAGE, 1)].base_dir == Path("/data")


def test_index_101_is_never_read_from_indexed_columns() -> None:
    record = {"image_100": "c.jpg", "image_101": "d.jpg", "image_0": "z.jpg"}
    assert sources(collect(record)) == {(IMAGE, 100): "c.jpg"}
    assert collect(record, wanted=[(IMAGE, 101)]) == {}


def test_empty_values_are_absent() -> None:
    record = {"image_1": "", "image_2": "   ", "image_3": None, "images": "", "videos": []}
    assert collect(record) == {}


def test_bad_format_hint_names_its_column() -> None:
    with pytest.raises(RecordError) as info:
        collect({"audio_1": "a.ogg", "audio_1_format": "ogg"})
    assert str(info.value).startswith("/data/ds.jsonl:7: audio_1_format: unsupported audio format 'ogg'")


def test_bad_value_names_its_column() -> None:
    with pytest.raises(RecordError) as info:
        collect({"image_2": "data:image/png;base64,###"})
    assert str(info.value).startswith("/data/ds.jsonl:7: image_2: data URI: invalid base64")


def test_parquet_struct_values() -> None:
    png = image_bytes("PNG")
    record = {"image_1": {"bytes": png, "path": "x.png"}, "image_2": {"bytes": None, "path": "y.png"}}
    assert sources(collect(record)) == {(IMAGE, 1): png, (IMAGE, 2): "y.png"}


# --- list columns and precedence -----------------------------------------------------------


def test_list_column_is_uncapped_and_one_based() -> None:
    record = {"images": [f"{i}.jpg" for i in range(1, 106)]}
    found = collect(record)
    assert len(found) == 105
    assert found[(IMAGE, 1)].source == "1.jpg"
    assert found[(IMAGE, 105)].source == "105.jpg"
    assert sources(collect(record, wanted=[(IMAGE, 101)])) == {(IMAGE, 101): "101.jpg"}


def test_list_as_json_array_string_from_tsv() -> None:
    record = {"images": '["a.jpg", "", "c.jpg"]', "audios": f'["{b64(wav_bytes())}"]'}
    found = collect(record)
    assert sources(found)[(IMAGE, 1)] == "a.jpg"
    assert (IMAGE, 2) not in found  # an empty element is an absent medium
    assert sources(found)[(IMAGE, 3)] == "c.jpg"
    assert (AUDIO, 1) in found


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a.jpg, b.jpg", "images: expected a JSON array of media values"),
        ('{"a": 1}', "images: expected a list of media values, got dict"),
        (42, "images: expected a list of media values, got int"),
    ],
)
def test_unusable_list_column_is_a_bad_record(value: Any, problem: str) -> None:
    with pytest.raises(RecordError) as info:
        collect({"images": value})
    assert str(info.value).startswith(f"/data/ds.jsonl:7: {problem}")


def test_bad_list_element_names_its_position() -> None:
    with pytest.raises(RecordError) as info:
        collect({"images": ["a.jpg", 3]})
    assert str(info.value).startswith("/data/ds.jsonl:7: images[1]: unusable image value")


def test_referenced_policy_ignores_list_only_when_a_referenced_indexed_column_is_set() -> None:
    record = {"image_1": "one.jpg", "images": ["L1.jpg", "L2.jpg"]}
    # <image 1> is referenced and set: the list is ignored, so <image 2> has no medium
    assert sources(collect(record, wanted=[(IMAGE, 1), (IMAGE, 2)])) == {(IMAGE, 1): "one.jpg"}
    # only <image 2> is referenced: image_1 does not count, the list supplies it
    assert sources(collect(record, wanted=[(IMAGE, 2)])) == {(IMAGE, 2): "L2.jpg"}


def test_any_policy_ignores_list_when_any_indexed_column_is_set() -> None:
    record = {"image_5": "five.jpg", "images": ["L1.jpg", "L2.jpg"]}
    assert collect(record, wanted=[(IMAGE, 2)], list_ignored_when="any") == {}
    assert sources(collect(record, list_ignored_when="any")) == {(IMAGE, 5): "five.jpg"}


def test_precedence_is_per_modality() -> None:
    record = {"image_1": "i.jpg", "videos": ["v1.mp4"], "audios": [data_uri(wav_bytes(), "audio/wav")]}
    found = collect(record, list_ignored_when="any")
    assert set(found) == {(IMAGE, 1), (VIDEO, 1), (AUDIO, 1)}


def test_list_format_hints_apply_by_index() -> None:
    found = collect({"videos": ["https://x.test/a", "https://x.test/b"], "video_2_format": "avi"})
    assert found[(VIDEO, 1)].format is None
    assert found[(VIDEO, 2)].format == "avi"


# --- only what is wanted is looked at ------------------------------------------------------


def test_unwanted_malformed_columns_are_never_parsed() -> None:
    record = {
        "image_1": "ok.jpg",
        "image_2": "data:image/png;base64,@@@",
        "audio_1": 12,
        "audio_1_format": "flac",
        "videos": "not json",
    }
    assert sources(collect(record, wanted=[(IMAGE, 1)])) == {(IMAGE, 1): "ok.jpg"}
    assert collect(record, wanted=[]) == {}


def test_collecting_everything_validates_every_column() -> None:
    record = {"image_1": "ok.jpg", "image_2": "data:image/png;base64,@@@"}
    with pytest.raises(RecordError, match="image_2"):
        collect(record, list_ignored_when="any")


def test_helpers() -> None:
    assert ph.placeholder((VIDEO, 3)) == "<video 3>"
    assert ph.indexed_column(AUDIO, 2) == "audio_2"
    assert ph.list_column(IMAGE) == "images"
    assert ph.MAX_INDEXED == 100
