"""Untrusted datasets cannot make groundscope read or send files that are not their media.

Audio and video are checked by their bytes (a text file named ``.wav`` / ``.mp4``, or a
0-byte file, is a bad record); local media are read only inside the allowed media roots
(the dataset's folder, the working directory, ``--media-root`` / ``media_roots``), after
``..`` and symlinks are resolved, at load, at send, for the judges and for report.html.
The hostile files are the corpus in ``tests/untrusted/media/``; the records that point
outside the roots are built here, in a temporary layout::

    tmp/outside/   secret.png, secret.wav, secret.mp4   (valid media: only the roots stop them)
    tmp/data/      the dataset folder (link.png -> ../outside/secret.png, linkdir -> ../outside)
    tmp/cwd/       the working directory
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, PngImagePlugin

from cli_support import run_cli
from groundscope import media
from groundscope.client.chat import ChatClient
from groundscope.client.openai import build_body
from groundscope.dataset import FormatContext, load_samples, vqa
from groundscope.errors import MediaError, RecordError
from groundscope.scoring.grounding_prompt import verify_messages
from groundscope.scoring.judge_prompt import judge_messages
from groundscope.simulator import SimulatorServer
from groundscope.types import MediaPart, MediaRef, Message, Modality, Origin, Sample, TextPart
from media_fixtures import image_bytes, mp4_bytes, wav_bytes, write_delimited, write_jsonl

CORPUS = Path(__file__).resolve().parent / "untrusted" / "media"
EXPECTED: dict[str, list[str]] = json.loads((CORPUS / "expected.json").read_text())
MARKER = "GROUNDSCOPE-SECRET-MARKER-7d1e"
OUTSIDE = ("is outside the allowed media roots (the dataset's folder and the working "
           "directory); add --media-root {root} (TaskConfig media_roots) to allow it")


# ------------------------------------------------------------------ audio / video bytes


@pytest.mark.parametrize(("name", "line"), [(n, i + 1) for n in sorted(EXPECTED)
                                            for i in range(len(EXPECTED[n]))])
def test_media_that_are_not_what_they_claim_are_bad_records(
        name: str, line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the corpus is reached as the dataset's folder only
    fmt = "general_vmcq" if "mcq" in name else "general_vqa"
    items = [item for _, item in load_samples(fmt, CORPUS / name)]
    assert len(items) == len(EXPECTED[name])
    item = items[line - 1]
    assert isinstance(item, RecordError), f"line {line} was accepted: {item}"
    assert str(item) == EXPECTED[name][line - 1].format(dir=CORPUS)


# ------------------------------------------------------------------ the allowed roots


def _secret_png() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("comment", MARKER)
    buffer = io.BytesIO()
    Image.new("RGB", (17, 11), (12, 34, 56)).save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


SECRETS = {"secret.png": _secret_png(), "secret.wav": wav_bytes(freq=523.0) + MARKER.encode(),
           "secret.mp4": mp4_bytes() + MARKER.encode()}


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """tmp/outside (the secrets), tmp/data (the dataset folder, with links out), tmp/cwd."""
    root = Path(os.path.realpath(tmp_path))
    outside, data, cwd = root / "outside", root / "data", root / "cwd"
    for folder in (outside, data, cwd):
        folder.mkdir()
    for name, payload in SECRETS.items():
        (outside / name).write_bytes(payload)
    (data / "good.jpg").write_bytes(image_bytes("JPEG", color="green"))
    (data / "sub").mkdir()
    (data / "link.png").symlink_to(outside / "secret.png")
    (data / "linkdir").symlink_to(outside, target_is_directory=True)
    monkeypatch.chdir(cwd)
    return {"outside": outside, "data": data, "cwd": cwd}


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, *parts]}]


def _ask(text: str, **columns: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "answer": "x", **columns}


def _vqa_cases(out: Path) -> list[tuple[dict[str, Any], str, str]]:
    """(record, field, how the record names the medium) for every way a medium enters."""
    part = "messages[0].content[1]"
    return [
        ({"messages": _user({"type": "image_url", "image_url": {"url": str(out / "secret.png")}})},
         f"{part}.image_url.url", str(out / "secret.png")),
        ({"messages": _user({"type": "input_audio", "input_audio": {
            "data": "../outside/secret.wav", "format": "wav"}})},
         f"{part}.input_audio.data", "../outside/secret.wav"),
        ({"messages": _user({"type": "video_url", "video_url": {"url": f"file://{out}/secret.mp4"}})},
         f"{part}.video_url.url", f"file://{out}/secret.mp4"),
        (_ask("Look <image 1>", image_1="link.png"), "image_1", "link.png"),
        (_ask("Hear <audio 1>", audio_1="sub/../../outside/secret.wav"), "audio_1",
         "sub/../../outside/secret.wav"),
        (_ask("Watch <video 1>", video_1=str(out / "secret.mp4"), video_1_format="mp4"), "video_1",
         str(out / "secret.mp4")),
        (_ask("Look <image 1>", images=["linkdir/secret.png"]), "images[0]", "linkdir/secret.png"),
        (_ask("Hear <audio 1>", audios=[{"path": str(out / "secret.wav")}]), "audios[0]",
         str(out / "secret.wav")),
        (_ask("Watch <video 1>", videos=["../../../../../../../../" + str(out / "secret.mp4")]),
         "videos[0]", "../../../../../../../../" + str(out / "secret.mp4")),
    ]


def _outside(shown: str, real: Path) -> str:
    where = shown if shown == str(real) else f"{shown} (resolves to {real})"
    return f"{where} {OUTSIDE.format(root=real.parent)}"


def _real(out: Path, shown: str) -> Path:
    return out / ("secret.png" if shown == "link.png" else Path(shown).name)


def test_every_way_a_medium_enters_is_confined(layout: dict[str, Path]) -> None:
    data, out = layout["data"], layout["outside"]
    cases = _vqa_cases(out)
    path = write_jsonl(data / "d.jsonl", [r for r, _, _ in cases])
    items = [item for _, item in load_samples("general_vqa", path)]
    expected = [f"{path}:{i}: {field}: {_outside(shown, _real(out, shown))}"
                for i, (_, field, shown) in enumerate(cases, 1)]
    assert [str(it) for it in items] == expected


def test_general_vmcq_and_legacy_tsv_are_confined(layout: dict[str, Path]) -> None:
    data, out = layout["data"], layout["outside"]
    mcq = write_jsonl(data / "m.jsonl", [
        {"question": "<image 1> Which?", "options": ["a", "b"], "answer": "A",
         "image_1": str(out / "secret.png")},
        {"question": "Which?", "options": ["a", "b"], "answer": "A",  # unreferenced: still read
         "videos": ["linkdir/secret.mp4"]}])
    got = [str(it) for _, it in load_samples("general_vmcq", mcq)]
    assert got == [
        f"{mcq}:1: image_1: {_outside(str(out / 'secret.png'), out / 'secret.png')}",
        f"{mcq}:2: videos[0]: {_outside('linkdir/secret.mp4', out / 'secret.mp4')}"]
    tsv = write_delimited(data / "custom_mcq.tsv", ["index", "question", "A", "B", "answer",
                                                    "image_path"],
                          [[1, "Q?", "a", "b", "A", "link.png"],
                           [2, "Q?", "a", "b", "A", str(out / "secret.png")]])
    got = [str(it) for _, it in load_samples("legacy_mcq", tsv)]
    assert got == [f"{tsv}:2: image_path: {_outside('link.png', out / 'secret.png')}",
                   f"{tsv}:3: image_path: {_outside(str(out / 'secret.png'), out / 'secret.png')}"]


def test_media_roots_allow_them_and_the_cwd_and_dataset_folder_are_roots(
        layout: dict[str, Path]) -> None:
    data, out = layout["data"], layout["outside"]
    path = write_jsonl(data / "d.jsonl", [r for r, _, _ in _vqa_cases(out)])
    with media.media_roots_in_force([layout["cwd"], out]):
        items = [item for _, item in load_samples("general_vqa", path)]
        assert all(isinstance(it, Sample) for it in items), items
        sent = media.wire_part(items[3].media()[0])["image_url"]["url"]
    assert base64.b64decode(sent.split(",", 1)[1]) == SECRETS["secret.png"]
    # the working directory is a root: media named relative to it are read
    (layout["cwd"] / "here.jpg").write_bytes(image_bytes("PNG"))
    cwd_path = write_jsonl(data / "c.jsonl", [_ask("<image 1>", image_1=str(layout["cwd"] / "here.jpg"))])
    assert all(isinstance(it, Sample) for _, it in load_samples("general_vqa", cwd_path))


def test_a_symlink_swapped_after_load_is_not_sent(layout: dict[str, Path]) -> None:
    data = layout["data"]
    (data / "swap.jpg").symlink_to(data / "good.jpg")
    ctx = FormatContext("general_vqa", "d", data)
    sample = vqa.record_to_sample(_ask("<image 1>", image_1="swap.jpg"), Origin(data / "d.jsonl", 1), ctx)
    first = build_body(sample.messages, "m", {})  # encoded (and cached) while it is inside
    assert first["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg")
    (data / "swap.jpg").unlink()
    (data / "swap.jpg").symlink_to(layout["outside"] / "secret.png")
    with pytest.raises(MediaError, match=r"^swap\.jpg \(resolves to .*/outside/secret\.png\) is outside"):
        build_body(sample.messages, "m", {})


@pytest.mark.parametrize("swapped", ["the file", "a folder on its path"])
def test_a_link_swapped_between_the_check_and_the_open_is_not_read(
        layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch, swapped: str) -> None:
    """The race a check-then-open leaves: the file opened must be the very file checked."""
    from groundscope.media import roots

    data, out = layout["data"], layout["outside"]
    (data / "sub" / "secret.png").write_bytes(image_bytes("PNG"))  # inside: passes the check
    real_confine = roots.confine

    def confine_then_swap(path: Any, base_dir: Any, shown: str) -> str:
        checked = real_confine(path, base_dir, shown)
        if swapped == "the file":
            (data / "sub" / "secret.png").unlink()
            (data / "sub" / "secret.png").symlink_to(out / "secret.png")
        else:
            (data / "sub").rename(data / "old")
            (data / "sub").symlink_to(out, target_is_directory=True)
        return checked

    monkeypatch.setattr(roots, "confine", confine_then_swap)
    with pytest.raises(MediaError) as info:
        media.load(MediaRef(Modality.IMAGE, "sub/secret.png", base_dir=data))
    reason = ("Too many levels of symbolic links" if swapped == "the file"
              else "changed while it was being opened")
    assert reason in str(info.value)


async def test_a_medium_that_fails_at_send_never_reaches_the_server(layout: dict[str, Path]) -> None:
    data = layout["data"]
    (data / "later.png").symlink_to(data / "good.jpg")
    ctx = FormatContext("general_vqa", "d", data)
    sample = vqa.record_to_sample(_ask("<image 1>", image_1="later.png"), Origin(data / "d.jsonl", 1), ctx)
    (data / "later.png").unlink()
    (data / "later.png").symlink_to(layout["outside"] / "secret.png")
    server = SimulatorServer(keep_bodies=True)
    async with server as url, ChatClient(url, "m") as client:
        with pytest.raises(MediaError, match="outside the allowed media roots"):
            await client.complete(sample.messages)
    assert server.stats()["requests"] == 0 and server.bodies() == []


def test_judge_and_grounding_requests_are_confined(layout: dict[str, Path]) -> None:
    """The judges read media through the same wire path as the model (media.wire_part)."""
    ref = MediaRef(Modality.IMAGE, str(layout["outside"] / "secret.png"), base_dir=layout["data"])
    sample = Sample(id="1", dataset="d", subset="s", origin=Origin(layout["data"] / "d.jsonl", 1),
                    messages=(Message("user", (TextPart("What is it?"), MediaPart(ref))),),
                    target=("x",), question="What is it?")
    for messages in (judge_messages(sample, "an answer", multimodal=True),
                     verify_messages("a claim", [ref])):
        with pytest.raises(MediaError, match="outside the allowed media roots"):
            build_body(messages, "judge", {})


# ------------------------------------------------------------------ end to end: the wire, the page


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _leaks(bodies: list[Any]) -> list[str]:
    """The secrets whose base64 payload appears in any request body the server received."""
    text = json.dumps(bodies)
    return [name for name, payload in SECRETS.items() if _b64(payload) in text]


def _eval(url: str, data: Path, work: Path, cwd: Path, *extra: str) -> Any:
    args = {"general_vqa": {"local_path": str(data)}}
    return run_cli("eval", "--model", "m", "--api-url", url, "--datasets", "general_vqa",
                   "--dataset-args", json.dumps(args), "--work-dir", str(work), "--no-timestamp",
                   "--no-progress", *extra, cwd=cwd)


GOOD = [_ask("<image 1> What is it?", image_1="good.jpg", answer="a green disc"),
        _ask("<audio 1> What is it?", audio_1="tone.wav", answer="a tone")]


@pytest.mark.slow
def test_a_run_skips_outside_media_and_sends_none_of_their_bytes(layout: dict[str, Path]) -> None:
    data, out = layout["data"], layout["outside"]
    (data / "tone.wav").write_bytes(wav_bytes())
    cases = _vqa_cases(out)
    path = write_jsonl(data / "d.jsonl", [*GOOD, *(r for r, _, _ in cases)])
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        proc = _eval(url, data, layout["cwd"] / "run", layout["cwd"])
        bodies = server.bodies()
        server.reset()
        allowed = _eval(url, data, layout["cwd"] / "run2", layout["cwd"], "--media-root", str(out))
        allowed_bodies = server.bodies()
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"requested 2, succeeded 2, errored 0, skipped {len(cases)} bad records" in proc.stdout
    skipped = [json.loads(line)["problem"]
               for line in (layout["cwd"] / "run" / "skipped.jsonl").read_text().splitlines()]
    assert skipped == [f"{path}:{i}: {field}: {_outside(shown, _real(out, shown))}"
                       for i, (_, field, shown) in enumerate(cases, len(GOOD) + 1)]
    assert len(bodies) == 2 and _leaks(bodies) == []
    # --media-root lets them in (and so the check above can see a leak: they are sent now)
    assert allowed.returncode == 0, allowed.stderr
    assert f"requested {2 + len(cases)}, succeeded {2 + len(cases)}" in allowed.stdout
    assert sorted(_leaks(allowed_bodies)) == sorted(SECRETS)
    config = json.loads((layout["cwd"] / "run2" / "config.json").read_text())
    assert config["media_roots"] == [str(out)]
    assert config["allowed_media_roots"] == [str(layout["cwd"]), str(data), str(out)]


def test_a_media_root_that_is_not_a_folder_is_one_line_before_any_request(
        layout: dict[str, Path]) -> None:
    write_jsonl(layout["data"] / "d.jsonl", GOOD[:1])
    server = SimulatorServer()
    url = server.start()
    try:
        proc = _eval(url, layout["data"], layout["cwd"] / "run", layout["cwd"],
                     "--media-root", str(layout["outside"] / "secret.png"))
        assert server.stats()["requests"] == 0
    finally:
        server.stop()
    assert proc.returncode == 2
    assert proc.stderr == (f"groundscope: error: media_roots: not a directory: "
                           f"{layout['outside'] / 'secret.png'}\n")
    assert not (layout["cwd"] / "run").exists()


def _page_media(run_dir: Path) -> tuple[int, int, int]:
    """(image thumbnails, audio clips, out-of-roots notes) embedded in report.html."""
    page = (run_dir / "report.html").read_text()
    return (page.count("data:image/jpeg;base64,"), page.count("data:audio/wav;base64,"),
            page.count("outside the run&#x27;s allowed media roots")
            + page.count("outside the run's allowed media roots"))


@pytest.mark.slow
def test_report_html_never_embeds_a_file_outside_the_runs_roots(layout: dict[str, Path]) -> None:
    data, out, cwd = layout["data"], layout["outside"], layout["cwd"]
    (data / "tone.wav").write_bytes(wav_bytes())
    write_jsonl(data / "d.jsonl", GOOD)
    abs_record = _ask("<image 1> What is it?", image_1=str(out / "secret.png"), answer="x")
    write_jsonl(data / "e_test.jsonl", [abs_record])
    with SimulatorServer() as url:
        first = _eval(url, data, cwd / "run", cwd)
        allowed = _eval(url, data, cwd / "run2", cwd, "--media-root", str(out))
    assert first.returncode == 0 and allowed.returncode == 0, first.stderr + allowed.stderr
    assert _page_media(cwd / "run")[:2] == (1, 1)  # its own image and audio are embedded
    # after the run, the dataset's files become links to the secrets; the page is rebuilt
    # from a working directory that holds the secrets: neither is a root of the run
    for name, secret in (("good.jpg", "secret.png"), ("tone.wav", "secret.wav")):
        (data / name).unlink()
        (data / name).symlink_to(out / secret)
    rebuilt = run_cli("report", str(cwd / "run"), cwd=out)
    assert rebuilt.returncode == 0, rebuilt.stderr
    # (the run's recorded data/ root is outside this cwd and the run's work dir: not honoured)
    assert _page_media(cwd / "run")[:2] == (0, 0)
    assert MARKER not in (cwd / "run" / "report.html").read_text()
    # a run allowed --media-root OUT: a recorded root outside the working directory and the
    # run's work directory counts only when named again (a run directory is untrusted input)
    again = run_cli("report", str(cwd / "run2"), cwd=data)
    assert again.returncode == 0, again.stderr
    assert _page_media(cwd / "run2") == (0, 0, 3)  # data/ links and outside/secret.png: refused
    again = run_cli("report", str(cwd / "run2"), "--media-root", str(out), cwd=data)
    assert again.returncode == 0, again.stderr
    assert _page_media(cwd / "run2") == (1, 1, 0)  # outside/ named again: a root


def test_score_with_a_multimodal_judge_reads_only_inside_the_runs_roots(
        layout: dict[str, Path]) -> None:
    from groundscope.simulator.judge import JudgeResponder

    data, out, cwd = layout["data"], layout["outside"], layout["cwd"]
    write_jsonl(data / "d.jsonl", GOOD[:1])
    server = SimulatorServer(keep_bodies=True, responders=[JudgeResponder()])
    url = server.start()
    judge = json.dumps({"strategy": "llm", "multimodal": True,
                        "models": {"model_id": "judge", "api_url": url}})
    good = _b64((data / "good.jpg").read_bytes())
    try:
        run = _eval(url, data, cwd / "run", cwd, "--judge", judge)
        judged = [b for b in server.bodies() if b["model"] == "judge"]
        (data / "good.jpg").unlink()
        (data / "good.jpg").symlink_to(out / "secret.png")
        shutil.rmtree(cwd / "run" / "cache")  # no cached verdict: the judge is asked again
        server.reset()
        # data/ is outside this cwd and the run's work dir: honoured only when named again
        rescored = run_cli("score", str(cwd / "run"), "--media-root", str(data), cwd=out)
        bodies = server.bodies()
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr
    assert len(judged) == 1 and good in json.dumps(judged)  # the judge is sent the media
    assert rescored.returncode == 0, rescored.stderr
    assert _leaks(bodies) == []
    reviews = (cwd / "run" / "reviews" / "m" / "general_vqa_d.jsonl").read_text()
    assert "outside the allowed media roots" in reviews  # the judge step failed, visibly


def test_resuming_with_another_media_root_is_no_config_change() -> None:
    """Where media may be read from changes no result: a resume does not call it a change."""
    from groundscope.resume import config_changes

    assert config_changes({"media_roots": [], "seed": 1}, {"media_roots": ["/data"], "seed": 1}) == []


def test_a_fifo_or_folder_named_as_a_medium_is_one_line_saying_so(tmp_path: Path) -> None:
    """A FIFO (or a folder) where a video / image should be: a bad record saying it is not a
    regular file, not "file not found" (it exists); never opened, so nothing blocks."""
    os.mkfifo(tmp_path / "pipe.mp4")
    (tmp_path / "dir.png").mkdir()
    with media.media_roots_in_force([tmp_path]):
        with pytest.raises(MediaError, match=r"^video 'pipe\.mp4' is not a regular file "
                                             r"\(a FIFO, socket or device\): "):
            media.check(MediaRef(Modality.VIDEO, "pipe.mp4", base_dir=str(tmp_path)))
        with pytest.raises(MediaError, match=r"^image 'dir\.png' is not a regular file "
                                             r"\(a directory\): "):
            media.check(MediaRef(Modality.IMAGE, "dir.png", base_dir=str(tmp_path)))
