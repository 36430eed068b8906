"""General-VMCQ: record -> Sample (prompt bytes, inline media, options, shuffle, validation)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from groundscope.compat import metric_name
from groundscope.dataset import FormatContext, get_format, load_samples
from groundscope.dataset.mcq import DEFAULT_TEMPLATE, record_to_sample, render_prompt
from groundscope.errors import ConfigError, RecordError
from groundscope.types import AnswerKind, MediaPart, Modality, Origin, Sample, TextPart
from media_fixtures import (
    EXAMPLES,
    data_uri,
    image_bytes,
    make_media_dir,
    write,
    write_delimited,
    write_jsonl,
)

# EvalScope's SINGLE_ANSWER_TEMPLATE_COT rendered for the seed's first record, written out by hand.
DOG_PROMPT = (
    "Answer the following multiple choice question. The last line of your response should be of "
    "the following format: 'ANSWER: [LETTER]' (without quotes) where [LETTER] is one of A,B,C,D. "
    "Think step by step before answering.\n"
    "\n"
    "Which image shows a dog?\n"
    "\n"
    "A) <image 1>\n"
    "B) <image 2>\n"
    "C) <image 3>\n"
    "D) <image 4>"
)
DOG_RECORD = {
    "question": "Which image shows a dog?",
    "options": ["<image 1>", "<image 2>", "<image 3>", "<image 4>"],
    "image_1": "media/dog.jpg",
    "image_2": "media/amnh.jpg",
    "image_3": "media/tesla.jpg",
    "image_4": "media/tokyo.jpg",
    "answer": "A",
}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """tmp_path with media/: dog.jpg, cat.png, tone.wav, beep.mp3, clip.mp4 + three more JPEGs."""
    media = make_media_dir(tmp_path)
    for name, color in (("amnh.jpg", "gray"), ("tesla.jpg", "red"), ("tokyo.jpg", "blue")):
        write(media, name, image_bytes("JPEG", color=color))
    return tmp_path


def ctx(root: Path, **kwargs: Any) -> FormatContext:
    return FormatContext("general_vmcq", "example", base_dir=root, **kwargs)


def convert(root: Path, record: dict[str, Any], line: int = 1, **kwargs: Any) -> Sample:
    return record_to_sample(record, Origin(root / "example.jsonl", line), ctx(root, **kwargs))


def rejoin(content: str | tuple[Any, ...]) -> str:
    """Text parts with each medium written back as its placeholder (by file name order)."""
    if isinstance(content, str):
        return content
    names = {"dog.jpg": 1, "amnh.jpg": 2, "tesla.jpg": 3, "tokyo.jpg": 4, "cat.png": 5}
    out = []
    for part in content:
        if isinstance(part, TextPart):
            out.append(part.text)
        else:
            out.append(f"<image {names[Path(str(part.media.source)).name.lower()]}>")
    return "".join(out)


def error_of(root: Path, record: dict[str, Any], **kwargs: Any) -> RecordError:
    with pytest.raises(RecordError) as info:
        convert(root, record, **kwargs)
    return info.value


# --- prompt bytes and parts ----------------------------------------------------------------


def test_default_template_is_byte_exact() -> None:
    assert render_prompt("Which image shows a dog?", DOG_RECORD["options"]) == DOG_PROMPT
    assert not DEFAULT_TEMPLATE.startswith("\n") and not DEFAULT_TEMPLATE.endswith("\n")


def test_dog_record_parts_in_order(root: Path) -> None:
    sample = convert(root, DOG_RECORD)
    (message,) = sample.messages
    assert message.role == "user"
    content = message.content
    assert isinstance(content, tuple)
    head = DOG_PROMPT.split("<image 1>")[0]
    assert head.endswith("Which image shows a dog?\n\nA) ")
    kinds = [type(p).__name__ for p in content]
    assert kinds == ["TextPart", "MediaPart"] * 4
    assert [p.text for p in content if isinstance(p, TextPart)] == [head, "\nB) ", "\nC) ", "\nD) "]
    media = [p.media for p in content if isinstance(p, MediaPart)]
    assert [m.source for m in media] == [DOG_RECORD[f"image_{k}"] for k in range(1, 5)]
    assert all(m.kind is Modality.IMAGE and m.base_dir == root for m in media)
    assert rejoin(content) == DOG_PROMPT  # text parts are verbatim: re-joined, byte-exact


def test_dog_record_sample_fields(root: Path) -> None:
    sample = convert(root, {**DOG_RECORD, "category": "animals"})
    assert sample.answer_kind is AnswerKind.CHOICE
    assert sample.choices == ("A", "B", "C", "D")
    assert sample.target == ("A",)
    assert sample.question == "Which image shows a dog?"
    assert sample.id == "example:1"
    assert sample.metadata["category"] == "animals"
    assert (sample.dataset, sample.subset) == ("general_vmcq", "example")


def test_placeholder_in_question_is_inline(root: Path) -> None:
    record = {"question": "<image 1> What is this?", "options": ["Dog", "Cat"], "answer": "A"}
    sample = convert(root, {**record, "image_1": "media/dog.jpg"})
    content = sample.messages[0].content
    assert isinstance(content, tuple)
    assert isinstance(content[0], TextPart) and content[0].text.endswith("answering.\n\n")
    assert isinstance(content[1], MediaPart)
    assert isinstance(content[2], TextPart)
    assert content[2].text == " What is this?\n\nA) Dog\nB) Cat"


def test_whitespace_only_segment_between_placeholders_is_not_sent(root: Path) -> None:
    record = {"question": "<image 1> <image 2>", "options": ["x", "y"], "answer": "B"}
    sample = convert(root, {**record, "image_1": "media/dog.jpg", "image_2": "media/amnh.jpg"})
    kinds = [type(p).__name__ for p in sample.messages[0].content]
    assert kinds == ["TextPart", "MediaPart", "MediaPart", "TextPart"]


def test_no_media_gives_a_plain_string(root: Path) -> None:
    sample = convert(root, {"question": "2 + 2?", "options": ["3", "4"], "answer": "B"})
    assert sample.messages[0].content == render_prompt("2 + 2?", ["3", "4"])


def test_video_and_audio_placeholders(root: Path) -> None:
    record = {
        "question": "<video 1> and <audio 1>: which media?",
        "options": ["Video and audio", "Text"],
        "video_1": "media/clip.mp4",
        "audio_1": "media/tone.wav",
        "answer": "A",
    }
    media = convert(root, record).media()
    assert [(m.kind, m.source) for m in media] == [
        (Modality.VIDEO, "media/clip.mp4"),
        (Modality.AUDIO, "media/tone.wav"),
    ]


def test_system_prompt_comes_first(root: Path) -> None:
    sample = convert(
        root, {"question": "Q?", "options": ["a", "b"], "answer": "A"}, system_prompt="Be brief."
    )
    assert [m.role for m in sample.messages] == ["system", "user"]
    assert sample.messages[0].content == "Be brief."


@pytest.mark.parametrize(("key", "value", "expected"), [("id", "q-7", "q-7"), ("index", 12, "12")])
def test_sample_id_from_record(root: Path, key: str, value: Any, expected: str) -> None:
    record = {"question": "Q?", "options": ["a", "b"], "answer": "A", key: value}
    assert convert(root, record).id == expected


# --- options, letters, answers -------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        ["<image 1>", "<image 2>", "<image 3>", "<image 4>"],
        '["<image 1>", "<image 2>", "<image 3>", "<image 4>"]',
        "['<image 1>', '<image 2>', '<image 3>', '<image 4>']",
    ],
    ids=["list", "json-string", "python-literal"],
)
def test_options_forms(root: Path, options: Any) -> None:
    sample = convert(root, {**DOG_RECORD, "options": options})
    assert rejoin(sample.messages[0].content) == DOG_PROMPT


def test_numeric_options_become_text(root: Path) -> None:
    sample = convert(root, {"question": "1 + 1?", "options": "[2, 3.5]", "answer": "A"})
    assert str(sample.messages[0].content).endswith("1 + 1?\n\nA) 2\nB) 3.5")


@pytest.mark.parametrize(
    ("options", "field", "problem"),
    [
        (None, "options", "missing"),
        ("School, Park", "options", "expected a JSON array or a Python list literal of option texts"),
        ('{"a": 1}', "options", "expected a list of options, got dict"),
        ([], "options", "expected at least one option, got an empty list"),
        (["ok", None], "options[1]", "expected text or a placeholder, got null"),
        ('["ok", ["nested"]]', "options[1]", "expected text or a placeholder, got list"),
    ],
)
def test_bad_options(root: Path, options: Any, field: str, problem: str) -> None:
    record = {"question": "Q?", "answer": "A"}
    if options is not None:
        record["options"] = options
    err = error_of(root, record)
    assert (err.field, err.problem) == (field, problem)


def test_letters_beyond_z(root: Path) -> None:
    options = [f"o{i}" for i in range(30)]
    sample = convert(root, {"question": "Pick", "options": options, "answer": "3"})
    letters = (*"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "1", "2", "3", "4")
    assert sample.choices == letters
    assert sample.target == ("3",)
    text = sample.messages[0].content
    assert isinstance(text, str)
    assert "is one of A,B,C,D,E,F,G,H,I,J,K,L,M,N,O,P,Q,R,S,T,U,V,W,X,Y,Z,1,2,3,4. Think" in text
    assert "\nZ) o25\n1) o26\n2) o27\n3) o28\n4) o29" in text
    # a JSON number answer names a numeric label too
    assert convert(root, {"question": "Pick", "options": options, "answer": 2}).target == ("2",)


def test_answer_whitespace_is_stripped(root: Path) -> None:
    sample = convert(root, {"question": "Q?", "options": ["a", "b"], "answer": " B\n"})
    assert sample.target == ("B",)


def test_lowercase_answer_is_the_same_label(root: Path) -> None:
    sample = convert(root, {"question": "Q?", "options": ["a", "b", "c"], "answer": "c"})
    assert sample.target == ("C",)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("E", "'E' is not one of the option labels A,B,C,D"),
        ("A,B", "'A,B' is not one of the option labels A,B,C,D"),
        ("  ", "missing"),
        (None, "missing"),
        (["A"], "expected an option label, got list"),
    ],
)
def test_bad_answer(root: Path, answer: Any, problem: str) -> None:
    record = {"question": "Q?", "options": ["a", "b", "c", "d"]}
    if answer is not None:
        record["answer"] = answer
    err = error_of(root, record)
    assert str(err) == f"{root / 'example.jsonl'}:1: answer: {problem}"


@pytest.mark.parametrize(
    ("question", "problem"),
    [(None, "missing"), (" ", "empty"), (5, "expected a string, got int")],
)
def test_bad_question(root: Path, question: Any, problem: str) -> None:
    record: dict[str, Any] = {"options": ["a", "b"], "answer": "A"}
    if question is not None:
        record["question"] = question
    err = error_of(root, record)
    assert (err.field, err.problem) == ("question", problem)


# --- custom template -----------------------------------------------------------------------


def test_custom_prompt_template(root: Path) -> None:
    template = "Q: {question}\nOptions:\n{choices}\nReply with one of {letters}."
    sample = convert(root, DOG_RECORD, prompt_template=template)
    expected = (
        "Q: Which image shows a dog?\nOptions:\nA) <image 1>\nB) <image 2>\nC) <image 3>\n"
        "D) <image 4>\nReply with one of A,B,C,D."
    )
    assert rejoin(sample.messages[0].content) == expected
    assert sample.messages[0].content[0] == TextPart("Q: Which image shows a dog?\nOptions:\nA) ")


@pytest.mark.parametrize("template", ["{question} {answer}", "{question} {", "{0}"])
def test_bad_prompt_template_is_a_config_error(root: Path, template: str) -> None:
    with pytest.raises(ConfigError, match="prompt_template"):
        convert(root, {"question": "Q?", "options": ["a", "b"], "answer": "A"}, prompt_template=template)


def test_template_braces_can_be_escaped(root: Path) -> None:
    sample = convert(
        root,
        {"question": "Q?", "options": ["a", "b"], "answer": "A"},
        prompt_template='{{"q": "{question}"}}',
    )
    assert sample.messages[0].content == '{"q": "Q?"}'


# --- shuffle_choices -----------------------------------------------------------------------

FIVE = {"question": "Which is prime?", "options": ["4", "6", "7", "8", "9"], "answer": "C"}


def shown_options(sample: Sample) -> list[str]:
    text = sample.messages[-1].content
    assert isinstance(text, str)
    lines = text.split("\n\n")[-1].split("\n")
    return [line.split(") ", 1)[1] for line in lines]


def test_shuffle_reorders_prompt_and_remaps_answer(root: Path) -> None:
    orders = set()
    for seed in range(6):
        sample = convert(root, FIVE, shuffle_choices=True, seed=seed)
        shown = shown_options(sample)
        assert sorted(shown) == sorted(FIVE["options"])
        answer_index = sample.choices.index(sample.target[0])
        assert shown[answer_index] == "7"  # the remapped letter still names the right option
        assert sample.metadata["original_options"] == FIVE["options"]
        assert sample.metadata["original_answer"] == "C"
        assert [FIVE["options"][i] for i in sample.metadata["choice_order"]] == shown
        orders.add(tuple(shown))
    assert len(orders) > 1  # the seed matters
    assert any(order != tuple(FIVE["options"]) for order in orders)


def test_shuffle_is_reproducible_and_per_sample(root: Path) -> None:
    first = convert(root, FIVE, shuffle_choices=True, seed=42)
    again = convert(root, FIVE, shuffle_choices=True, seed=42)
    assert first.messages == again.messages and first.target == again.target
    others = {
        tuple(shown_options(convert(root, {**FIVE, "id": f"s{i}"}, shuffle_choices=True, seed=42)))
        for i in range(8)
    }
    assert len(others) > 1  # the sample id takes part in the seed


def test_no_shuffle_keeps_order_and_metadata_clean(root: Path) -> None:
    sample = convert(root, FIVE)
    assert shown_options(sample) == FIVE["options"]
    assert sample.target == ("C",)
    assert "original_options" not in sample.metadata


def test_shuffle_moves_media_with_their_options(root: Path) -> None:
    for seed in range(4):
        sample = convert(root, DOG_RECORD, shuffle_choices=True, seed=seed)
        content = sample.messages[0].content
        media = [Path(str(p.media.source)).name for p in content if isinstance(p, MediaPart)]
        answer_index = sample.choices.index(sample.target[0])
        assert media[answer_index] == "dog.jpg"


# --- media validation ----------------------------------------------------------------------


def test_unreferenced_missing_file_makes_the_record_bad(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    record = {**DOG_RECORD, "image_5": "nowhere.jpg"}  # no placeholder names it
    err = error_of(root, record)
    expected = (
        f"{root / 'example.jsonl'}:1: image_5: image file not found: 'nowhere.jpg' "
        f"(tried {root / 'nowhere.jpg'}, {root / 'nowhere.jpg'})"
    )
    assert str(err) == expected


def test_unreferenced_corrupt_image_makes_the_record_bad(root: Path) -> None:
    write(root / "media", "broken.jpg", image_bytes("JPEG")[:40])
    err = error_of(root, {**DOG_RECORD, "image_7": "media/broken.jpg"})
    assert err.field == "image_7"
    assert err.problem.startswith("media/broken.jpg: not a readable image")


def test_unreferenced_bad_data_uri_makes_the_record_bad(root: Path) -> None:
    err = error_of(root, {**DOG_RECORD, "image_9": "data:image/png;base64,@@@not-base64@@@"})
    assert err.field == "image_9"
    assert err.problem.startswith("data URI: invalid base64")


def test_unreferenced_bad_audio_format_hint(root: Path) -> None:
    record = {**DOG_RECORD, "audio_1": "media/tone.wav", "audio_1_format": "flac"}
    err = error_of(root, record)
    assert err.field == "audio_1_format"
    assert "unsupported audio format 'flac'" in err.problem


def test_unreferenced_valid_media_is_checked_but_not_sent(root: Path) -> None:
    sample = convert(root, {**DOG_RECORD, "image_5": "media/cat.png", "video_1": "media/clip.mp4"})
    assert len(sample.media()) == 4


def test_inline_media_values(root: Path) -> None:
    record = {"question": "<image 1>?", "options": ["a", "b"], "answer": "A"}
    uri = data_uri(image_bytes("PNG"), "image/png")
    sample = convert(root, {**record, "image_1": uri})
    assert sample.media()[0].source == uri


def test_list_column_used_without_indexed_columns(root: Path) -> None:
    record = {
        "question": "Which image shows a dog?",
        "options": ["<image 1>", "<image 2>"],
        "images": ["media/amnh.jpg", "media/dog.jpg"],
        "answer": "B",
    }
    sample = convert(root, record)
    assert [m.source for m in sample.media()] == ["media/amnh.jpg", "media/dog.jpg"]
    err = error_of(root, {**record, "images": ["media/amnh.jpg", "media/none.jpg"]})
    assert err.field == "images[1]"
    assert err.problem.startswith("image file not found: 'media/none.jpg'")


def test_list_column_ignored_when_any_indexed_column_is_filled(root: Path) -> None:
    # image_1 is filled (and not even referenced): the images list is not read at all, so its
    # broken element is no error, and <image 2> has no medium: a bad record naming image_2.
    record = {
        "question": "Which one is a dog?",
        "options": ["<image 2>", "none"],
        "image_1": "media/tokyo.jpg",
        "images": ["media/dog.jpg", "media/none.jpg", {"oops": 1}],
        "answer": "A",
    }
    err = error_of(root, record)
    assert err.field == "image_2"
    assert err.problem == ("no image for <image 2> (images is ignored because indexed image "
                           "columns are used, and image_2 is absent or empty)")


def test_list_of_other_kind_still_used(root: Path) -> None:
    record = {
        "question": "<image 1> <video 1>",
        "options": ["a", "b"],
        "image_1": "media/dog.jpg",
        "videos": ["media/clip.mp4"],
        "answer": "A",
    }
    assert [m.kind for m in convert(root, record).media()] == [Modality.IMAGE, Modality.VIDEO]


@pytest.mark.parametrize("value", [None, "", "  ", {}, []])
def test_placeholder_without_medium_is_a_bad_record(
    root: Path, caplog: pytest.LogCaptureFixture, value: Any
) -> None:
    """Never dropped from the prompt with a warning (EvalScope does): the record is bad."""
    record = {"question": "<image 3> What is it?", "options": ["a", "b"], "answer": "A"}
    if value is not None:
        record["image_3"] = value
    with caplog.at_level(logging.WARNING, logger="groundscope"):
        err = error_of(root, record)
    assert (err.field, err.problem) == ("image_3", "no image for <image 3> (image_3 / images[2] "
                                                   "absent or empty)")
    assert caplog.records == []


def test_placeholder_index_zero_is_a_bad_record(root: Path) -> None:
    err = error_of(root, {"question": "Q?", "options": ["<image 0>", "b"], "answer": "A"})
    assert err.field == "options[0]"
    assert "indices start at 1" in err.problem


# --- loading files -------------------------------------------------------------------------


def test_bundled_examples_load() -> None:
    samples = [s for _, s in load_samples("general_vmcq", EXAMPLES / "mcq", ["example"])]
    assert all(isinstance(s, Sample) for s in samples), samples
    assert [s.target for s in samples] == [("A",), ("D",), ("C",)]  # type: ignore[union-attr]
    assert rejoin(samples[0].messages[0].content).replace("../media/", "") == DOG_PROMPT  # type: ignore[union-attr]
    assert samples[2].media()[0].kind is Modality.VIDEO  # type: ignore[union-attr]
    tsv = [s for _, s in load_samples("general_vmcq", EXAMPLES / "mcq" / "example.tsv")]
    assert [s.target for s in tsv] == [("A",), ("D",)]  # type: ignore[union-attr]
    assert tsv[0].messages == samples[0].messages  # type: ignore[union-attr]


def test_tsv_records_and_bad_rows_are_reported(root: Path) -> None:
    path = write_delimited(
        root / "quiz_val.tsv",
        ["question", "options", "answer", "image_1", "image_2", "category"],
        [
            [
                "Which image shows a dog?",
                ["<image 1>", "<image 2>"],
                "A",
                "media/dog.jpg",
                "media/cat.png",
                "pets",
            ],
            ["<image 1> What is this?", "['Dog', 'Cat']", "Z", "media/dog.jpg", "", ""],
            ["Unused broken column", '["x", "y"]', "B", "", "media/gone.png", ""],
            ["Plain", '["x", "y"]', "B", "", "", ""],
        ],
    )
    items = [item for _, item in load_samples("general_vmcq", root, ["quiz"])]
    assert isinstance(items[0], Sample) and items[0].metadata["category"] == "pets"
    assert isinstance(items[1], RecordError)
    assert str(items[1]) == f"{path}:3: answer: 'Z' is not one of the option labels A,B"
    assert isinstance(items[2], RecordError) and (items[2].line, items[2].field) == (4, "image_2")
    assert isinstance(items[3], Sample) and items[3].id == "quiz_val:5"


def test_jsonl_file(root: Path) -> None:
    path = write_jsonl(root / "data.jsonl", [DOG_RECORD, {"question": "Q?", "options": "[]", "answer": "A"}])
    items = [item for _, item in load_samples("general_vmcq", path)]
    assert isinstance(items[0], Sample) and rejoin(items[0].messages[0].content) == DOG_PROMPT
    assert isinstance(items[1], RecordError) and str(items[1]).startswith(f"{path}:2: options: ")


def test_registered() -> None:
    fmt = get_format("general_vmcq")
    assert (fmt.pretty_name, fmt.split, fmt.primary_metric) == ("General-VMCQ", "val", "accuracy")
    assert [metric_name(m) for m in fmt.default_metrics] == ["accuracy"]
    assert fmt.record_to_sample is record_to_sample


def test_doctests() -> None:
    import doctest

    from groundscope.dataset import mcq

    assert doctest.testmod(mcq).failed == 0
