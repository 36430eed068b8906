"""The three nltk modules the English tokenizer uses, imported as cheaply as is safe.

Python runs a package's ``__init__`` before any module in it, and ``nltk/__init__.py`` (with
``nltk/tokenize/__init__.py``) imports nearly all of NLTK: parsers, corpora, collocations,
and numpy, scipy and scikit-learn where they are installed. The tokenizer needs
``nltk.tokenize.punkt``, ``nltk.tokenize.destructive`` (``NLTKWordTokenizer``) and
``nltk.data`` (to find the ``punkt_tab`` model), which import only a few of NLTK's own
modules. Two ways in, measured in a process that has imported what a run imports (nltk
3.10.4, this 2-core machine):

* **Bare** (48 ms of CPU for the build; 66 ms before the grammar stand-ins below): for a
  ``tokenizer_modules(bare=True)`` block (the tokenizer's build), ``nltk`` and
  ``nltk.tokenize`` stand in ``sys.modules`` as empty package objects (their modules are
  found in the same folders; nothing in the two ``__init__`` files runs), and so do
  ``nltk.grammar`` and ``nltk.sem`` (:data:`_LOADERS_ONLY`), and when the block ends every
  ``nltk`` entry it put there is taken out again. The tokenizer keeps its objects; a later
  ``import nltk`` is NLTK's own, whole and fresh. Only where the building thread is the
  process's only Python thread: another thread's ``import nltk`` meanwhile would get the
  empty package, and keep it. A run builds the tokenizer before its first request, while it
  has no other thread (``sidework.py``). Code that runs on the building thread itself
  meanwhile (a signal handler, a finalizer) and imports nltk, ``nltk.grammar`` or
  ``nltk.sem`` does get the empty module (``from nltk.sem import Expression`` fails there);
  once the block is over, what it lacks is looked up on nltk imported whole
  (:class:`_StandIn`).
* **Whole, without its extras** (140 ms; 0.88 s and 65 MB more where scipy is installed and
  let in): everywhere else, ``import nltk`` with ``numpy``, ``scipy`` and ``sklearn``
  answered "not installed" to the importing thread alone (NLTK guards each and carries on
  without them; the tokenizer needs none). The cost: in such a process, if groundscope
  imported nltk first, NLTK's numpy-, scipy- and sklearn-backed extras (``nltk.cluster``,
  TextTiling, the Fisher collocation measure, the transition parser's SVM) behave as if
  those packages were not installed; a program that needs them imports nltk (or scipy)
  first, and then nothing is refused.

Where the program imported nltk itself first, its modules are used as they are. Where an
nltk release's modules need their package's ``__init__`` after all, the bare way is undone
and the whole one taken (the same tokens at the old cost).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["NltkTokenizerModules", "StandInMissing", "only_thread", "tokenizer_modules"]


@dataclass(frozen=True)
class NltkTokenizerModules:
    punkt: ModuleType  # nltk.tokenize.punkt
    destructive: ModuleType  # nltk.tokenize.destructive: NLTKWordTokenizer
    data: ModuleType  # nltk.data: find()
    bare: bool = False  # imported bare: nltk's package modules and _LOADERS_ONLY stand empty


_LOCK = threading.RLock()  # one block at a time; a block may open another in its own thread
_depth = 0


@contextlib.contextmanager
def tokenizer_modules(*, bare: bool = False) -> Iterator[NltkTokenizerModules]:
    """The three modules, for the block's work with them (NLTK's functions import more of
    nltk as they run, so they are called inside it). ``bare``: imported bare where that is
    safe (see the module's docstring); a block inside another gets the outer one's."""
    global _depth
    with _LOCK:
        before = set(sys.modules) if bare and _bare_is_safe() else None
        try:
            modules = _import_bare() if before is not None else None
            if modules is None:
                if before is not None:
                    _forget_nltk(before)
                    before = None
                with _nltk_without_extras():
                    modules = _import_three()
            _depth += 1
            try:
                yield modules
            finally:
                _depth -= 1
        finally:
            if before is not None:
                _forget_nltk(before)  # also on KeyboardInterrupt: no empty package stays


def only_thread() -> bool:
    """Whether the calling thread is the process's only Python thread: none other that
    ``threading`` knows, and none running Python code that it does not (a ``_thread``
    thread, as pytest-xdist's workers have; found by an outside attack). Where it is, the
    tokenizer's build takes the bare import (``sidework.py`` builds it then)."""
    return threading.active_count() == 1 and len(sys._current_frames()) == 1


def _bare_is_safe() -> bool:
    """No block open, no nltk module imported (a stand-in put over one, such as a real
    ``nltk.grammar`` left in ``sys.modules`` without ``nltk``, would stay there after the
    block: found by an outside attack), and no other Python thread that could import it."""
    return (not _depth and only_thread()
            and not any(name == "nltk" or name.startswith("nltk.") for name in sys.modules))


class StandInMissing(AttributeError):
    """A name looked up on an empty stand-in module while it stands in ``sys.modules``: an
    nltk function needed a module the bare import left out (``EnglishTokenizer`` is then
    built again from nltk imported whole)."""


class _StandIn(ModuleType):
    """An empty module standing in for ``nltk``, ``nltk.tokenize`` (packages) or one of
    :data:`_LOADERS_ONLY` during a bare block; a name looked up on it meanwhile raises
    :class:`StandInMissing`.
    Code that ran on this thread meanwhile (a signal handler, a finalizer, a trace hook) and
    imported nltk holds this object; once it no longer stands in ``sys.modules``, what it
    lacks is looked up on the package imported whole (found by an outside attack: such an
    import kept an empty package for good)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if sys.modules.get(self.__name__) is self:
            raise StandInMissing(f"module {self.__name__!r} has no attribute {name!r} "
                                 "(it stands empty while the tokenizer is built)")
        return getattr(importlib.import_module(self.__name__), name)


def _import_three() -> NltkTokenizerModules:
    return NltkTokenizerModules(importlib.import_module("nltk.tokenize.punkt"),
                                importlib.import_module("nltk.tokenize.destructive"),
                                importlib.import_module("nltk.data"))


# nltk.data imports these at its top for ``load()`` of grammar and logic files alone (18 ms
# of NLTK's grammar, feature-structure and semantics modules: the build took 66 ms, 48 now);
# the tokenizer only calls ``find()``, so a bare build gives it empty stand-ins instead.
_LOADERS_ONLY = ("nltk.grammar", "nltk.sem")


def _import_bare() -> NltkTokenizerModules | None:
    """The three, with ``nltk`` and ``nltk.tokenize`` as packages (their ``__path__``) whose
    ``__init__`` has not run; None where nltk is laid out otherwise or its modules need
    their package after all (the caller takes out what this put in ``sys.modules``)."""
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenize"
    sub = importlib.util.spec_from_file_location(
        "nltk.tokenize", folder / "__init__.py", submodule_search_locations=[str(folder)])
    if sub is None or not (folder / "__init__.py").is_file():
        return None
    for name, package in (("nltk", spec), ("nltk.tokenize", sub)):
        module = importlib.util.module_from_spec(package)
        module.__class__ = _StandIn
        sys.modules[name] = module
    for name in _LOADERS_ONLY:  # stand-ins too: nltk.data uses them only in load()
        sys.modules[name] = _StandIn(name)
        setattr(sys.modules["nltk"], name.rpartition(".")[2], sys.modules[name])
    try:
        return replace(_import_three(), bare=True)
    except Exception:  # an nltk whose modules need their package: the whole import instead
        return None


def _forget_nltk(before: set[str]) -> None:
    """Every ``nltk`` module put in ``sys.modules`` since ``before`` taken out again, all of
    them even when a KeyboardInterrupt lands meanwhile (raised once they are out: a stand-in
    left behind broke every later ``import nltk``; found by an outside attack)."""
    interrupted = False
    while True:
        try:
            for name in list(sys.modules):  # (a copy: the loop runs Python code between items)
                if (name == "nltk" or name.startswith("nltk.")) and name not in before:
                    sys.modules.pop(name, None)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


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
    """The first ``import nltk`` of the process (inside the block) without ``numpy``,
    ``scipy`` and ``sklearn``, refused to this thread alone; nothing is refused where nltk
    or scipy is imported already (numpy, if loaded, is not refused either)."""
    if "nltk" in sys.modules or "scipy" in sys.modules:
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
