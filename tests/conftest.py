"""Shared fixtures: ``tmp_media_root`` lets a unit test read media it names by their absolute
``tmp_path`` paths."""

from __future__ import annotations

import os

import pytest

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
