"""Regenerate the hostile-media corpus: files that claim to be audio / video but are not.

Run ``python tests/untrusted/media/make_corpus.py`` from the repository root. It writes
``files/`` (a text file named ``.wav`` / ``.mp4`` / ``.mp3`` / ``.mov``, 0-byte media), one
dataset file per format that uses them by every way media enter a record, and
``expected.json``: the one line each bad record must give (``{dir}`` is this folder).
``tests/test_untrusted_media.py`` asserts them exactly; it builds the records that point
outside the allowed media roots (absolute paths, ``..``, symlinks) in a temporary folder.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PASSWD = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"

FILES: dict[str, bytes] = {
    "notes.wav": PASSWD.encode(),  # /etc/passwd-like text under an audio name
    "notes.mp4": PASSWD.encode(),
    "notes.mp3": b"ID3 tags are metadata; this file is plain text, not MPEG audio.\n",
    "free.mov": b"I'm free to say this is text and not a QuickTime movie.\n",
    "empty.wav": b"",
    "empty.mp4": b"",
    "empty.png": b"",
}
TEXT_B64 = base64.b64encode(PASSWD.encode()).decode("ascii")
TEXT_DIGEST = hashlib.sha256(PASSWD.encode()).hexdigest()[:16]


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, *parts]}]


def _audio(data: str, fmt: str = "wav") -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}


def _ask(text: str, **columns: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "answer": "x", **columns}


PART = "messages[0].content[1]"
# (record, field, problem) per line of bytes_vqa.jsonl
VQA: list[tuple[dict[str, Any], str, str]] = [
    ({"messages": _user(_audio("files/notes.wav"))}, f"{PART}.input_audio.data",
     "files/notes.wav: not an audio file (its bytes are text)"),
    ({"messages": _user({"type": "video_url", "video_url": {"url": "files/notes.mp4"}})},
     f"{PART}.video_url.url", "files/notes.mp4: not a video file (its bytes are text)"),
    (_ask("Hear <audio 1>", audio_1="files/notes.mp3"), "audio_1",
     "files/notes.mp3: not an audio file (its bytes are text)"),
    (_ask("Watch <video 1>", video_1="files/free.mov", video_1_format="mov"), "video_1",
     "files/free.mov: not a video file (its bytes are text)"),
    (_ask("Hear <audio 1>", audios=["files/empty.wav"]), "audios[0]",
     "files/empty.wav: empty file (0 bytes)"),
    (_ask("Watch <video 1>", video_1="files/empty.mp4", video_1_format="mp4"), "video_1",
     "files/empty.mp4: empty file (0 bytes)"),
    (_ask("Look <image 1>", image_1="files/empty.png"), "image_1",
     "files/empty.png: empty file (0 bytes)"),
    ({"messages": _user(_audio(TEXT_B64))}, f"{PART}.input_audio.data",
     f"audio:sha256:{TEXT_DIGEST} (audio/wav): not an audio file (its bytes are text)"),
    (_ask("Hear <audio 1>", audio_1=TEXT_B64, audio_1_format="mp3"), "audio_1",
     f"audio:sha256:{TEXT_DIGEST} (audio/mpeg): not an audio file (its bytes are text)"),
    ({"messages": _user({"type": "video_url", "video_url": {
        "url": f"data:video/mp4;base64,{TEXT_B64}"}})}, f"{PART}.video_url.url",
     f"video:sha256:{TEXT_DIGEST} (video/mp4): not a video file (its bytes are text)"),
]
# General-VMCQ validates every media column, referenced or not
MCQ: list[tuple[dict[str, Any], str, str]] = [
    ({"question": "<audio 1> Which sound?", "options": ["a", "b"], "answer": "A",
      "audio_1": "files/notes.wav"}, "audio_1",
     "files/notes.wav: not an audio file (its bytes are text)"),
    ({"question": "Which?", "options": ["a", "b"], "answer": "A", "videos": ["files/empty.mp4"]},
     "videos[0]", "files/empty.mp4: empty file (0 bytes)"),
]


def main() -> None:
    (HERE / "files").mkdir(exist_ok=True)
    for name, data in FILES.items():
        (HERE / "files" / name).write_bytes(data)
    expected: dict[str, list[str]] = {}
    for name, cases in (("bytes_vqa.jsonl", VQA), ("bytes_mcq.jsonl", MCQ)):
        (HERE / name).write_text("".join(json.dumps(r) + "\n" for r, _, _ in cases))
        expected[name] = [f"{{dir}}/{name}:{i}: {field}: {problem}"
                          for i, (_, field, problem) in enumerate(cases, 1)]
    (HERE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


if __name__ == "__main__":
    main()
