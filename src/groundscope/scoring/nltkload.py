"""nltk's first import in a process, without the optional packages it reaches for.

``import nltk`` runs NLTK's package-wide import: collocations, metrics, the parsers and
more, each guarding an import of numpy, scipy or scikit-learn. The English tokenizer
(``english.py``) needs none of them, and where they are installed they are most of the
import's cost.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
import threading
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from typing import Any

__all__ = ["import_nltk"]


class _RefuseInThread(importlib.abc.MetaPathFinder):
    """Answers "not installed" for ``prefixes`` imported by a thread of ``threads`` (those
    importing nltk for groundscope, while they do); other threads and every other module
    are left to the next finder.

    Installed once and never taken out: another thread's import may be looking through
    ``sys.meta_path`` meanwhile (the run builds the tokenizer in a background thread), and
    removing an entry shifts the list under that lookup, which then skips a finder."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        self.prefixes = prefixes
        self.threads: set[int] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if self.threads and threading.get_ident() in self.threads \
                and name.split(".")[0] in self.prefixes:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


_REFUSER = _RefuseInThread(("numpy", "scipy", "sklearn"))


@contextlib.contextmanager
def _nltk_without_extras() -> Iterator[None]:
    """The first ``import nltk`` of the process, without the optional packages its
    package-wide import reaches for (``numpy``, ``scipy``, ``sklearn``: NLTK guards each
    import and carries on without them). Where scipy is installed, ``import nltk`` took
    0.88 s of CPU and grew RSS by 81 MB (to 117 MB), against 0.26 s and 52 MB without it
    (nltk 3.10.4, this machine); leaving numpy out too takes building the tokenizer from
    0.23 s to 0.18 s and the process's peak RSS from 55 MB to 43 MB (the same tokens). The
    tokenizer needs none of them. The cost: in a process where groundscope imported nltk
    first, NLTK's numpy-, scipy- and sklearn-backed extras (``nltk.cluster``, TextTiling,
    the Fisher collocation measure, the transition parser's SVM) behave as if those
    packages were not installed; a program that needs them imports nltk (or scipy)
    before groundscope, and then nothing is refused (numpy already imported is not
    refused either)."""
    if "nltk" in sys.modules or "scipy" in sys.modules:  # (numpy, if loaded, is not refused)
        yield
        return
    if _REFUSER not in sys.meta_path:
        sys.meta_path.insert(0, _REFUSER)
    thread = threading.get_ident()
    _REFUSER.threads.add(thread)
    try:
        yield
    finally:
        _REFUSER.threads.discard(thread)


def import_nltk() -> None:
    """Import nltk (once per process; a no-op after): see :func:`_nltk_without_extras`."""
    with _nltk_without_extras():
        import nltk  # noqa: F401  (the package: every nltk submodule import runs it first)
