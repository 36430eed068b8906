"""The VLMEvalKit TSV layouts: legacy_mcq and legacy_vqa (parsing, images, prompts, categories)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundscope.compat import metric_name
from groundscope.dataset import FormatContext, get_format, load_samples
from groundscope.dataset.legacy import mcq_record_to_sample, vqa_record_to_sample
from groundscope.dataset.mcq import render_prompt
from groundscope.errors import ConfigError, RecordError
from groundscope.types import AnswerKind, MediaPart, Modality, Origin, Sample, TextPart
from media_fixtures import EXAMPLES, b64, image_bytes, make_media_dir, write, write_delimited, write_jsonl

MCQ_HEADER = ["index", "category", "answer", "question", "A", "B", "C", "D", "image_path"]
SEED_MCQ = [  # the seed's five rows, images relative to the TSV file
    ["1", "Animals", "A", "What animal is this?", "Dog", "Cat", "Tiger", "Elephant", "media/dog.jpg"],
    ["2", "Buildings", "D", "What building is this?", "School", "Hospital", "Park", "Museum",
     "media/amnh.jpg"],
    ["3", "Cities", "B", "Which city's skyline is this?", "New York", "Tokyo", "Shanghai", "Paris",
     "media/tokyo.jpg"],
    ["4", "Vehicles", "C", "What is the brand of this car?", "BMW", "Audi", "Tesla", "Mercedes",
     "media/tesla.jpg"],
    ["5", "Activities", "A", "What is the person in the picture doing?", "Running", "Swimming", "Reading",
     "Singing", "media/running.jpg"],
]  # fmt: skip
VQA_HEADER = ["index", "answer", "question", "image_path"]


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    media = make_media_dir(tmp_path)
    for name, color in (
        ("amnh.jpg", "gray"),
        ("tokyo.jpg", "blue"),
        ("tesla.jpg", "red"),
        ("running.jpg", "green"),
    ):
        write(media, name, image_bytes("JPEG", color=color))
    return tmp_path


def mcq(root: Path, record: dict[str, Any], **kwargs: Any) -> Sample:
    context = FormatContext("legacy_mcq", "custom_mcq", base_dir=root, **kwargs)
    return mcq_record_to_sample(record, Origin(root / "custom_mcq.tsv", 2), context)


def vqa(root: Path, record: dict[str, Any], **kwargs: Any) -> Sample:
    context = FormatContext("legacy_vqa", "custom_vqa", base_dir=root, **kwargs)
    return vqa_record_to_sample(record, Origin(root / "custom_vqa.tsv", 2), context)


def mcq_error(root: Path, record: dict[str, Any]) -> RecordError:
    with pytest.raises(RecordError) as info:
        mcq(root, record)
    return info.value


def row(**fields: Any) -> dict[str, Any]:
    base = {"index": "1", "answer": "A", "question": "What animal is this?", "A": "Dog", "B": "Cat"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


# --- legacy MCQ ----------------------------------------------------------------------------


def test_seed_mcq_tsv(root: Path) -> None:
    path = write_delimited(root / "custom_mcq.tsv", MCQ_HEADER, SEED_MCQ)
    samples = [s for _, s in load_samples("legacy_mcq", path)]
    assert all(isinstance(s, Sample) for s in samples), samples
    assert [s.id for s in samples] == ["1", "2", "3", "4", "5"]  # type: ignore[union-attr]
    assert [s.target[0] for s in samples] == ["A", "D", "B", "C", "A"]  # type: ignore[union-attr]
    categories = [s.metadata["category"] for s in samples]  # type: ignore[union-attr]
    assert categories == ["Animals", "Buildings", "Cities", "Vehicles", "Activities"]
    first = samples[0]
    assert isinstance(first, Sample)
    assert first.answer_kind is AnswerKind.CHOICE and first.choices == ("A", "B", "C", "D")
    assert first.question == "What animal is this?"
    (message,) = first.messages
    image, text = message.content
    assert isinstance(image, MediaPart) and image.media.source == "media/dog.jpg"
    assert image.media.base_dir == root
    assert text == TextPart(
        "Answer the following multiple choice question. The last line of your response should be of "
        "the following format: 'ANSWER: [LETTER]' (without quotes) where [LETTER] is one of A,B,C,D. "
        "Think step by step before answering.\n\nWhat animal is this?\n\n"
        "A) Dog\nB) Cat\nC) Tiger\nD) Elephant"
    )


def test_base64_image_column(root: Path) -> None:
    data = b64(image_bytes("PNG", color="brown"))
    path = write_delimited(
        root / "b64.tsv",
        ["index", "category", "answer", "question", "A", "B", "C", "image"],
        [["7", "Animals", "C", "What is it?", "Car", "Tree", "Dog", data]],
    )
    (sample,) = [s for _, s in load_samples("legacy_mcq", path)]
    assert isinstance(sample, Sample)
    assert sample.choices == ("A", "B", "C") and sample.target == ("C",)
    (ref,) = sample.media()
    assert ref.kind is Modality.IMAGE and ref.source == data


def test_image_wins_over_image_path(root: Path) -> None:
    data = b64(image_bytes("PNG"))
    sample = mcq(root, row(image=data, image_path="media/dog.jpg"))
    assert [m.source for m in sample.media()] == [data]


@pytest.mark.parametrize(
    "paths",
    [
        '["media/dog.jpg", "media/cat.png"]',
        "['media/dog.jpg', 'media/cat.png']",
        ["media/dog.jpg", "media/cat.png"],
    ],
    ids=["json", "python-literal", "list"],
)
def test_image_path_list(root: Path, paths: Any) -> None:
    sample = mcq(root, row(image_path=paths))
    content = sample.messages[0].content
    assert [type(p).__name__ for p in content] == ["MediaPart", "MediaPart", "TextPart"]
    assert [m.source for m in sample.media()] == ["media/dog.jpg", "media/cat.png"]


def test_base64_image_list(root: Path) -> None:
    first, second = b64(image_bytes("PNG")), b64(image_bytes("JPEG"))
    sample = mcq(root, row(image=f"['{first}', '{second}']"))
    assert [m.source for m in sample.media()] == [first, second]


def test_bad_image_in_a_list_names_its_position(root: Path) -> None:
    err = mcq_error(root, row(image_path='["media/dog.jpg", "media/nope.jpg"]'))
    assert err.field == "image_path[1]"
    assert err.problem.startswith("image file not found: 'media/nope.jpg'")


def test_row_reference_in_image_column_is_explained(root: Path) -> None:
    err = mcq_error(root, row(image="3"))
    assert err.field == "image"
    assert "index of another row" in err.problem


def test_corrupt_base64_image(root: Path) -> None:
    err = mcq_error(root, row(image=b64(image_bytes("JPEG"))[:120]))
    assert err.field == "image"
    assert "not a readable image" in err.problem


def test_missing_image_is_a_bad_record(root: Path) -> None:
    err = mcq_error(root, row())
    assert str(err) == (
        f"{root / 'custom_mcq.tsv'}:2: image_path: missing: give image_path (a path or a list) "
        "or image (base64)"
    )


@pytest.mark.parametrize(
    ("options", "field", "problem"),
    [
        ({"B": None, "C": None}, "B", "missing: at least 2 options (A, B, ...) are required"),
        ({"A": None, "B": None, "C": None}, "A", "missing: at least 2 options (A, B, ...) are required"),
        ({"C": None, "D": "Fish"}, "C", "empty, but option D is given; options must be consecutive from A"),
        ({"A": None}, "A", "empty, but option B is given; options must be consecutive from A"),
    ],
)
def test_option_columns_must_be_consecutive(
    root: Path, options: dict[str, Any], field: str, problem: str
) -> None:
    record = {**row(image_path="media/dog.jpg", C="Tiger"), **options}
    err = mcq_error(root, {k: v for k, v in record.items() if v is not None})
    assert (err.field, err.problem) == (field, problem)


def test_more_options_and_answer_check(root: Path) -> None:
    record = row(image_path="media/dog.jpg", C="c", D="d", E="e", F="f", answer="F")
    assert mcq(root, record).choices == ("A", "B", "C", "D", "E", "F")
    err = mcq_error(root, {**record, "answer": "G"})
    assert (err.field, err.problem) == ("answer", "'G' is not one of the option labels A,B,C,D,E,F")


def test_category_defaults_and_hint(root: Path) -> None:
    sample = mcq(root, row(image_path="media/dog.jpg", hint="Look at the ears."))
    assert sample.metadata["category"] == "default"
    text = sample.messages[0].content[-1]
    assert isinstance(text, TextPart)
    assert text.text == render_prompt("Hint: Look at the ears.\nWhat animal is this?", ["Dog", "Cat"])
    assert sample.question == "What animal is this?"


def test_shuffle_and_template_apply(root: Path) -> None:
    record = row(image_path="media/dog.jpg", C="Tiger", D="Elephant", E="Fish")
    orders = set()
    for seed in range(5):
        sample = mcq(root, record, shuffle_choices=True, seed=seed)
        text = sample.messages[0].content[-1].text  # type: ignore[union-attr]
        shown = [line.split(") ", 1)[1] for line in text.split("\n\n")[-1].split("\n")]
        assert shown[sample.choices.index(sample.target[0])] == "Dog"
        assert sample.metadata["category"] == "default" and sample.metadata["original_answer"] == "A"
        orders.add(tuple(shown))
    assert len(orders) > 1
    templated = mcq(root, record, prompt_template="{question}\n{choices}\n({letters})")
    assert templated.messages[0].content[-1] == TextPart(
        "What animal is this?\nA) Dog\nB) Cat\nC) Tiger\nD) Elephant\nE) Fish\n(A,B,C,D,E)"
    )


def test_system_prompt(root: Path) -> None:
    sample = mcq(root, row(image_path="media/dog.jpg"), system_prompt="You are a vet.")
    assert [m.role for m in sample.messages] == ["system", "user"]


def test_jsonl_with_numbers(root: Path) -> None:
    record = {"index": 3, "answer": "B", "question": "2+2?", "A": 3, "B": 4, "image_path": "media/dog.jpg"}
    path = write_jsonl(root / "nums.jsonl", [record])
    (sample,) = [s for _, s in load_samples("legacy_mcq", path)]
    assert isinstance(sample, Sample) and sample.id == "3"
    assert sample.messages[0].content[-1].text.endswith("2+2?\n\nA) 3\nB) 4")  # type: ignore[union-attr]


def test_bad_rows_are_reported_and_others_kept(root: Path) -> None:
    rows = [SEED_MCQ[0], ["2", "Buildings", "E", "Which?", "a", "b", "c", "d", "media/amnh.jpg"], SEED_MCQ[2]]
    path = write_delimited(root / "mixed_test.tsv", MCQ_HEADER, rows)
    items = [item for _, item in load_samples("legacy_mcq", root, ["mixed"])]
    assert isinstance(items[0], Sample) and isinstance(items[2], Sample)
    assert str(items[1]) == f"{path}:3: answer: 'E' is not one of the option labels A,B,C,D"


def test_bundled_legacy_examples() -> None:
    mcq_samples = [s for _, s in load_samples("legacy_mcq", EXAMPLES / "legacy" / "custom_mcq.tsv")]
    assert all(isinstance(s, Sample) for s in mcq_samples), mcq_samples
    assert len({s.metadata["category"] for s in mcq_samples}) == 5  # type: ignore[union-attr]
    vqa_samples = [s for _, s in load_samples("legacy_vqa", EXAMPLES / "legacy" / "custom_vqa.tsv")]
    assert all(isinstance(s, Sample) for s in vqa_samples), vqa_samples
    assert [s.target for s in vqa_samples] == [  # type: ignore[union-attr]
        ("Dog",),
        ("Museum",),
        ("Tokyo",),
        ("Tesla",),
        ("Running",),
    ]


# --- legacy VQA ----------------------------------------------------------------------------


def test_vqa_tsv_with_image_path(root: Path) -> None:
    path = write_delimited(
        root / "custom_vqa.tsv",
        VQA_HEADER,
        [
            ["1", "Dog", "What animal is this?", "media/dog.jpg"],
            ["2", "Museum", "What building?", "media/amnh.jpg"],
        ],
    )
    samples = [s for _, s in load_samples("legacy_vqa", path)]
    first = samples[0]
    assert isinstance(first, Sample)
    assert first.answer_kind is AnswerKind.FREE and first.target == ("Dog",) and first.choices == ()
    image, text = first.messages[0].content
    assert isinstance(image, MediaPart) and image.media.source == "media/dog.jpg"
    assert text == TextPart("What animal is this?")
    assert first.question == "What animal is this?" and first.id == "1"
    assert "category" not in first.metadata


def test_vqa_tsv_with_base64_image(root: Path) -> None:
    data = b64(image_bytes("JPEG", color="brown"))
    path = write_delimited(root / "v.tsv", ["index", "answer", "question", "image", "category"],
                           [["9", "42", "How many?", data, "count"]])  # fmt: skip
    (sample,) = [s for _, s in load_samples("legacy_vqa", path)]
    assert isinstance(sample, Sample)
    assert sample.media()[0].source == data and sample.target == ("42",)
    assert sample.metadata["category"] == "count"


def test_vqa_template_missing_answer_and_number_answer(root: Path) -> None:
    sample = vqa(
        root, {"question": "What?", "image_path": "media/dog.jpg"}, prompt_template="{question} One word."
    )
    assert sample.messages[0].content[-1] == TextPart("What? One word.")
    assert sample.target == ()
    assert vqa(root, {"question": "n?", "answer": 3.0, "image_path": "media/dog.jpg"}).target == ("3",)
    with pytest.raises(ConfigError):
        vqa(root, {"question": "What?", "image_path": "media/dog.jpg"}, prompt_template="{choices}")


def test_vqa_bad_records(root: Path) -> None:
    with pytest.raises(RecordError) as info:
        vqa(root, {"answer": "Dog", "image_path": "media/dog.jpg"})
    assert (info.value.field, info.value.problem) == ("question", "missing")
    with pytest.raises(RecordError) as info:
        vqa(root, {"question": "Q", "image_path": "media/missing.jpg"})
    assert info.value.field == "image_path"


# --- registry ------------------------------------------------------------------------------


def test_registered() -> None:
    legacy_mcq, legacy_vqa = get_format("legacy_mcq"), get_format("legacy_vqa")
    assert (legacy_mcq.pretty_name, legacy_mcq.split, legacy_mcq.primary_metric) == (
        "Legacy-MCQ",
        "test",
        "accuracy",
    )
    assert [metric_name(m) for m in legacy_mcq.default_metrics] == ["accuracy"]
    assert (legacy_vqa.pretty_name, legacy_vqa.primary_metric) == ("Legacy-VQA", "exact_match")
    assert [metric_name(m) for m in legacy_vqa.default_metrics] == ["exact_match"]
