"""The three nltk modules the English tokenizer uses, without ``nltk``'s package-wide import.

Python runs a package's ``__init__`` before any module in it, and ``nltk/__init__.py`` (with
``nltk/tokenize/__init__.py``) imports nearly all of NLTK: parsers, corpora, collocations,
and numpy, scipy and scikit-learn where they are installed. The tokenizer needs
``nltk.tokenize.punkt``, ``nltk.tokenize.destructive`` (``NLTKWordTokenizer``) and
``nltk.data`` (to find the ``punkt_tab`` model), which import only a few of NLTK's own
modules. So, for the block of :func:`tokenizer_modules` (the tokenizer's build), those two
packages stand in ``sys.modules`` as empty package objects: their modules are found in the
same folders, and nothing in the two ``__init__`` files runs. When the block ends, every
``nltk`` entry it put in ``sys.modules`` is taken out again: the tokenizer keeps its
objects, and a later ``import nltk`` by anyone in the process is NLTK's own, whole and fresh.

Measured in a process that has imported what a run imports (nltk 3.10.4, this 2-core
machine): the three cost 59 ms of CPU against 140 ms for ``import nltk`` with numpy, scipy
and sklearn kept out of it (as this module did until 2026-12-06), and 0.88 s where scipy is
installed and let in. None of the three imports numpy, scipy or sklearn.

Where the program imported nltk itself first, its modules are used as they are. Where an
nltk release's modules need their package's ``__init__`` after all, the empty packages are
taken out and nltk is imported whole (the same tokens at the old cost, with whatever
optional packages nltk finds). One window: during the block (~0.07 s, once per process, in
the thread that builds the tokenizer), another thread that runs ``import nltk`` would get
the empty package; groundscope has no such thread.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

__all__ = ["NltkTokenizerModules", "tokenizer_modules"]


@dataclass(frozen=True)
class NltkTokenizerModules:
    punkt: ModuleType  # nltk.tokenize.punkt
    destructive: ModuleType  # nltk.tokenize.destructive: NLTKWordTokenizer
    data: ModuleType  # nltk.data: find()


_LOCK = threading.RLock()  # one block at a time; a block may open another in its own thread
_depth = 0


@contextlib.contextmanager
def tokenizer_modules() -> Iterator[NltkTokenizerModules]:
    """The three modules, for the block's work with them (NLTK's own functions import more
    of nltk as they run, so they are called inside it); see the module's docstring."""
    global _depth
    with _LOCK:
        if _depth or "nltk" in sys.modules:  # an outer block's, or the program's own nltk
            bare = False
            modules = _import_three()
        else:
            before = set(sys.modules)
            bare = _empty_packages()
            if bare:
                try:
                    modules = _import_three()
                except Exception:  # an nltk whose modules need their package: nltk whole
                    _forget_nltk(before)
                    bare = False
            if not bare:
                modules = _import_three()  # nltk whole, left imported as any import would be
        _depth += 1
        try:
            yield modules
        finally:
            _depth -= 1
            if bare:
                _forget_nltk(before)


def _import_three() -> NltkTokenizerModules:
    return NltkTokenizerModules(importlib.import_module("nltk.tokenize.punkt"),
                                importlib.import_module("nltk.tokenize.destructive"),
                                importlib.import_module("nltk.data"))


def _empty_packages() -> bool:
    """``nltk`` and ``nltk.tokenize`` in ``sys.modules`` as packages (their ``__path__``)
    whose ``__init__`` has not run; False (and nothing put there) where nltk is laid out
    otherwise."""
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        return False
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenize"
    if not (folder / "__init__.py").is_file():
        return False
    sub = importlib.util.spec_from_file_location(
        "nltk.tokenize", folder / "__init__.py", submodule_search_locations=[str(folder)])
    if sub is None:
        return False
    sys.modules["nltk"] = importlib.util.module_from_spec(spec)
    sys.modules["nltk.tokenize"] = importlib.util.module_from_spec(sub)
    return True


def _forget_nltk(before: set[str]) -> None:
    """Every ``nltk`` module put in ``sys.modules`` since ``before`` taken out again."""
    for name in [n for n in sys.modules if n not in before]:
        if name == "nltk" or name.startswith("nltk."):
            del sys.modules[name]
