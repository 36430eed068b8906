"""Session-wide test settings: groundscope's user cache (the English tokenizer spec) goes to
a temporary directory, so tests neither read nor write ~/.cache/groundscope. Set here, at
import, so the CLI subprocesses the tests start inherit it too. ``tmp_media_root`` lets a unit
test read media it names by their absolute ``tmp_path`` paths."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_CACHE_DIR = tempfile.mkdtemp(prefix="groundscope-test-cache-")
os.environ["GROUNDSCOPE_CACHE_DIR"] = _CACHE_DIR


@pytest.fixture(scope="session", autouse=True)
def _user_cache_dir():
    yield _CACHE_DIR
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture
def tmp_media_root(tmp_path):
    """``tmp_path`` as a media root (beside the working directory) for the test: unit tests
    that name media files by their absolute ``tmp_path`` path, outside any dataset folder.
    Use it with ``pytestmark = pytest.mark.usefixtures("tmp_media_root")``."""
    from groundscope import media

    with media.media_roots_in_force([os.getcwd(), tmp_path]):
        yield tmp_path
