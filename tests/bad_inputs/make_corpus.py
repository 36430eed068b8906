"""Regenerate the bad-input corpus: one small dataset file per defect, plus its media.

Run ``python tests/bad_inputs/make_corpus.py`` from the repository root. The expected
one-line messages live in ``expected.json`` (``{dir}`` is this folder, ``{cwd}`` the
working directory of the test); ``tests/test_bad_inputs.py`` asserts them exactly.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import zlib
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
EXAMPLE_MEDIA = HERE.parents[1] / "examples" / "media"
WEBM_HEAD = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81"
FLAC_HEAD = b"fLaC\x00\x00\x00\x22" + b"\x00" * 8


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG header claiming 10 gigapixels, with a tiny body: a decompression bomb."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    chunks = _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


def truncated_jpeg() -> bytes:
    image = Image.merge("RGB", [Image.linear_gradient("L").resize((64, 64)).rotate(a) for a in (0, 90, 45)])
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=95)
    data = buffer.getvalue()
    return data[: len(data) // 2]


def user(*parts: dict) -> list[dict]:
    return [{"role": "user", "content": list(parts)}]


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


GOOD = {"messages": user(text("What is this?"), image("media/good.jpg")), "answer": "A dog"}
GOOD_MCQ = {"question": "<image 1> Which animal?", "options": ["Dog", "Cat"], "answer": "A",
            "image_1": "media/good.jpg"}

# file name -> its one record (dict = JSON-encoded, str = the raw line)
JSONL: dict[str, object] = {
    "bad_json.jsonl": '{"messages": [{"role": "user", "content": "hi"}',
    "not_an_object.jsonl": '["messages", "answer"]',
    "missing_messages.jsonl": {"answer": "A dog"},
    "messages_not_a_list.jsonl": {"messages": 42, "answer": "A dog"},
    "empty_messages.jsonl": {"messages": [], "answer": "A dog"},
    "unknown_role.jsonl": {"messages": [{"role": "robot", "content": "hi"}]},
    "no_user_message.jsonl": {"messages": [{"role": "system", "content": "Be brief."}]},
    "content_wrong_type.jsonl": {"messages": [{"role": "user", "content": 7}]},
    "unknown_part_type.jsonl": {"messages": user(text("What?"), {"type": "image_file", "file": "x.jpg"})},
    "text_part_not_string.jsonl": {"messages": user({"type": "text", "text": 5})},
    "answer_wrong_type.jsonl": {**GOOD, "answer": {"text": "A dog"}},
    "missing_media_file.jsonl": {**GOOD, "messages": user(text("What?"), image("media/nowhere.jpg"))},
    "invalid_base64.jsonl": {**GOOD, "messages": user(text("What?"), image("data:image/png;base64,iVBO@@@"))},
    "unsupported_url_scheme.jsonl": {**GOOD, "messages": user(text("What?"), image("ftp://example.com/a.jpg"))},
    "unsupported_audio_format.jsonl": {"messages": user(text("What?"), {
        "type": "input_audio", "input_audio": {"data": "media/sound.flac", "format": "flac"}})},
    "unsupported_audio_sniffed.jsonl": {"messages": user(text("What?"), {
        "type": "input_audio", "input_audio": {"data": "media/sound.flac"}})},
    "unsupported_video_format.jsonl": {"messages": user(text("What?"), {
        "type": "video_url", "video_url": {"url": "media/clip.webm"}})},
    "undecodable_image.jsonl": {**GOOD, "messages": user(text("What?"), image("media/garbage.jpg"))},
    "decompression_bomb.jsonl": {**GOOD, "messages": user(text("What?"), image("media/bomb.png"))},
    "placeholder_index_zero.jsonl": {"messages": [{"role": "user", "content": "<image 0> What?"}],
                                     "image_1": "media/good.jpg"},
    # indexed and list columns are not mixed: the list is ignored, <image 2> has no medium
    "mixed_indexed_and_list.jsonl": {"messages": [{"role": "user", "content": "<image 1> vs <image 2>?"}],
                                     "image_1": "media/good.jpg",
                                     "images": ["media/good.jpg", "media/good.jpg"]},
    # a referenced medium that is missing or empty makes the record bad (never dropped)
    "missing_placeholder_file.jsonl": {"messages": [{"role": "user", "content": "What is <image 1>?"}],
                                       "image_1": "media/nowhere.jpg"},
    "empty_placeholder_medium.jsonl": {"messages": [{"role": "user", "content": "What is <image 1>?"}],
                                       "image_1": {}},
    # audio and video are checked by their bytes: a text file named .wav, a 0-byte .mp4
    "text_named_wav.jsonl": {"messages": user(text("What?"), {
        "type": "input_audio", "input_audio": {"data": "media/notes.wav", "format": "wav"}})},
    "empty_video_file.jsonl": {"messages": [{"role": "user", "content": "What happens in <video 1>?"}],
                               "video_1": "media/empty.mp4", "video_1_format": "mp4"},
    # tool-calling transcripts are forwarded verbatim, but their shapes are checked
    "tool_message_without_call_id.jsonl": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "content": "18 C"}], "answer": "18 C"},
    "tool_call_without_function_name.jsonl": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]},
    "tool_calls_arguments_not_text.jsonl": {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_1", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]}]},
    "tool_calls_on_a_user_message.jsonl": {"messages": [
        {"role": "user", "content": "hi", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]},
    "name_not_a_string.jsonl": {"messages": [{"role": "user", "content": "hi", "name": 7}]},
    # a video's fps is forwarded: it must be a positive number
    "video_fps_not_a_number.jsonl": {"messages": user(text("What?"), {
        "type": "video_url", "video_url": {"url": "https://example.com/v.mp4", "fps": "fast"}})},
    "video_fps_twice.jsonl": {"messages": user(text("What?"), {
        "type": "video_url", "fps": 1, "video_url": {"url": "https://example.com/v.mp4", "fps": 2}})},
    "video_column_fps_negative.jsonl": {"messages": [{"role": "user", "content": "What in <video 1>?"}],
                                        "videos": [{"url": "https://example.com/v.mp4", "fps": -2}]},
    "mcq_missing_question.jsonl": {k: v for k, v in GOOD_MCQ.items() if k != "question"},
    "mcq_missing_options.jsonl": {k: v for k, v in GOOD_MCQ.items() if k != "options"},
    "mcq_missing_answer.jsonl": {k: v for k, v in GOOD_MCQ.items() if k != "answer"},
    "mcq_options_wrong_type.jsonl": {**GOOD_MCQ, "options": {"A": "Dog"}},
    "mcq_answer_not_a_label.jsonl": {**GOOD_MCQ, "answer": "E"},
    "mcq_truncated_image.jsonl": {**GOOD_MCQ, "image_1": "media/truncated.jpg"},
    "mcq_placeholder_index_zero.jsonl": {**GOOD_MCQ, "question": "<image 0> Which animal?"},
}

TSV = {
    # a list column in TSV must hold a JSON array
    "tsv_list_not_json.tsv": [["messages", "images", "answer"],
                              ['[{"role": "user", "content": "<image 1> What?"}]',
                               "media/good.jpg, media/good.jpg", "A dog"]],
    "tsv_too_many_cells.tsv": [["messages", "answer"],
                               ['[{"role": "user", "content": "What?"}]', "A dog", "extra"]],
    "tsv_messages_not_json.tsv": [["messages", "answer"], ["What is this?", "A dog"]],
}


def main() -> None:
    media = HERE / "media"
    media.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE_MEDIA / "dog.jpg", media / "good.jpg")
    (media / "garbage.jpg").write_bytes(b"this is not an image at all, just text with a .jpg name\n")
    (media / "truncated.jpg").write_bytes(truncated_jpeg())
    (media / "bomb.png").write_bytes(bomb_png())
    (media / "clip.webm").write_bytes(WEBM_HEAD + b"\x00" * 48)
    (media / "sound.flac").write_bytes(FLAC_HEAD + b"\x00" * 48)
    (media / "notes.wav").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (media / "empty.mp4").write_bytes(b"")
    for name, record in JSONL.items():
        line = record if isinstance(record, str) else json.dumps(record)
        (HERE / name).write_text(line + "\n")
    for name, rows in TSV.items():
        (HERE / name).write_text("".join("\t".join(row) + "\n" for row in rows))


if __name__ == "__main__":
    main()
