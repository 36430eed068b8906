"""groundscope.media: loading, sniffing, validation, wire parts, identity, value normalising."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from groundscope import media
from groundscope.errors import MediaError
from groundscope.types import MediaRef, Modality
from media_fixtures import (
    AVI_HEAD,
    EXAMPLE_MEDIA,
    FLAC_HEAD,
    ID3_HEAD,
    MOV_HEAD,
    MP3_FRAME_HEAD,
    MPEG_HEAD,
    OGG_HEAD,
    WEBM_HEAD,
    b64,
    data_uri,
    image_bytes,
    make_media_dir,
    mp3_bytes,
    mp4_bytes,
    wav_bytes,
    write,
)

IMAGE, AUDIO, VIDEO = Modality.IMAGE, Modality.AUDIO, Modality.VIDEO


def ref(source: str | bytes, kind: Modality = IMAGE, **kw: object) -> MediaRef:
    return MediaRef(kind=kind, source=source, **kw)  # type: ignore[arg-type]


# --- sniffing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "mime"),
    [
        ("JPEG", "image/jpeg"),
        ("PNG", "image/png"),
        ("GIF", "image/gif"),
        ("WEBP", "image/webp"),
        ("BMP", "image/bmp"),
        ("TIFF", "image/tiff"),
    ],
)
def test_sniff_real_images(fmt: str, mime: str) -> None:
    assert media.sniff_mime(image_bytes(fmt)) == mime


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (wav_bytes(), "audio/wav"),
        (mp3_bytes(), "audio/mpeg"),
        (ID3_HEAD, "audio/mpeg"),
        (MP3_FRAME_HEAD, "audio/mpeg"),
        (FLAC_HEAD, "audio/flac"),
        (OGG_HEAD, "audio/ogg"),
        (mp4_bytes(), "video/mp4"),
        (MOV_HEAD, "video/quicktime"),
        (AVI_HEAD, "video/x-msvideo"),
        (MPEG_HEAD, "video/mpeg"),
        (WEBM_HEAD, "video/webm"),
        (b"plain text, no magic", None),
        (b"", None),
    ],
)
def test_sniff_audio_video_and_unknown(data: bytes, mime: str | None) -> None:
    assert media.sniff_mime(data) == mime


# --- load ----------------------------------------------------------------------------------


def test_load_magic_bytes_beat_a_wrong_extension(tmp_path: Path) -> None:
    write(tmp_path, "photo.jpg", image_bytes("PNG"))
    data, mime = media.load(ref("photo.jpg", base_dir=tmp_path))
    assert mime == "image/png"
    assert data == image_bytes("PNG")


def test_load_falls_back_to_hint_then_extension(tmp_path: Path) -> None:
    write(tmp_path, "blob.webm", b"no magic here")
    assert media.load(ref("blob.webm", VIDEO, base_dir=tmp_path))[1] == "video/webm"
    assert media.load(ref("blob.webm", VIDEO, base_dir=tmp_path, format="mov"))[1] == ("video/quicktime")
    assert media.load(ref(b"no magic here"))[1] == "application/octet-stream"


def test_relative_path_resolves_against_base_dir_before_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, cwd = tmp_path / "data", tmp_path / "cwd"
    write(base, "img.png", image_bytes("PNG"))
    write(cwd, "img.png", image_bytes("JPEG"))
    write(cwd, "only_cwd.jpg", image_bytes("JPEG"))
    monkeypatch.chdir(cwd)
    assert media.load(ref("img.png", base_dir=base))[1] == "image/png"
    assert media.load(ref("only_cwd.jpg", base_dir=base))[1] == "image/jpeg"
    assert media.load(ref("img.png"))[1] == "image/jpeg"  # no base_dir: the CWD


def test_missing_file_names_every_path_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MediaError) as info:
        media.load(ref("nope/dog.jpg", base_dir=tmp_path / "ds"))
    message = str(info.value)
    assert "nope/dog.jpg" in message
    assert str(tmp_path / "ds" / "nope" / "dog.jpg") in message
    assert str(tmp_path / "nope" / "dog.jpg") in message


def test_absolute_path_and_file_uri(tmp_path: Path) -> None:
    path = write(tmp_path, "a.gif", image_bytes("GIF"))
    with media.media_roots_in_force([tmp_path]):  # an absolute path is read inside the roots
        assert media.load(ref(str(path)))[1] == "image/gif"
        assert media.load(ref(f"file://{path}"))[1] == "image/gif"


def test_load_inline_sources() -> None:
    png = image_bytes("PNG")
    assert media.load(ref(data_uri(png, "image/png"))) == (png, "image/png")
    assert media.load(ref(png)) == (png, "image/png")
    wav = wav_bytes()
    assert media.load(ref(b64(wav), AUDIO)) == (wav, "audio/wav")
    assert media.load(ref(b64(png))) == (png, "image/png")  # raw base64 accepted for images too
    # a data URI that lies about its type is corrected by the magic bytes
    assert media.load(ref(data_uri(png, "image/jpeg")))[1] == "image/png"


def test_load_percent_encoded_data_uri() -> None:
    assert media.load(ref("data:text/plain,hello%20world", IMAGE))[0] == b"hello world"


@pytest.mark.parametrize(
    "source",
    ["data:image/png;base64,@@not*base64@@", "data:image/png;base64", "A" * 63 + "!" * 8],
)
def test_invalid_inline_data(source: str) -> None:
    with pytest.raises(MediaError):
        media.load(ref(source))


def test_invalid_raw_base64_names_the_problem() -> None:
    with pytest.raises(MediaError, match="invalid base64"):
        media.load(ref("QUJD" * 16 + "Q", AUDIO))  # 65 base64 chars: bad length


def test_size_cap(tmp_path: Path) -> None:
    write(tmp_path, "big.png", image_bytes("PNG", size=(64, 64)))
    with pytest.raises(MediaError, match="too big"):
        media.load(ref("big.png", base_dir=tmp_path), max_bytes=10)
    with pytest.raises(MediaError, match="too big"):
        media.load(ref(data_uri(image_bytes("PNG"), "image/png")), max_bytes=10)
    with pytest.raises(MediaError, match="too big"):
        media.wire_part(ref(image_bytes("PNG")), max_bytes=10)


def test_remote_is_never_fetched() -> None:
    url = ref("https://example.com/a.jpg")
    assert media.is_remote(url)
    assert not media.is_remote(ref("a.jpg"))
    assert media.is_remote(ref("HTTP://EXAMPLE.COM/a.jpg"))
    with pytest.raises(MediaError, match="never fetched"):
        media.load(url)


# --- wire parts ----------------------------------------------------------------------------


def test_wire_image_local_becomes_data_url_with_sniffed_mime(tmp_path: Path) -> None:
    png = write(tmp_path, "x.jpg", image_bytes("PNG"))
    part = media.wire_part(ref("x.jpg", base_dir=tmp_path, detail="high"))
    assert part == {
        "type": "image_url",
        "image_url": {"url": data_uri(png.read_bytes(), "image/png"), "detail": "high"},
    }


def test_wire_image_url_passes_through_with_detail() -> None:
    part = media.wire_part(ref("https://x.test/cat.jpg?x=1", detail="low"))
    assert part["image_url"] == {"url": "https://x.test/cat.jpg?x=1", "detail": "low"}
    assert media.wire_part(ref("https://x.test/c.jpg"))["image_url"]["detail"] == "auto"


def test_wire_image_rejects_non_image_content() -> None:
    with pytest.raises(MediaError, match="not an image"):
        media.wire_part(ref(wav_bytes()))


def test_wire_audio_raw_base64_and_format(tmp_path: Path) -> None:
    make_media_dir(tmp_path)
    part = media.wire_part(ref("media/tone.wav", AUDIO, base_dir=tmp_path, format="wav"))
    assert part["type"] == "input_audio"
    data = part["input_audio"]["data"]
    assert not data.startswith("data:")
    assert base64.b64decode(data) == (tmp_path / "media" / "tone.wav").read_bytes()
    assert part["input_audio"]["format"] == "wav"


@pytest.mark.parametrize(
    ("source", "hint", "expected"),
    [
        (data_uri(mp3_bytes(), "audio/mpeg"), None, "mp3"),  # data-URI mime / magic
        (b64(wav_bytes()), None, "wav"),  # raw base64: magic bytes
        (mp3_bytes(), None, "mp3"),  # bytes: magic bytes
        (wav_bytes(), "WAV", "wav"),  # hint normalised
        (wav_bytes(), "audio/x-wav", "wav"),  # a mime alias as the hint
    ],
)
def test_wire_audio_format_inference(source: str | bytes, hint: str | None, expected: str) -> None:
    part = media.wire_part(ref(source, AUDIO, format=hint))
    assert part["input_audio"]["format"] == expected


def test_wire_audio_magic_beats_the_extension(tmp_path: Path) -> None:
    write(tmp_path, "song.mp3", b"\x00" * 32)  # no magic: refused whatever its name
    write(tmp_path, "mislabeled.mp3", wav_bytes())  # WAV bytes under an .mp3 name
    with pytest.raises(MediaError, match=r"^song\.mp3: not an audio file \(its bytes match no"):
        media.wire_part(ref("song.mp3", AUDIO, base_dir=tmp_path))
    part = media.wire_part(ref("mislabeled.mp3", AUDIO, base_dir=tmp_path))
    assert part["input_audio"]["format"] == "wav"


@pytest.mark.parametrize("data", [FLAC_HEAD + b"\x00" * 64, OGG_HEAD + b"\x00" * 64])
def test_wire_audio_rejects_unsupported_formats(data: bytes) -> None:
    with pytest.raises(MediaError, match="unsupported audio format"):
        media.wire_part(ref(data, AUDIO))


def test_wire_audio_without_audio_magic_is_refused() -> None:
    with pytest.raises(MediaError, match="not an audio file"):
        media.wire_part(ref(b"\x00" * 64, AUDIO, format="wav"))  # a hint is no substitute


def test_wire_remote_audio_goes_inline_from_fetched_bytes_never_as_audio_url() -> None:
    remote = ref("https://x.test/a.mp3?sig=1", AUDIO, format="mp3")
    with pytest.raises(MediaError, match="remote audio must be fetched before sending"):
        media.wire_part(remote)  # no "audio_url" part: the chat API has none
    part = media.wire_part(remote, fetched=wav_bytes())  # the bytes say wav: the hint loses
    assert part == {"type": "input_audio",
                    "input_audio": {"data": base64.b64encode(wav_bytes()).decode(), "format": "wav"}}
    assert media.wire_part(ref("https://x.test/a", AUDIO), fetched=mp3_bytes())[
        "input_audio"]["format"] == "mp3"


@pytest.mark.parametrize(("data", "problem"), [
    (b"<html>404</html>" * 4, "not an audio file (its bytes are text)"),
    (FLAC_HEAD + b"\x00" * 48, "unsupported audio format 'flac' (by its bytes)"),
    (image_bytes("PNG"), "not an audio file (its bytes are image/png)"),
])
def test_wire_remote_audio_bytes_must_be_wav_or_mp3(data: bytes, problem: str) -> None:
    with pytest.raises(MediaError, match=re.escape(problem)):
        media.wire_part(ref("https://x.test/a.wav", AUDIO, format="wav"), fetched=data)


def test_wire_local_video_carries_fps_beside_the_part(tmp_path: Path) -> None:
    make_media_dir(tmp_path)
    part = media.wire_part(ref("media/clip.mp4", VIDEO, base_dir=tmp_path, fps=1))
    assert part == {"type": "video_url", "video_url": {"url": data_uri(mp4_bytes(), "video/mp4")},
                    "fps": 1.0}
    assert isinstance(part["fps"], float)  # EvalScope sends a float: 1 -> 1.0


@pytest.mark.parametrize(("value", "fps"), [
    ({"url": "https://x.test/v.mp4", "fps": 2}, 2.0),
    ({"path": "v.mp4", "fps": "0.5", "start": 1.25, "end": 3.5, "nframes": 8}, 0.5),
    ({"url": "https://x.test/v.mp4"}, None),
    ("https://x.test/v.mp4", None),
])
def test_a_video_dict_gives_its_fps(value: object, fps: float | None) -> None:
    got = media.media_from_value(value, VIDEO)
    assert got.fps == fps
    assert media.media_from_value({"url": "https://x.test/a.wav", "fps": 2}, AUDIO).fps is None


@pytest.mark.parametrize("bad", [0, -1, "fast", True, float("nan"), float("inf"), [2]])
def test_a_video_fps_must_be_a_positive_number(bad: object) -> None:
    with pytest.raises(MediaError, match=r"^fps: expected a positive number, got "):
        media.media_from_value({"url": "https://x.test/v.mp4", "fps": bad}, VIDEO)


def test_fps_is_part_of_a_media_fingerprint() -> None:
    plain = media.fingerprint(ref("https://x.test/v.mp4", VIDEO))
    assert plain == media.fingerprint(ref("https://x.test/v.mp4", VIDEO))
    assert media.fingerprint(ref("https://x.test/v.mp4", VIDEO, fps=2.0)) != plain
    assert media.fingerprint(ref("https://x.test/v.mp4", VIDEO, fps=2.0)) != \
        media.fingerprint(ref("https://x.test/v.mp4", VIDEO, fps=4.0))


def test_wire_remote_video_passes_through_with_fps() -> None:
    assert media.wire_part(ref("https://x.test/v.mp4", VIDEO)) == {
        "type": "video_url",
        "video_url": {"url": "https://x.test/v.mp4"},
    }
    assert media.wire_part(ref("https://x.test/v.mp4", VIDEO, fps=2)) == {
        "type": "video_url", "video_url": {"url": "https://x.test/v.mp4"}, "fps": 2.0}


def test_wire_video_local_and_hinted(tmp_path: Path) -> None:
    make_media_dir(tmp_path)
    part = media.wire_part(ref("media/clip.mp4", VIDEO, base_dir=tmp_path))
    assert part == {"type": "video_url", "video_url": {"url": data_uri(mp4_bytes(), "video/mp4")}}
    mov = media.wire_part(ref(MOV_HEAD, VIDEO))["video_url"]["url"]
    assert mov.startswith("data:video/quicktime;base64,")
    avi = media.wire_part(ref(AVI_HEAD, VIDEO))["video_url"]["url"]
    assert avi.startswith("data:video/x-msvideo;base64,")
    mpeg = media.wire_part(ref(MPEG_HEAD, VIDEO, format="mpg"))["video_url"]["url"]
    assert mpeg.startswith("data:video/mpeg;base64,")


def test_wire_video_rejects_webm() -> None:
    with pytest.raises(MediaError, match="unsupported video format 'webm'"):
        media.wire_part(ref(WEBM_HEAD, VIDEO))


def test_real_audio_and_video_pass_the_magic_check(tmp_path: Path) -> None:
    """The example files (wav, mp3 frames, two mp4s) are recognised by their bytes."""
    for name in ("sample.wav", "sample.mp3", "sample.mp4", "wave.mp4"):
        write(tmp_path, name, (EXAMPLE_MEDIA / name).read_bytes())
    parts = [media.wire_part(ref(name, kind, base_dir=tmp_path)) for name, kind in (
        ("sample.wav", AUDIO), ("sample.mp3", AUDIO), ("sample.mp4", VIDEO), ("wave.mp4", VIDEO))]
    assert [p["input_audio"]["format"] for p in parts[:2]] == ["wav", "mp3"]
    assert all(p["video_url"]["url"].startswith("data:video/mp4;base64,") for p in parts[2:])
    for head in (MOV_HEAD, AVI_HEAD, MPEG_HEAD, ID3_HEAD, MP3_FRAME_HEAD, FLAC_HEAD, OGG_HEAD):
        assert media.sniff_mime(head) is not None


# --- check / exists ------------------------------------------------------------------------


def test_check_accepts_good_media(tmp_path: Path) -> None:
    make_media_dir(tmp_path)
    for name, kind in [("dog.jpg", IMAGE), ("cat.png", IMAGE), ("tone.wav", AUDIO),
                       ("beep.mp3", AUDIO), ("clip.mp4", VIDEO)]:  # fmt: skip
        media.check(ref(f"media/{name}", kind, base_dir=tmp_path))
    media.check(ref("https://x.test/whatever", VIDEO))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF"])
def test_check_catches_truncated_images(fmt: str) -> None:
    data = image_bytes(fmt, size=(64, 48))
    with pytest.raises(MediaError, match="not a readable image"):
        media.check(ref(data[: len(data) * 2 // 3]))


def test_check_rejects_garbage_image_and_missing_file(tmp_path: Path) -> None:
    write(tmp_path, "fake.jpg", b"this is not a jpeg at all")
    with pytest.raises(MediaError, match="not a readable image"):
        media.check(ref("fake.jpg", base_dir=tmp_path))
    with pytest.raises(MediaError, match="not found"):
        media.check(ref("absent.jpg", base_dir=tmp_path))


def test_check_audio_video_formats(tmp_path: Path) -> None:
    write(tmp_path, "a.flac", FLAC_HEAD + b"\x00" * 64)
    with pytest.raises(MediaError, match="unsupported audio format 'flac'"):
        media.check(ref("a.flac", AUDIO, base_dir=tmp_path))
    with pytest.raises(MediaError, match="unsupported video format"):
        media.check(ref(WEBM_HEAD, VIDEO))
    with pytest.raises(MediaError, match="unsupported audio format"):
        media.check(ref("https://x.test/a", AUDIO, format="ogg"))


def test_exists(tmp_path: Path) -> None:
    make_media_dir(tmp_path)
    assert media.exists(ref("media/dog.jpg", base_dir=tmp_path))
    assert not media.exists(ref("media/cow.jpg", base_dir=tmp_path))
    assert media.exists(ref("https://x.test/cow.jpg"))
    assert media.exists(ref(image_bytes()))
    assert media.exists(ref(data_uri(image_bytes(), "image/jpeg")))


# --- identity ------------------------------------------------------------------------------


def test_fingerprint_tracks_file_size_and_mtime(tmp_path: Path) -> None:
    path = write(tmp_path, "a.png", image_bytes("PNG"))
    first = media.fingerprint(ref("a.png", base_dir=tmp_path))
    assert first.startswith("image|path:a.png:")
    assert first == media.fingerprint(ref("a.png", base_dir=tmp_path))
    path.write_bytes(image_bytes("PNG", size=(40, 40)))
    os.utime(path, ns=(1, 1))
    assert media.fingerprint(ref("a.png", base_dir=tmp_path)) != first
    assert media.fingerprint(ref("gone.png", base_dir=tmp_path)).endswith(":missing")


@pytest.fixture
def sending():
    """Records loaded here are sent from here, as in a local run (``media.set_sending``)."""
    from groundscope.media.sources import _SENDING

    token = _SENDING.set(True)
    yield
    _SENDING.reset(token)


def _rewrite_keeping_version(path: Path, data: bytes) -> None:
    """``data`` (same length) written over ``path`` in place, its date put back: the same
    file version (size, date, inode) with other bytes."""
    info = os.stat(path)
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def _content_id(data: bytes) -> str:
    import hashlib

    return f"{len(data)}:sha256:{hashlib.sha256(data).hexdigest()[:32]}"


def _sent(image: MediaRef) -> bytes:
    return base64.b64decode(media.wire_part(image)["image_url"]["url"].split(",", 1)[1])


def test_an_image_checked_at_load_is_not_read_again_for_its_content_id(tmp_path: Path,
                                                                       sending: None) -> None:
    """The header check reads the whole file and its content id is kept, so the request
    hash needs no second read: a rewrite that keeps the file's size, date and inode is not
    seen (as a file's version, the content id is keyed by them)."""
    original = image_bytes("JPEG", size=(48, 48))
    write(tmp_path, "once.jpg", original)
    media.check(ref("once.jpg", base_dir=tmp_path), decode=False)
    _rewrite_keeping_version(tmp_path / "once.jpg", b"\0" * len(original))
    ident = media.fingerprint(ref("once.jpg", base_dir=tmp_path))
    assert ident == f"image|path:once.jpg:{_content_id(original)}"


def test_an_image_checked_at_load_is_sent_from_the_bytes_read_then(tmp_path: Path,
                                                                   sending: None) -> None:
    original = image_bytes("JPEG", size=(48, 48))
    write(tmp_path, "sent.jpg", original)
    image = ref("sent.jpg", base_dir=tmp_path)
    media.check(image, decode=False)
    changed = original[:-10] + bytes(8) + original[-2:]  # still a JPEG, other bytes
    _rewrite_keeping_version(tmp_path / "sent.jpg", changed)
    assert _sent(image) == original
    from groundscope.media import wire

    limit = wire.CACHE.limit
    wire.set_cache_limit(0)  # no encoded payload kept either: the next send reads the file
    try:
        assert _sent(image) == changed  # taken at the first send
    finally:
        wire.set_cache_limit(limit)


def test_a_check_where_nothing_is_sent_reads_only_the_head(tmp_path: Path) -> None:
    """``--dry-run``, ``estimate``, a Ray driver: the check parses the header from the
    file's head; nothing is hashed or kept, so the request hash reads the file itself."""
    original = image_bytes("JPEG", size=(48, 48))
    write(tmp_path, "head.jpg", original)
    media.check(ref("head.jpg", base_dir=tmp_path), decode=False)
    changed = original[:-10] + bytes(8) + original[-2:]
    _rewrite_keeping_version(tmp_path / "head.jpg", changed)
    assert media.fingerprint(ref("head.jpg", base_dir=tmp_path)).endswith(_content_id(changed))


def test_a_short_read_at_load_is_not_kept(tmp_path: Path, sending: None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The file shrank between its ``fstat`` and its read (then grew back, same version):
    the half read is not kept or hashed; the send reads the whole file."""
    from groundscope.media import sources

    original = image_bytes("JPEG", size=(96, 96))
    path = write(tmp_path, "short.jpg", original)
    info = os.stat(path)
    real_open = sources.open_confined

    def shrinking_open(*args: object, **kwargs: object) -> object:
        opened = real_open(*args, **kwargs)  # type: ignore[arg-type]
        os.truncate(path, len(original) // 2)
        return opened

    monkeypatch.setattr(sources, "open_confined", shrinking_open)
    image = ref("short.jpg", base_dir=tmp_path)
    media.check(image, decode=False)  # half a JPEG: its header is there
    monkeypatch.setattr(sources, "open_confined", real_open)
    path.write_bytes(original)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert os.stat(path).st_ino == info.st_ino
    assert _sent(image) == original
    assert media.fingerprint(image).endswith(_content_id(original))


def test_bytes_kept_from_load_are_bounded(tmp_path: Path, sending: None) -> None:
    """Records loaded but never sent (answers reused, a stopped run) do not pin their
    bytes: past the bound the oldest go, and are read again when sent."""
    from groundscope.media.sources import KEPT_FILES

    originals = {}
    for i in range(KEPT_FILES + 8):
        originals[i] = image_bytes("JPEG", size=(24 + i % 7, 24))
        write(tmp_path, f"k{i}.jpg", originals[i])
        media.check(ref(f"k{i}.jpg", base_dir=tmp_path), decode=False)
    for i in (0, KEPT_FILES + 7):
        data = originals[i]
        _rewrite_keeping_version(tmp_path / f"k{i}.jpg", data[:-10] + bytes(8) + data[-2:])
    assert _sent(ref("k0.jpg", base_dir=tmp_path)) != originals[0]  # gone: read again
    assert _sent(ref(f"k{KEPT_FILES + 7}.jpg", base_dir=tmp_path)) == originals[KEPT_FILES + 7]


def test_fingerprint_inline_url_and_options() -> None:
    png = image_bytes("PNG")
    inline = media.fingerprint(ref(png))
    assert inline.startswith("image|sha256:") and len(inline.split(":")[1]) == 64
    assert inline == media.fingerprint(ref(image_bytes("PNG")))
    assert media.fingerprint(ref("https://x.test/a.jpg")) == "image|url:https://x.test/a.jpg"
    assert media.fingerprint(ref(png, detail="high")) == inline + "|detail=high"
    assert media.fingerprint(ref(png, AUDIO, format="wav")).endswith("|format=wav")


def test_describe_paths_urls_and_inline_without_payload() -> None:
    assert media.describe(ref("../media/dog.jpg")) == "../media/dog.jpg"
    assert media.describe(ref("https://x.test/a.jpg?w=2")) == "https://x.test/a.jpg?w=2"
    png = image_bytes("PNG")
    uri = data_uri(png, "image/png")
    text = media.describe(ref(uri))
    assert text.startswith("image:sha256:") and text.endswith(" (image/png)")
    assert len(text.split(":")[2].split()[0]) == 16
    assert b64(png)[:20] not in text
    # the same content gives the same description however it is encoded
    assert media.describe(ref(png)) == text
    assert media.describe(ref(b64(wav_bytes()), AUDIO)).endswith("(audio/wav)")
    assert media.describe(ref(b"\x00\x01", AUDIO, format="mp3")).endswith("(audio/mpeg)")


def test_describe_redacts_url_secrets() -> None:
    text = media.describe(ref("https://user:pw@x.test/a.jpg?X-Amz-Signature=abc&w=2"))
    assert "pw" not in text and "abc" not in text
    assert text == "https://x.test/a.jpg?X-Amz-Signature=***&w=2"


# --- media_from_value ----------------------------------------------------------------------


def test_media_from_value_strings_and_paths(tmp_path: Path) -> None:
    got = media.media_from_value("  ../m/dog.jpg \n", IMAGE, format=None, base_dir=tmp_path)
    assert got == MediaRef(IMAGE, "../m/dog.jpg", base_dir=tmp_path)
    assert media.media_from_value(Path("a/b.wav"), "audio", format=".WAV", base_dir=None) == (
        MediaRef(AUDIO, "a/b.wav", format="wav")
    )
    url = media.media_from_value("https://x.test/v", VIDEO, format="quicktime", base_dir=None)
    assert url.format == "mov" and url.source == "https://x.test/v"


def test_media_from_value_parquet_dicts_and_objects() -> None:
    png = image_bytes("PNG")

    def convert(value: object, kind: Modality = IMAGE) -> MediaRef:
        return media.media_from_value(value, kind, format=None, base_dir=None)

    assert convert({"bytes": png, "path": "x.png"}).source == png  # bytes win over path
    assert convert({"bytes": None, "path": "x.png"}).source == "x.png"
    assert convert({"url": "https://x.test/a.png"}).source == "https://x.test/a.png"
    assert convert({"data": b64(wav_bytes()), "format": "wav"}, AUDIO).format == "wav"
    feature = SimpleNamespace(bytes=png, path=None)
    assert media.media_from_value(feature, IMAGE, format=None, base_dir=None).source == png
    assert media.media_from_value(bytearray(png), IMAGE, format=None, base_dir=None).source == png


@pytest.mark.parametrize(
    ("value", "kind", "hint", "match"),
    [
        ("", IMAGE, None, "empty"),
        ("   ", IMAGE, None, "empty"),
        (b"", IMAGE, None, "empty"),
        (42, IMAGE, None, "unusable image value of type int"),
        ({"bytes": None, "path": None}, IMAGE, None, "expected a dict"),
        ("ftp://x.test/a.jpg", IMAGE, None, "unsupported URL scheme 'ftp'"),
        ("data:image/png;base64,%%%", IMAGE, None, "invalid base64"),
        ("x.ogg", AUDIO, "ogg", "unsupported audio format 'ogg'"),
        ("x.mkv", VIDEO, "mkv", "unsupported video format 'mkv'"),
    ],
)
def test_media_from_value_rejects_unusable_values(
    value: object, kind: Modality, hint: str | None, match: str
) -> None:
    with pytest.raises(MediaError, match=match):
        media.media_from_value(value, kind, format=hint, base_dir=None)


def test_media_from_value_does_not_touch_the_disk_for_paths(tmp_path: Path) -> None:
    got = media.media_from_value("missing/a.jpg", IMAGE, format=None, base_dir=tmp_path)
    assert not media.exists(got)  # resolution is deferred to exists/check/load


def test_header_check_reads_past_large_metadata(tmp_path: Path) -> None:
    """A JPEG whose frame header sits behind ~200 KB of ICC profile: the header-only check
    reads further than its first head and still finds the size (and the pixel cap)."""
    from PIL import Image

    path = tmp_path / "icc.jpg"
    Image.new("RGB", (40, 30), "red").save(path, "JPEG", icc_profile=os.urandom(200_000))
    assert path.stat().st_size > 200_000
    media.check(ref("icc.jpg", base_dir=tmp_path), decode=False)
    token = media.images._MAX_PIXELS.set(1000)  # 40x30 = 1200 pixels
    try:
        with pytest.raises(MediaError, match="over the limit of 1000"):
            media.check(ref("icc.jpg", base_dir=tmp_path), decode=False)
    finally:
        media.images._MAX_PIXELS.reset(token)


def _jpeg_with_header_at(offset: int) -> bytes:
    """A valid JPEG whose frame header comes after ``offset`` bytes of APP2 segments (Pillow
    opens and decodes it)."""
    data = image_bytes("JPEG", size=(32, 32))
    filler = b"\xff\xe2" + (65533 + 2).to_bytes(2, "big") + bytes(65533)
    return data[:2] + filler * (offset // len(filler) + 1) + data[2:]


@pytest.mark.parametrize("sent_here", [True, False], ids=["local run", "dry run or Ray driver"])
def test_where_an_image_header_may_sit_does_not_depend_on_who_checks(
        tmp_path: Path, sent_here: bool) -> None:
    """A header is looked for in the file's first 1 MiB, whether the check read the file
    whole (a local run, which sends it) or its head (--dry-run, a Ray driver): the same
    records are bad either way. A local run took a header 1.3 MB in, which --dry-run and
    the earlier code called unreadable."""
    from groundscope.media.sources import _SENDING

    write(tmp_path, "near.jpg", _jpeg_with_header_at(200_000))
    write(tmp_path, "far.jpg", _jpeg_with_header_at(1_300_000))
    token = _SENDING.set(sent_here)
    try:
        media.check(ref("near.jpg", base_dir=tmp_path), decode=False)
        with pytest.raises(MediaError, match=r"far\.jpg: not a readable image"):
            media.check(ref("far.jpg", base_dir=tmp_path), decode=False)
    finally:
        _SENDING.reset(token)
