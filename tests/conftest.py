"""Shared fixtures: ``tmp_media_root`` lets a unit test read media it names by their absolute
``tmp_path`` paths; ``png`` and ``wav`` are tiny real media files."""

from __future__ import annotations

import os
import wave
from pathlib import Path

import pytest
from PIL import Image

# The hostile-corpus generators are scripts (run by hand, imported by tests), not test
# modules: --doctest-modules would otherwise import the four make_corpus.py under one name.
collect_ignore_glob = ["bad_inputs/make_corpus.py", "untrusted/*/make_corpus.py"]


@pytest.fixture
def tmp_media_root(tmp_path):
    """``tmp_path`` as a media root (beside the working directory) for the test: unit tests
    that name media files by their absolute ``tmp_path`` path, outside any dataset folder.
    Use it with ``pytestmark = pytest.mark.usefixtures("tmp_media_root")``."""
    from groundscope import media

    with media.media_roots_in_force([os.getcwd(), tmp_path]):
        yield tmp_path


@pytest.fixture
def png(tmp_path: Path) -> Path:
    """A tiny real PNG."""
    path = tmp_path / "dot.png"
    Image.new("RGB", (4, 3), (200, 10, 10)).save(path)
    return path


@pytest.fixture
def wav(tmp_path: Path) -> Path:
    """A tiny real WAV (10 ms of 8 kHz mono)."""
    path = tmp_path / "beep.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x10" * 80)
    return path
