"""The allowed media roots (media/roots.py) on real folders, files and symlinks: what is
inside a root, what only looks inside. Cases found by mutation testing (mutmut): each fails
with its mutant applied."""

from __future__ import annotations

import contextvars
import os
from pathlib import Path

import pytest

from groundscope.errors import MediaError, MediaRootError
from groundscope.media.roots import confine, media_roots, open_confined, set_media_roots


def _read(path: Path | str) -> bytes:
    fd = open_confined(path, None, str(path)).fd
    with os.fdopen(fd, "rb") as f:
        return f.read()


def test_set_media_roots_puts_them_in_force(tmp_path: Path) -> None:
    root = tmp_path / "media"
    root.mkdir()
    (root / "a.png").write_bytes(b"a")

    def inside() -> tuple[tuple[str, ...], bytes]:
        set_media_roots([root])
        return media_roots(), _read(root / "a.png")

    assert contextvars.copy_context().run(inside) == ((os.path.realpath(root),), b"a")


def test_a_sibling_folder_sharing_the_roots_prefix_is_outside(tmp_path: Path) -> None:
    root, sibling = tmp_path / "media", tmp_path / "media-secret"
    root.mkdir()
    sibling.mkdir()
    (sibling / "x.png").write_bytes(b"secret")

    def read() -> bytes:
        set_media_roots([root])
        return _read(sibling / "x.png")

    with pytest.raises(MediaRootError, match="outside the allowed media roots"):
        contextvars.copy_context().run(read)


def test_the_filesystem_root_as_a_root_allows_what_is_beneath(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"a")

    def check() -> str:
        set_media_roots([os.sep])
        return confine(tmp_path / "a.png", None, "a.png")

    assert contextvars.copy_context().run(check) == os.path.realpath(tmp_path / "a.png")


def test_links_and_dot_dot_are_resolved_as_the_system_resolves_them(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (root / "x.png").write_bytes(b"inside")
    (outside / "x.png").write_bytes(b"outside")
    (root / "link.png").symlink_to(root / "x.png")  # a link to a file inside: read
    (root / "door").symlink_to(outside / "deep")  # door/.. is outside/, not root/

    def run() -> tuple[bytes, bytes]:
        set_media_roots([root])
        linked, dotted = _read(root / "link.png"), _read(f"{root}/sub/../x.png")
        with pytest.raises(MediaRootError, match=r"resolves to .*outside"):
            _read(f"{root}/door/../x.png")
        return linked, dotted

    assert contextvars.copy_context().run(run) == (b"inside", b"inside")


def test_a_relative_dot_dot_through_a_link_is_resolved_by_the_system(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``door/..`` is the link target's parent, not the folder holding ``door``: a relative
    path is not normalised by text before it is resolved."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    (outside / "deep").mkdir(parents=True)
    (root / "x.png").write_bytes(b"inside")
    (outside / "x.png").write_bytes(b"outside")
    (root / "door").symlink_to(outside / "deep")
    monkeypatch.chdir(tmp_path)

    def read() -> bytes:
        set_media_roots([root])
        assert _read("root/x.png") == b"inside"  # relative, resolved against the cwd
        return _read("root/door/../x.png")

    with pytest.raises(MediaRootError, match=r"resolves to .*outside"):
        contextvars.copy_context().run(read)


def test_a_missing_file_inside_a_root_is_an_os_error_not_a_crash(tmp_path: Path) -> None:
    def run() -> str:
        set_media_roots([tmp_path])
        with pytest.raises(FileNotFoundError):
            _read(tmp_path / "gone.png")
        return confine(tmp_path / "gone.png", None, "gone.png")

    assert contextvars.copy_context().run(run) == os.path.join(os.path.realpath(tmp_path),
                                                               "gone.png")


@pytest.mark.parametrize("proc", [True, False], ids=["with-proc", "without-proc"])
def test_a_folder_swapped_for_a_link_between_check_and_open_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc: bool) -> None:
    """The check-then-open race, made to happen: after the path is checked inside the root
    and before it is opened, its folder becomes a link to a folder outside. The opened file
    is then refused, by the kernel's name for the descriptor (/proc) or, where there is no
    /proc, by resolving the path again (mutation testing found that second way untested)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "media").mkdir(parents=True)
    outside.mkdir()
    (root / "media" / "a.png").write_bytes(b"inside")
    (outside / "a.png").write_bytes(b"SECRET")
    real_open, real_readlink = os.open, os.readlink

    def swapping_open(path: str, *args: object, **kwargs: object) -> int:
        if str(path).endswith("a.png"):
            os.rename(root / "media", root / "media-old")
            os.symlink(outside, root / "media")
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    def no_proc(path: str, *args: object, **kwargs: object) -> str:
        if str(path).startswith("/proc/self/fd/"):
            raise FileNotFoundError(path)
        return real_readlink(path, *args, **kwargs)  # type: ignore[arg-type]

    if not proc:
        monkeypatch.setattr(os, "readlink", no_proc)
        fd = open_confined(root / "media" / "a.png", root, "a.png").fd  # an honest open: fine
        os.close(fd)
    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(MediaError, match="changed while it was being opened"):
        open_confined(root / "media" / "a.png", root, "a.png")
