"""The per-sample media work done once (issue 21): a folder resolved once, a file version
identified without hashing; confinement still holds when a folder is swapped for a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from groundscope import media
from groundscope.errors import MediaError
from groundscope.media.roots import real_file
from groundscope.media.sources import file_version
from groundscope.types import MediaRef, Modality
from media_fixtures import image_bytes


def test_real_file_agrees_with_realpath_for_links_and_dotdots(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.png").write_bytes(b"x")
    os.symlink(tmp_path / "a" / "b", tmp_path / "dirlink")
    os.symlink(tmp_path / "a" / "b" / "x.png", tmp_path / "a" / "filelink.png")
    os.symlink(tmp_path / "a" / "b", tmp_path / "a" / "up")
    for path in ["a/b/x.png", "dirlink/x.png", "a/filelink.png", "a/up/../b/x.png",
                 "a/up/../../a/b/x.png", "missing/y.png", "a/b/.", "a//b/./x.png"]:
        full = str(tmp_path / path)
        assert real_file(full) == os.path.realpath(full), path


def test_a_folder_swapped_for_a_link_after_it_was_resolved_is_not_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "data", tmp_path / "outside"
    (root / "img").mkdir(parents=True)
    (outside / "img").mkdir(parents=True)
    (root / "img" / "a.png").write_bytes(image_bytes("PNG"))
    (outside / "img" / "a.png").write_bytes(image_bytes("PNG", color="blue"))
    ref = MediaRef(Modality.IMAGE, "img/a.png", base_dir=root)
    with media.media_roots_in_force([root]):
        assert media.load(ref)[0] == image_bytes("PNG")  # the folder's real path remembered
        (root / "img").rename(root / "old")
        os.symlink(outside / "img", root / "img")  # the folder is now a link out of the root
        with pytest.raises(MediaError):
            media.load(ref)


def test_a_file_version_changes_with_the_file_and_reads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(image_bytes("PNG"))
    ref = MediaRef(Modality.IMAGE, str(path))
    with media.media_roots_in_force([tmp_path]):
        first = file_version(ref)
        assert first is not None and first.startswith(os.path.realpath(path) + "|")
        path.write_bytes(image_bytes("PNG", size=(20, 12)))
        assert file_version(ref) not in (None, first)
        assert file_version(MediaRef(Modality.IMAGE, str(tmp_path / "gone.png"))) is None
