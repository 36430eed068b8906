"""Session-wide test settings: groundscope's user cache (the English tokenizer spec) goes to
a temporary directory, so tests neither read nor write ~/.cache/groundscope. Set here, at
import, so the CLI subprocesses the tests start inherit it too."""

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
