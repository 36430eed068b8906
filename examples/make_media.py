"""Recreate the bundled example media and the General-VQA example datasets, deterministically.

    python examples/make_media.py

Images are drawn with Pillow, the WAV is a sine tone written with the stdlib ``wave``
module. The MP3 and the MP4 files need ``ffmpeg`` (with libmp3lame / libx264) at *dev time
only*: without it they are left as committed. Nothing here is needed at run time.
"""

from __future__ import annotations

import base64
import io
import json
import math
import shutil
import struct
import subprocess
import wave
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
MEDIA = HERE / "media"
VQA = HERE / "vqa"
SIZE = (160, 120)

Draw = ImageDraw.ImageDraw


def _canvas(sky: str, ground: str, horizon: int = 85) -> tuple[Image.Image, Draw]:
    image = Image.new("RGB", SIZE, sky)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, horizon, SIZE[0], SIZE[1]), fill=ground)
    return image, draw


def draw_dog() -> Image.Image:
    image, d = _canvas("#bfe3ff", "#5fa35a")
    d.ellipse((45, 55, 115, 88), fill="#8b5a2b")  # body
    for x in (52, 64, 95, 106):
        d.rectangle((x, 80, x + 7, 104), fill="#8b5a2b")  # legs
    d.ellipse((100, 35, 135, 68), fill="#8b5a2b")  # head
    d.polygon([(104, 40), (98, 64), (111, 50)], fill="#5c3a1a")  # ear
    d.ellipse((120, 45, 125, 50), fill="black")  # eye
    d.ellipse((131, 53, 137, 58), fill="black")  # nose
    d.line((46, 62, 28, 45), fill="#8b5a2b", width=6)  # tail
    d.text((6, 6), "DOG", fill="black")
    return image


def draw_museum() -> Image.Image:
    image, d = _canvas("#d8e8f5", "#b9b9b9", horizon=100)
    d.polygon([(20, 40), (80, 12), (140, 40)], fill="#e8e0cc", outline="#777")  # pediment
    d.rectangle((20, 40, 140, 46), fill="#d9cfb5")
    for x in range(26, 136, 16):
        d.rectangle((x, 46, x + 7, 92), fill="#f2ecdc", outline="#999")  # columns
    for step in range(3):
        d.rectangle((14 - 3 * step, 92 + 3 * step, 146 + 3 * step, 95 + 3 * step), fill="#ccc")
    d.text((58, 26), "MUSEUM", fill="#444")
    return image


def draw_tokyo() -> Image.Image:
    image, d = _canvas("#ffb36b", "#333a4d", horizon=100)
    d.ellipse((10, 20, 40, 50), fill="#fff1a8")  # sun
    for x, h in ((0, 40), (22, 62), (44, 35), (100, 55), (124, 70), (146, 45)):
        d.rectangle((x, 100 - h, x + 18, 100), fill="#2b3145")
        for wy in range(100 - h + 5, 96, 8):
            d.rectangle((x + 4, wy, x + 7, wy + 3), fill="#ffd966")
    d.polygon([(80, 8), (64, 100), (96, 100)], outline="#e0301e", fill="#f06a4a")  # tower
    for y in (40, 70):
        d.line((80 - (y - 8) * 16 // 92, y, 80 + (y - 8) * 16 // 92, y), fill="white", width=3)
    d.text((4, 104), "TOKYO", fill="white")
    return image


def draw_tesla() -> Image.Image:
    image, d = _canvas("#e6f0fa", "#666666", horizon=92)
    d.rounded_rectangle((15, 58, 150, 88), radius=10, fill="#c8102e")  # body
    d.polygon([(45, 58), (62, 38), (112, 38), (130, 58)], fill="#c8102e")  # cabin
    d.polygon([(52, 57), (65, 42), (88, 42), (88, 57)], fill="#9fd3ff")  # windows
    d.polygon([(92, 57), (92, 42), (110, 42), (122, 57)], fill="#9fd3ff")
    for cx in (45, 122):
        d.ellipse((cx - 13, 75, cx + 13, 101), fill="#111")
        d.ellipse((cx - 6, 82, cx + 6, 94), fill="#aaa")
    d.text((68, 66), "TESLA", fill="white")
    return image


def draw_running() -> Image.Image:
    image, d = _canvas("#cde9ff", "#c0613a", horizon=95)
    for x in range(0, SIZE[0], 20):
        d.line((x, 107, x + 10, 107), fill="white", width=2)  # track lane
    d.ellipse((74, 14, 90, 30), fill="#f1c27d")  # head
    line = (("#1f4e9c", [(82, 30), (76, 60)]), ("#1f4e9c", [(80, 38), (96, 48), (104, 40)]))
    for colour, points in line:
        d.line(points, fill=colour, width=5)  # torso, forward arm
    d.line([(80, 38), (66, 46), (60, 36)], fill="#1f4e9c", width=5)  # back arm
    d.line([(76, 60), (92, 72), (90, 92)], fill="#222", width=5)  # front leg
    d.line([(76, 60), (64, 76), (48, 78)], fill="#222", width=5)  # back leg
    d.text((6, 6), "RUNNING", fill="black")
    return image


def draw_beach() -> Image.Image:
    image, d = _canvas("#7cc6f2", "#f2d59b", horizon=80)
    d.rectangle((0, 62, SIZE[0], 80), fill="#1e7fc2")  # sea
    d.ellipse((118, 8, 146, 36), fill="#ffe14d")  # sun
    d.line((40, 100, 52, 58), fill="#555", width=2)  # umbrella pole
    d.pieslice((24, 44, 80, 80), 180, 360, fill="#e33b3b")  # umbrella
    d.text((6, 104), "BEACH", fill="#6b4b12")
    return image


def draw_xray() -> Image.Image:
    image = Image.new("L", (120, 120), 10)
    d = ImageDraw.Draw(image)
    d.rectangle((57, 10, 63, 110), fill=200)  # spine
    for k in range(7):
        y = 25 + 11 * k
        d.arc((22, y - 8, 58, y + 14), 180, 330, fill=210, width=3)  # ribs (left)
        d.arc((62, y - 8, 98, y + 14), 210, 360, fill=210, width=3)  # ribs (right)
    return image


def tiny_png() -> bytes:
    """A 16x16 red disc, small enough to sit inline in a dataset as a data URI."""
    image = Image.new("RGB", (16, 16), "white")
    ImageDraw.Draw(image).ellipse((2, 2, 13, 13), fill="red")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def sine_wav(seconds: float = 1.0, rate: int = 8000, freq: float = 440.0) -> bytes:
    frames = int(seconds * rate)
    samples = (int(12000 * math.sin(2 * math.pi * freq * n / rate)) for n in range(frames))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return buffer.getvalue()


def wave_frames(count: int = 10, side: int = 64) -> bytes:
    """Raw RGB frames of a sine wave moving right (for the MP4)."""
    frames = []
    for t in range(count):
        image = Image.new("RGB", (side, side), "#0b3d91")
        d = ImageDraw.Draw(image)
        points = [(x, 32 + 12 * math.sin((x + 6 * t) / 6)) for x in range(side)]
        d.line(points, fill="white", width=3)
        frames.append(image.tobytes())
    return b"".join(frames)


def ball_frames(count: int = 10, side: int = 64) -> bytes:
    """Raw RGB frames of an orange ball bouncing across the frame (for sample.mp4)."""
    frames = []
    for t in range(count):
        image = Image.new("RGB", (side, side), "#202020")
        x, y = 4 + 5 * t, 40 - int(30 * abs(math.sin(t * math.pi / 5)))
        ImageDraw.Draw(image).ellipse((x, y, x + 12, y + 12), fill="#ff8c1a")
        frames.append(image.tobytes())
    return b"".join(frames)


def _ffmpeg(args: list[str], stdin: bytes | None = None) -> bool:
    if shutil.which("ffmpeg") is None:
        return False
    base = ["ffmpeg", "-y", "-loglevel", "error", "-threads", "1"]
    subprocess.run([*base, *args], input=stdin, check=True)
    return True


def make_audio_video() -> None:
    exact = ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact"]
    exact += ["-map_metadata", "-1"]
    wav = str(MEDIA / "sample.wav")
    _ffmpeg(["-i", wav, "-c:a", "libmp3lame", "-b:a", "32k", "-id3v2_version", "0", *exact,
             str(MEDIA / "sample.mp3")])  # fmt: skip
    raw = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "64x64", "-r", "10", "-i", "-"]
    enc = ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", *exact]
    _ffmpeg([*raw, *enc, str(MEDIA / "sample.mp4")], stdin=ball_frames())
    _ffmpeg([*raw, *enc, str(MEDIA / "wave.mp4")], stdin=wave_frames())


IMAGES: dict[str, Callable[[], Image.Image]] = {
    "dog.jpg": draw_dog,
    "AMNH.jpg": draw_museum,
    "tokyo.jpg": draw_tokyo,
    "tesla.jpg": draw_tesla,
    "running.jpg": draw_running,
    "beach.jpg": draw_beach,
    "xray.png": draw_xray,
}


def make_images() -> None:
    for name, draw in IMAGES.items():
        image = draw()
        if name.endswith(".png"):
            image.save(MEDIA / name, format="PNG", optimize=True)
        else:
            image.save(MEDIA / name, format="JPEG", quality=80)


def _user(*parts: dict[str, object]) -> dict[str, object]:
    return {"role": "user", "content": list(parts)}


def _text(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


def _image(url: str, **extra: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def _audio(data: str, fmt: str) -> dict[str, object]:
    return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}


def openai_records() -> list[dict[str, object]]:
    m = "../media/"
    png_uri = "data:image/png;base64," + base64.b64encode(tiny_png()).decode()
    short_wav = base64.b64encode(sine_wav(seconds=0.05, freq=880.0)).decode()
    video = {"type": "video_url", "video_url": {"url": m + "sample.mp4"}}
    return [
        {"messages": [_user(_text("What animal is this?"), _image(m + "dog.jpg"))],
         "answer": "Dog"},
        {"messages": [_user(_text("What building is this?"), _image(m + "AMNH.jpg"))],
         "answer": "Museum"},
        {"messages": [_user(_text("Compare these two images:"), _image(m + "dog.jpg"),
                            _text("and"), _image(m + "running.jpg"),
                            _text("What are the differences?"))],
         "answer": "The first shows a dog on grass, the second a person running on a track."},
        {"messages": [{"role": "system", "content": "You are a medical AI assistant."},
                      _user(_text("Analyze this X-ray:"), _image(m + "xray.png", detail="high"))],
         "answer": "The X-ray shows a chest with a straight spine and symmetric ribs."},
        {"messages": [_user(_text("What's in this image?"), _image(png_uri))],
         "answer": "A red circle"},
        {"messages": [_user(_text("Describe the content of this audio clip."),
                            _audio(m + "sample.wav", "wav"))],
         "answer": "A steady 440 Hz sine tone."},
        {"messages": [_user(_text("What is being said in this audio?"),
                            _audio(short_wav, "wav"))],
         "answer": "Nothing is said; it is a short beep."},
        {"messages": [_user(_text("What kind of sound is this?"),
                            _audio(m + "sample.mp3", "mp3"))],
         "answer": "A pure tone."},
        {"messages": [_user(_text("Describe the content of this video clip."), video)],
         "answer": "An orange ball bouncing across a dark background."},
    ]  # fmt: skip


def placeholder_records() -> list[dict[str, object]]:
    m = "../media/"
    rows = [
        ("What animal is this?<image 1>", "dog.jpg", "Dog"),
        ("What building is this?<image 1>", "AMNH.jpg", "Museum"),
        ("Which city's skyline is this?<image 1>", "tokyo.jpg", "Tokyo"),
        ("What is the brand of this car?<image 1>", "tesla.jpg", "Tesla"),
        ("What is the person in the picture doing?<image 1>", "running.jpg", "Running"),
    ]
    records: list[dict[str, object]] = [
        {"messages": [{"role": "user", "content": q}], "image_1": m + img, "answer": a} for q, img, a in rows
    ]
    records.append({
        "messages": [{"role": "user", "content": "<image 1> Watch <video 1> and describe both."}],
        "answer": "A sunny beach and a wave video.",
        "image_1": m + "beach.jpg",
        "video_1": m + "wave.mp4",
    })  # fmt: skip
    return records


def _jsonl(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def make_datasets() -> None:
    VQA.mkdir(parents=True, exist_ok=True)
    records = openai_records()
    (VQA / "example_openai.jsonl").write_text(_jsonl(records), encoding="utf-8")
    lines = ["messages\tanswer"]
    lines += [f"{json.dumps(r['messages'], ensure_ascii=False)}\t{r['answer']}" for r in records]
    (VQA / "example_openai.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (VQA / "example_placeholder.jsonl").write_text(_jsonl(placeholder_records()), "utf-8")


def main() -> None:
    MEDIA.mkdir(parents=True, exist_ok=True)
    make_images()
    (MEDIA / "sample.wav").write_bytes(sine_wav())
    make_audio_video()
    make_datasets()


if __name__ == "__main__":
    main()
