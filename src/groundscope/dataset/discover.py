"""Find the file of one dataset subset under ``local_path`` (never a network hub).

For a directory, each extension in turn (``.jsonl``, ``.csv``, ``.tsv``, ``.parquet``) is
tried as ``{subset}_{split}{ext}`` then ``{subset}{ext}``, the order EvalScope uses. A file
``local_path`` serves every subset.
"""

from __future__ import annotations

from pathlib import Path

from groundscope.dataset.readers import SUPPORTED_EXTENSIONS
from groundscope.errors import DatasetError

__all__ = ["candidates", "find_subset_file", "list_subsets"]


def candidates(local_path: Path, subset: str, split: str) -> list[Path]:
    """Every path tried for a subset, in order of preference."""
    return [
        Path(local_path) / name
        for ext in SUPPORTED_EXTENSIONS
        for name in (f"{subset}_{split}{ext}", f"{subset}{ext}")
    ]


def find_subset_file(local_path: Path, subset: str, split: str) -> Path:
    """The file holding ``subset`` (``split`` is ``test`` for VQA, ``val`` for VMCQ)."""
    local_path = Path(local_path)
    if local_path.is_file():
        if local_path.suffix.lower() not in SUPPORTED_EXTENSIONS:
            raise DatasetError(
                f"{local_path}: unsupported dataset file type {local_path.suffix!r}; "
                f"expected one of {', '.join(SUPPORTED_EXTENSIONS)}"
            )
        return local_path
    if not local_path.is_dir():
        raise DatasetError(f"dataset path does not exist: {local_path}")
    tried = candidates(local_path, subset, split)
    for path in tried:
        if path.is_file():
            return path
    expected = ", ".join(p.name for p in tried)
    present = ", ".join(_dataset_files(local_path)) or "no dataset files"
    raise DatasetError(
        f"no file for subset {subset!r} (split {split!r}) in {local_path}: "
        f"expected one of {expected}; found {present}"
    )


def list_subsets(local_path: Path, split: str = "test") -> list[str]:
    """Subset names under ``local_path``: file stems without a ``_{split}`` suffix.

    A file ``local_path`` is its own single subset.
    """
    local_path = Path(local_path)
    if local_path.is_file():
        names = [local_path.name]
    elif local_path.is_dir():
        names = _dataset_files(local_path)
    else:
        raise DatasetError(f"dataset path does not exist: {local_path}")
    suffix = f"_{split}"
    stems = (Path(name).stem for name in names)
    subsets = {s[: -len(suffix)] if s.endswith(suffix) and s != suffix else s for s in stems}
    return sorted(subsets)


def _dataset_files(directory: Path) -> list[str]:
    return sorted(
        p.name for p in directory.iterdir() if p.is_file() and p.suffix.lower() in SUPPORTED_EXTENSIONS
    )
