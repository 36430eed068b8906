"""English word tokens with NLTK ``word_tokenize`` semantics, without downloaded data.

Punkt sentence split (NLTK's trained ``punkt_tab`` parameters when that model is installed,
else ours: common abbreviations and sentence starters), then ``NLTKWordTokenizer``'s steps
per sentence. Built once, lazily, on first use or by ``warm_up``.

Spec cache. All the tokenizer takes from nltk is data: the word steps' patterns and
replacements, Punkt's candidate and realignment patterns, the abbreviations and whether
the parameters have collocations. Importing nltk for it costs ~0.3 s of CPU, so the first
build writes that data as JSON (a "spec") to the user cache dir ($GROUNDSCOPE_CACHE_DIR,
else $XDG_CACHE_HOME/groundscope, else ~/.cache/groundscope), in a file named for the spec
format and the installed nltk version; later builds recompile the patterns from it (each
with the engine nltk compiled it with, ``re`` or the ``regex`` module, from the same source
and flags) and do not import nltk. A spec is used only if it passes every check: the shape
and type of each field, a digest of the content, the format, nltk and regex versions, and
how ``punkt_parameters`` was decided: ``NLTK_DATA`` and the directories nltk searches are
the same, and each place there where nltk could find punkt_tab looks as it did (absent, or
the same files with the same mtimes, sizes and modes). Anything else (no file, a corrupt,
stale or edited one, an unwritable dir) builds from nltk as before, logging one debug line
at most, and rewrites the file atomically. Contexts the shortcuts below leave undecided ask
NLTK's Punkt, imported then on first need; ``needs_nltk_often`` says when that is common.

English shortcuts, each exactly NLTK's result (tests compare with NLTK on targeted input):

* Punkt's candidate/realignment loop runs here, without its generator chain. A text with
  no [.?!] before its end is one sentence. Two context shapes are breaks without token
  annotation: "?"/"!", spaces, a letter or digit (the mark is its own token, a break in
  the first pass, kept by the second); with no collocations in the parameters, "word."
  (2+ ASCII letters, no abbreviation: one token, not an initial, number or ellipsis),
  spaces, a letter or digit. Other contexts ask NLTK, memoised (a function of the context).
* A final [.?!] after an ASCII letter or digit is split off first: NLTK makes it a token,
  and every other pattern sees a letter or digit before it as before the string's end.
* Word steps run in order, each only if characters it needs are present (unknown patterns
  always run); fixed-string steps use ``str.replace`` (leftmost, non-overlapping, as the
  regex); "\\s+" -> " " runs only for whitespace other than " " (later patterns need one
  space next to a non-space or a word boundary; the final split ignores runs).
* A ``(?i)`` contraction runs only if its literal is in the (ASCII, lower-cased) text; for
  other text one case-insensitive search decides for all.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import stat
import string
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["EnglishTokenizer", "english", "needs_nltk_often", "punkt_parameters", "warm_up"]

log = logging.getLogger("groundscope")

_CACHE_SIZE = 4096

# Abbreviations (lower case, final period removed) that do not end a sentence. Ours, kept
# to unambiguous forms: words that also end sentences ("no", "sat", "mar") are left out.
_ABBREVIATIONS = frozenset(str.split(
    "mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx a.m p.m u.s u.k u.n u.s.a "
    "inc ltd co corp dept univ assn bros jan feb apr aug sept oct nov dec gen gov sen rep "
    "capt col lt sgt rev messrs fig vol pp ph.d ave blvd"
))
# Capitalised words that start a new sentence after an abbreviation or an ellipsis.
_SENT_STARTERS = frozenset(str.split(
    "the a an this that these those it its he she we they i you there but and however in "
    "on at for if when while after before as so his her their our my what why how also "
    "then yet still although because since"
))

# Whitespace other than " " (for Python's and the regex module's \s, and a few more): the
# "\s+" -> " " step matters only with one of these.
_OTHER_SPACE = ("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u180e\u2028\u2029\u202f\u205f\u3000"
                "\u200b\ufeff" + "".join(map(chr, range(0x2000, 0x200B))))
# Patterns matching fixed strings only: source -> one multi-character string or characters.
_LITERALS: Mapping[str, tuple[str, ...]] = {
    "(``)": ("``",), "--": ("--",), "''": ("''",), '"': ('"',), "[;@#$%&]": tuple(";@#$%&"),
    "[\\u2012-\\u2015]": tuple("\u2012\u2013\u2014\u2015"), "[?!]": tuple("?!"), "[*]": ("*",),
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": tuple("[](){}<>"), "([»”’])": tuple("»”’"),
}
_FINAL_PERIOD = ("([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$", "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$")
_CLOSERS = "]})>\"'»”’ "


def _final_period(text: str) -> bool:
    return text.rstrip().rstrip(_CLOSERS).endswith(".")


def _any_of(*pieces: str) -> Callable[[str], bool]:
    return lambda text: any(map(text.__contains__, pieces))


_COLON_END = (":", ",", ":\n", ",\n")  # "$" also matches before a final newline
_QUOTE_START = re.compile("(?<![0-9A-Za-z_])'").search  # (?<!\w)': no word character before
# Other patterns: source -> (characters one of which any match contains, a further
# necessary test of the current text or None).
_GATES: Mapping[str, tuple[str, Callable[[str], bool] | None]] = {
    "([«“‘„]|[`]+)": ("«“‘„`", None), '^\\"': ('"', lambda text: text.startswith('"')),
    "([ \\(\\[{<])(\\\"|\\'{2})": ("\"'", _any_of('"', "''")),
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": ("'", _QUOTE_START),
    _FINAL_PERIOD[0]: (".", _final_period), _FINAL_PERIOD[1]: (".", _final_period),
    "([:,])([^\\d])": (":,", None), "([:,])$": (":,", lambda text: text.endswith(_COLON_END)),
    "\\.{2,}": (".", lambda text: ".." in text), "([^'])' ": ("'", lambda text: "' " in text),
    "([^' ])('[sS]|'[mM]|'[dD]|') ": ("'", _any_of(*(f"'{c} " for c in ("", *"sSmMdD")))),
    "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": ("'", _any_of(*(
        f"{c} " for c in ("'ll", "'LL", "'re", "'RE", "'ve", "'VE", "n't", "N'T")))),
}
_ALNUM = frozenset(string.ascii_letters + string.digits)
# Contractions are written "(?i)...(can)(?#X)(not)..." in NLTK: the two groups, joined, are
# a literal that any match contains.
_CONTRACTION = re.compile(r"\(([\w']+)\)\(\?#X\)\(([\w']+)\)")
_SENT_END = re.compile(r"[.?!]")
# Punkt contexts decided here (see the module notes).
_MARK_BREAK = re.compile(r"[!-~]*[?!] +[A-Za-z0-9]").match
_WORD_PERIOD = re.compile(r"([A-Za-z]{2,})\. +[A-Za-z0-9]").match

# A step: (characters one of which must be present or None, a test of the current text or
# None, the substitution, the characters other than spaces its replacement may add).
Step = tuple[frozenset[str] | None, Callable[[str], bool] | None, Callable[[str], str], frozenset[str]]
Planned = tuple[Callable[[str], bool] | None, Callable[[str], str]]  # (test, substitution)
_BACKREF = re.compile(r"\\(?:\d+|g<\w+>)")


def _bare(pattern: Any) -> Any:
    """The compiled pattern inside NLTK's timeout wrapper (same engine, much faster)."""
    return getattr(pattern, "_rx", pattern)


def _replacer(pairs: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    def replace(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    return replace


def _step(pattern: Any, replacement: str) -> Step:
    compiled = _bare(pattern)
    source = compiled.pattern
    literals = _LITERALS.get(source, ())
    if literals and all(compiled.fullmatch(literal) for literal in literals):
        pairs = tuple((literal, compiled.sub(replacement, literal)) for literal in literals)
        adds = frozenset("".join(new for _, new in pairs)) - frozenset("".join(literals) + " ")
        return frozenset(literal[0] for literal in literals), None, _replacer(pairs), adds
    substitute = functools.partial(compiled.sub, replacement)
    adds = frozenset(_BACKREF.sub("", replacement)) - {" "}
    if source == "\\s+" and replacement == " ":
        return frozenset(_OTHER_SPACE), None, substitute, adds
    chars, test = _GATES.get(source, (None, None))
    return (None if chars is None else frozenset(chars)), test, substitute, adds


def _plan(stages: Sequence[Sequence[Step]], found: frozenset[str]) -> list[list[Planned]]:
    """Per stage, the steps that may match a text whose gating characters are ``found``
    (the characters earlier steps may add are taken as present)."""
    present, plans = set(found), []
    for steps in stages:
        plan = []
        for chars, test, substitute, adds in steps:
            if chars is None or not chars.isdisjoint(present):
                plan.append((test, substitute))
                present |= adds
        plans.append(plan)
    return plans


def _run(plan: Sequence[Planned], text: str) -> str:
    for test, substitute in plan:
        if test is None or test(text):
            text = substitute(text)
    return text


def _contraction_literal(pattern: Any) -> str | None:
    """The lower-case literal any match of a ``(?i)`` contraction pattern contains."""
    found = _CONTRACTION.search(pattern.pattern)
    if found is None or not pattern.pattern.startswith("(?i)"):
        return None
    return (found.group(1) + found.group(2)).lower()


_PUNKT_TAB = "tokenizers/punkt_tab/english/"


def _find_punkt_tab() -> Any | None:
    """nltk's pointer to the English ``punkt_tab`` model, or None when it finds none."""
    import nltk

    try:
        return nltk.data.find(_PUNKT_TAB)
    except (LookupError, OSError, ValueError):
        return None


def punkt_parameters() -> Any:
    """English ``PunktParameters``: NLTK's trained model when ``punkt_tab`` is installed
    (exactly what EvalScope uses), else ours: abbreviations and sentence starters only."""
    from nltk.tokenize.punkt import PunktParameters, load_punkt_params

    found = _find_punkt_tab()
    if found is not None:
        try:
            return load_punkt_params(found)
        except (LookupError, OSError, ValueError):
            pass
    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    params.sent_starters = set(_SENT_STARTERS)
    return params


def _punkt() -> Any:
    """NLTK's ``PunktSentenceTokenizer`` with our parameters, its patterns unwrapped."""
    from nltk.tokenize import punkt

    class LanguageVars(punkt.PunktLanguageVars):
        __slots__ = ()
        re_boundary_realignment = _bare(punkt.PunktLanguageVars.re_boundary_realignment)

        def period_context_re(self) -> Any:
            return _bare(super().period_context_re())

        def _word_tokenizer_re(self) -> Any:
            return _bare(super()._word_tokenizer_re())

    patterns = {n: _bare(getattr(punkt.PunktToken, n)) for n in dir(punkt.PunktToken)
                if n.startswith("_RE_")}
    token = type("Token", (punkt.PunktToken,), {"__slots__": (), **patterns})
    return punkt.PunktSentenceTokenizer(punkt_parameters(), lang_vars=LanguageVars(),
                                        token_cls=token)


# ---------------------------------------------------------------- what the tokenizer takes from nltk

class _Parts(NamedTuple):
    """What the tokenizer takes from nltk: compiled patterns (nltk's own objects, or compiled
    again from a spec) with their replacements, and the Punkt parameters the shortcuts read."""

    starting_quotes: list[tuple[Any, str]]
    punctuation: list[tuple[Any, str]]
    parens_brackets: tuple[Any, str]
    double_dashes: tuple[Any, str]
    ending_quotes: list[tuple[Any, str]]
    contractions2: list[Any]
    contractions3: list[Any]
    period_context: Any  # Punkt's candidate ends (named groups "after_tok", "next_tok")
    boundary_realignment: Any
    abbrev_types: frozenset[str]
    collocations: bool  # whether the parameters have any


_STEP_LISTS = ("starting_quotes", "punctuation", "ending_quotes")  # (pattern, replacement) lists
_STEPS = ("parens_brackets", "double_dashes")  # one (pattern, replacement) each
_PATTERN_LISTS = ("contractions2", "contractions3")
_PATTERNS = ("period_context", "boundary_realignment")


def _parts_from_nltk(punkt: Any) -> _Parts:
    """The parts of NLTK's word tokenizer and of ``punkt`` (see :func:`_punkt`)."""
    from nltk.tokenize.destructive import NLTKWordTokenizer as Word

    def steps(pairs: Sequence[tuple[Any, str]]) -> list[tuple[Any, str]]:
        return [(_bare(pattern), replacement) for pattern, replacement in pairs]

    lang_vars, params = punkt._lang_vars, punkt._params
    parens, dashes = steps([Word.PARENS_BRACKETS, Word.DOUBLE_DASHES])
    return _Parts(
        starting_quotes=steps(Word.STARTING_QUOTES), punctuation=steps(Word.PUNCTUATION),
        parens_brackets=parens, double_dashes=dashes, ending_quotes=steps(Word.ENDING_QUOTES),
        contractions2=[_bare(p) for p in Word.CONTRACTIONS2],
        contractions3=[_bare(p) for p in Word.CONTRACTIONS3],
        period_context=lang_vars.period_context_re(),
        boundary_realignment=lang_vars.re_boundary_realignment,
        abbrev_types=frozenset(params.abbrev_types), collocations=bool(params.collocations),
    )


def _patterns_of(parts: _Parts) -> list[Any]:
    return [*(p for name in _STEP_LISTS for p, _ in getattr(parts, name)),
            *(getattr(parts, name)[0] for name in _STEPS),
            *(p for name in _PATTERN_LISTS for p in getattr(parts, name)),
            *(getattr(parts, name) for name in _PATTERNS)]


# ---------------------------------------------------------------- the spec cache

_SPEC_FORMAT = 1
_SPEC_MAX_BYTES = 1 << 20
_SPEC_KEYS = ("format", "nltk", "regex", "origin", "parts", "digest")
_ORIGIN_KEYS = ("nltk_data", "search_path", "punkt_tab", "probe")
_PART_KEYS = _Parts._fields
_PATTERN_KEYS = ("engine", "source", "flags")
_ENGINES = ("re", "regex")  # the stdlib module, or the third-party one nltk compiles most with
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._+-]")
# Where nltk.data.find looks for "tokenizers/punkt_tab/english/" under each search directory:
# the directory, then zip files of one of the path's components.
_PUNKT_TAB_PLACES = (("tokenizers", "punkt_tab", "english"), ("tokenizers.zip",),
                     ("tokenizers", "punkt_tab.zip"), ("tokenizers", "punkt_tab", "english.zip"))


class _SpecError(ValueError):
    """A spec that cannot be used or written (the message says why)."""


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise _SpecError(what)


def _is_int(value: object) -> bool:
    return type(value) is int  # not a bool


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_list_of(value: object, test: Callable[[object], bool]) -> bool:
    return isinstance(value, list) and all(map(test, value))


def _has_keys(value: object, keys: Sequence[str]) -> bool:
    return isinstance(value, dict) and value.keys() == set(keys)


def _cache_dir() -> str | None:
    """$GROUNDSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/groundscope, else ~/.cache/groundscope
    (None without a home directory)."""
    explicit = os.environ.get("GROUNDSCOPE_CACHE_DIR")
    if explicit:
        return os.path.expanduser(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "groundscope")
    home = os.path.expanduser("~")
    return None if home == "~" else os.path.join(home, ".cache", "groundscope")


def _spec_location() -> tuple[str, str] | None:
    """The spec file for the installed nltk, and that nltk's version (without importing it);
    None without a cache dir or an installed nltk."""
    from importlib.metadata import PackageNotFoundError, version

    directory = _cache_dir()
    try:
        nltk_version = version("nltk")
    except PackageNotFoundError:
        return None
    if directory is None or not isinstance(nltk_version, str):
        return None
    name = f"english-spec-v{_SPEC_FORMAT}-nltk-{_UNSAFE_IN_NAME.sub('_', nltk_version)}.json"
    return os.path.join(directory, name), nltk_version


def _nltk_search_path() -> list[str]:
    """The directories nltk puts in ``nltk.data.path`` when imported, derived from the same
    environment: $NLTK_DATA's entries, ~/nltk_data, the interpreter prefix's data directories,
    then the system-wide ones."""
    dirs = [os.path.expanduser(entry) for entry in os.environ.get("NLTK_DATA", "").split(os.pathsep)
            if entry]
    if "APPENGINE_RUNTIME" not in os.environ and os.path.expanduser("~/") != "~/":
        dirs.append(os.path.expanduser("~/nltk_data"))
    dirs += [os.path.join(sys.prefix, *sub) for sub in (("nltk_data",), ("share", "nltk_data"),
                                                        ("lib", "nltk_data"))]
    if os.name == "nt":
        dirs.append(os.path.join(os.environ.get("APPDATA", "C:\\"), "nltk_data"))
        dirs += [f"{drive}:\\nltk_data" for drive in "CDE"]
    else:
        dirs += [f"/usr/{sub}nltk_data" for sub in ("share/", "local/share/", "lib/", "local/lib/")]
    return dirs


def _stat_record(path: str) -> list[Any] | None:
    """[path, mtime_ns, size, mode], or None when there is nothing there."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return [path, info.st_mtime_ns, info.st_size, info.st_mode]


def _probe(search_path: Sequence[str]) -> list[list[Any]]:
    """What exists of the places where nltk could find punkt_tab in ``search_path``: a search
    entry that is a file (nltk opens it as a zip), the model's directory and each of its
    entries, the zip files nltk would look in. Empty when punkt_tab is nowhere."""
    records: list[list[Any]] = []
    for root in search_path:
        top = _stat_record(root)
        if top is None:
            continue
        if not stat.S_ISDIR(top[3]):
            records.append(top)
            continue
        for place in _PUNKT_TAB_PLACES:
            found = _stat_record(os.path.join(root, *place))
            if found is None:
                continue
            records.append(found)
            if stat.S_ISDIR(found[3]):
                try:
                    names = sorted(os.listdir(found[0]))
                except OSError:
                    names = ["\0unreadable"]  # a name no file has: recorded, compared alike
                for name in names:
                    entry = os.path.join(found[0], name)
                    records.append(_stat_record(entry) or [entry, -1, -1, -1])
    return records


def _origin() -> dict[str, Any] | None:
    """How ``punkt_parameters`` is decided in this process, as a spec records it; None when it
    could not be checked again without nltk (``nltk.data.path`` is not the one nltk derives
    from the environment: changed at run time, or laid out unlike :func:`_nltk_search_path`)."""
    import nltk

    search_path = nltk.data.path
    if search_path != _nltk_search_path():
        log.debug("english tokenizer: nltk.data.path is not nltk's default, spec cache not written")
        return None
    probe = _probe(search_path)  # first: whatever changes after this shows in the next probe
    found = _find_punkt_tab()
    return {"nltk_data": os.environ.get("NLTK_DATA"), "search_path": list(search_path),
            "punkt_tab": None if found is None else str(getattr(found, "path", found)),
            "probe": probe}


def _check_origin(origin: object) -> None:
    """That ``punkt_parameters`` would be decided now as when the spec was written."""
    _require(_has_keys(origin, _ORIGIN_KEYS), "origin fields")
    assert isinstance(origin, dict)
    nltk_data, search_path, probe = origin["nltk_data"], origin["search_path"], origin["probe"]
    _require(nltk_data is None or _is_str(nltk_data), "nltk_data type")
    _require(_is_list_of(search_path, _is_str), "search_path type")
    _require(origin["punkt_tab"] is None or _is_str(origin["punkt_tab"]), "punkt_tab type")
    _require(_is_list_of(probe, lambda r: isinstance(r, list) and len(r) == 4 and _is_str(r[0])
                         and all(map(_is_int, r[1:]))), "probe type")
    _require(nltk_data == os.environ.get("NLTK_DATA"), "NLTK_DATA changed")
    _require(search_path == _nltk_search_path(), "nltk's search path changed")
    loaded = sys.modules.get("nltk.data")
    _require(loaded is None or getattr(loaded, "path", None) == search_path, "nltk.data.path changed")
    _require(probe == _probe(search_path), "punkt_tab changed")


def _engine(compiled: Any) -> str:
    if isinstance(compiled, re.Pattern):
        return "re"
    regex = sys.modules.get("regex")
    if regex is not None and isinstance(compiled, regex.Pattern):
        return "regex"
    raise _SpecError(f"{type(compiled).__name__} is not a pattern of re or regex")


def _compile(engine: str, source: str, flags: int) -> Any:
    if engine == "re":
        return re.compile(source, flags)
    import regex

    return regex.compile(source, flags)


def _encode_pattern(compiled: Any) -> dict[str, Any]:
    return {"engine": _engine(compiled), "source": compiled.pattern, "flags": compiled.flags}


def _decode_pattern(value: object, regex_version: str | None) -> Any:
    """The pattern compiled again with its engine, source and flags (its ``flags`` attribute,
    inline flags and the engine's defaults included, must come out the same)."""
    _require(_has_keys(value, _PATTERN_KEYS), "pattern fields")
    assert isinstance(value, dict)
    engine, source, flags = value["engine"], value["source"], value["flags"]
    _require(_is_str(engine) and engine in _ENGINES and _is_str(source) and _is_int(flags), "pattern types")
    _require(engine == "re" or regex_version is not None, "regex pattern without a regex version")
    compiled = _compile(engine, source, flags)
    _require(compiled.pattern == source and compiled.flags == flags, "pattern flags")
    return compiled


def _decode_step(value: object, regex_version: str | None) -> tuple[Any, str]:
    _require(isinstance(value, list) and len(value) == 2 and _is_str(value[1]), "step type")
    assert isinstance(value, list)
    return _decode_pattern(value[0], regex_version), value[1]


def _encode_parts(parts: _Parts) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    for name in _STEP_LISTS:
        encoded[name] = [[_encode_pattern(p), r] for p, r in getattr(parts, name)]
    for name in _STEPS:
        pattern, replacement = getattr(parts, name)
        encoded[name] = [_encode_pattern(pattern), replacement]
    for name in _PATTERN_LISTS:
        encoded[name] = [_encode_pattern(p) for p in getattr(parts, name)]
    for name in _PATTERNS:
        encoded[name] = _encode_pattern(getattr(parts, name))
    encoded["abbrev_types"] = sorted(parts.abbrev_types)
    encoded["collocations"] = parts.collocations
    return encoded


def _decode_parts(value: object, regex_version: str | None) -> _Parts:
    _require(_has_keys(value, _PART_KEYS), "parts fields")
    assert isinstance(value, dict)
    fields: dict[str, Any] = {}
    for name in _STEP_LISTS:
        _require(isinstance(value[name], list), f"{name} type")
        fields[name] = [_decode_step(step, regex_version) for step in value[name]]
    for name in _STEPS:
        fields[name] = _decode_step(value[name], regex_version)
    for name in _PATTERN_LISTS:
        _require(isinstance(value[name], list), f"{name} type")
        fields[name] = [_decode_pattern(pattern, regex_version) for pattern in value[name]]
    for name in _PATTERNS:
        fields[name] = _decode_pattern(value[name], regex_version)
    _require({"after_tok", "next_tok"} <= set(fields["period_context"].groupindex), "period_context groups")
    _require(_is_list_of(value["abbrev_types"], _is_str), "abbrev_types type")
    _require(type(value["collocations"]) is bool, "collocations type")
    fields["abbrev_types"] = frozenset(value["abbrev_types"])
    fields["collocations"] = value["collocations"]
    return _Parts(**fields)


def _digest(body: Mapping[str, Any]) -> str:
    """SHA-256 of the spec's canonical JSON: a file changed by hand or cut short is not used."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _decode_spec(text: str, nltk_version: str) -> _Parts:
    """The parts in a spec's text, if every check passes (else :class:`_SpecError`)."""
    spec = json.loads(text)
    _require(_has_keys(spec, _SPEC_KEYS), "spec fields")
    body = {key: value for key, value in spec.items() if key != "digest"}
    _require(_is_str(spec["digest"]) and spec["digest"] == _digest(body), "digest mismatch")
    _require(_is_int(spec["format"]) and spec["format"] == _SPEC_FORMAT, "spec format")
    _require(_is_str(spec["nltk"]) and spec["nltk"] == nltk_version, "nltk version")
    regex_version = spec["regex"]
    _require(regex_version is None or _is_str(regex_version), "regex version type")
    if regex_version is not None:
        import regex

        _require(regex_version == getattr(regex, "__version__", None), "regex version")
    _check_origin(spec["origin"])
    return _decode_parts(spec["parts"], regex_version)


def _encode_spec(parts: _Parts, origin: dict[str, Any], nltk_version: str) -> str:
    """A spec's text for ``parts`` built from nltk in this process (checked to decode to the
    same patterns)."""
    import nltk

    _require(getattr(nltk, "__version__", None) == nltk_version, "imported nltk is not the installed one")
    if origin["punkt_tab"] is None:  # else parameters other than punkt_parameters' own
        _require(parts.abbrev_types == _ABBREVIATIONS and not parts.collocations, "unknown parameters")
    uses_regex = any(_engine(p) == "regex" for p in _patterns_of(parts))
    regex_version = getattr(sys.modules["regex"], "__version__", None) if uses_regex else None
    _require(not uses_regex or _is_str(regex_version), "regex version unknown")
    encoded = _encode_parts(parts)
    _require(_encode_parts(_decode_parts(encoded, regex_version)) == encoded, "patterns do not round-trip")
    body = {"format": _SPEC_FORMAT, "nltk": nltk_version, "regex": regex_version, "origin": origin,
            "parts": encoded}
    return json.dumps({**body, "digest": _digest(body)}, indent=1, sort_keys=True, ensure_ascii=True)


def _read_spec(path: str, nltk_version: str) -> _Parts | None:
    """The parts of a valid spec at ``path``; None for no file or one not to use."""
    try:
        with open(path, "rb") as file:
            data = file.read(_SPEC_MAX_BYTES + 1)
        _require(len(data) <= _SPEC_MAX_BYTES, "file too large")
        return _decode_spec(data.decode("utf-8"), nltk_version)
    except FileNotFoundError:
        return None
    except Exception as exc:  # whatever is wrong with the file: build from nltk and rewrite it
        log.debug("english tokenizer: spec cache %s not used (%s: %s)", path, type(exc).__name__, exc)
        return None


def _write_spec(path: str, parts: _Parts, origin: dict[str, Any], nltk_version: str) -> None:
    """Write the spec atomically (a temporary file in the same directory, then renamed)."""
    import tempfile

    try:
        text = _encode_spec(parts, origin, nltk_version)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".english-spec-", suffix=".tmp", dir=directory)
        try:
            with open(handle, "w", encoding="ascii") as file:
                file.write(text)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except Exception as exc:  # no cache: this run built from nltk and so will the next
        log.debug("english tokenizer: spec cache %s not written (%s: %s)", path, type(exc).__name__, exc)


def _load_tokenizer() -> EnglishTokenizer:
    """The tokenizer from its spec when a valid one is cached, else built from nltk, whose
    spec is then written for the next runs."""
    location = _spec_location()
    if location is not None:
        parts = _read_spec(*location)
        if parts is not None:
            return EnglishTokenizer(parts)
    origin = _origin() if location is not None else None
    tokenizer = EnglishTokenizer()
    if location is not None and origin is not None:
        _write_spec(location[0], tokenizer._parts, origin, location[1])
    return tokenizer


# ---------------------------------------------------------------- the tokenizer

class EnglishTokenizer:
    """NLTK's ``word_tokenize`` without downloaded data: Punkt with our parameters, then the
    ``NLTKWordTokenizer`` steps run in NLTK's order, skipping steps that cannot match.

    Built from nltk (imported now), or from the parts of a cached spec: then NLTK's Punkt is
    built when a context first needs it (:meth:`nltk_punkt`)."""

    def __init__(self, parts: _Parts | None = None) -> None:
        self._punkt: Any = None
        if parts is None:
            self._punkt = _punkt()
            parts = _parts_from_nltk(self._punkt)
        self._parts = parts
        self.from_spec = self._punkt is None  # built from a cached spec, without nltk
        self._candidates = parts.period_context.finditer
        self._realign = parts.boundary_realignment.match
        self._abbreviations = parts.abbrev_types
        self._word_period = None if parts.collocations else _WORD_PERIOD
        self._nltk_break = functools.lru_cache(maxsize=_CACHE_SIZE)(self._punkt_break)
        head = (*parts.starting_quotes, *parts.punctuation, parts.parens_brackets, parts.double_dashes)
        self._head = [_step(p, r) for p, r in head]
        self._tail = [_step(p, r) for p, r in parts.ending_quotes]
        contractions = (*parts.contractions2, *parts.contractions3)
        self._contractions = [(_contraction_literal(p), functools.partial(p.sub, r" \1 \2 "))
                              for p in contractions]
        literals = [literal for literal, _ in self._contractions]
        self._contraction_guard = (None if None in literals else  # for non-ASCII text
                                   re.compile("(?i)" + "|".join(map(re.escape, literals))).search)
        gates = [step[0] for step in (*self._head, *self._tail) if step[0] is not None]
        self._gating = re.compile(f"[{re.escape(''.join(sorted(frozenset().union(*gates))))}]").findall
        self._plans: dict[frozenset[str], list[list[Planned]]] = {}  # by the gating characters found

    @property
    def needs_nltk_often(self) -> bool:
        """Whether many texts need NLTK's Punkt: with collocations in the parameters (NLTK's
        trained punkt_tab installed) "word. Next" contexts are not decided here."""
        return self._word_period is None

    def nltk_punkt(self) -> Any:
        """NLTK's ``PunktSentenceTokenizer``, for the contexts the shortcuts do not decide:
        built (importing nltk) by the first call, once whatever the threads."""
        punkt = self._punkt
        if punkt is None:
            with _NLTK_LOCK:
                punkt = self._punkt
                if punkt is None:
                    punkt = _punkt()
                    self._agree(punkt._params)
                    self._punkt = punkt
        return punkt

    def _agree(self, params: Any) -> None:
        """Take NLTK's parameters if they differ from the spec's (punkt_tab installed or removed
        since the spec was checked): the shortcuts and NLTK's Punkt must use the same."""
        abbreviations, collocations = frozenset(params.abbrev_types), bool(params.collocations)
        if abbreviations != self._abbreviations or collocations != self.needs_nltk_often:
            log.debug("english tokenizer: Punkt parameters changed since the spec cache was read")
            self._abbreviations = abbreviations
            self._word_period = None if collocations else _WORD_PERIOD

    def _punkt_break(self, context: str) -> bool:
        return bool(self.nltk_punkt().text_contains_sentbreak(context))

    def _contains_break(self, context: str) -> bool:
        """Punkt's ``text_contains_sentbreak(context)``."""
        if _MARK_BREAK(context) is not None:
            return True
        if self._word_period is not None:
            found = self._word_period(context)
            if found is not None and found.group(1).lower() not in self._abbreviations:
                return True
        return bool(self._nltk_break(context))

    def _contexts(self, text: str) -> list[tuple[Any, str]]:
        """Punkt's ``_match_potential_end_contexts``: each candidate end and its context."""
        found, previous, start, stop = [], None, 0, 0
        for match in self._candidates(text):
            # the word before: after the last whitespace NLTK finds (at index 0 it finds none)
            index = max(map(text[stop:match.start()].rfind, string.whitespace))
            index = index + stop + 1 if index > 0 else start
            if previous is not None and stop <= index:
                found.append((previous, start, stop))
            previous, start, stop = match, index, match.start()
        if previous is not None:
            found.append((previous, start, stop))
        return [(m, text[a:b] + m.group() + m.group("after_tok")) for m, a, b in found]

    def sentences(self, text: str) -> list[str]:
        """Punkt's ``tokenize(text)``: its ``_slices_from_text`` and ``_realign_boundaries``;
        a text with no sentence-end mark before its end is one sentence."""
        end = len(text.rstrip())
        if not end:
            return []
        if _SENT_END.search(text, 0, end - 1) is None:
            return [text[:end]]
        spans, start = [], 0
        for match, context in self._contexts(text):
            if self._contains_break(context):
                spans.append((start, match.end()))
                start = match.start("next_tok") if match.group("next_tok") else match.end()
        spans.append((start, end))
        sentences, shift = [], 0
        for (start, stop), following in zip(spans, [*spans[1:], None], strict=True):
            start += shift
            if following is not None and (found := self._realign(text[following[0]:following[1]])):
                sentences.append(text[start:following[0] + len(found.group(0).rstrip())])
                shift = found.end()
            else:
                shift = 0
                if text[start:stop]:
                    sentences.append(text[start:stop])
        return sentences

    def words(self, sentence: str) -> list[str]:
        """``NLTKWordTokenizer().tokenize(sentence)``: a final ``.?!`` after a letter or digit
        is split off, then the steps its gating characters allow run in order."""
        mark = ""
        if len(sentence) > 1 and sentence[-1] in ".?!" and sentence[-2] in _ALNUM:
            sentence, mark = sentence[:-1], sentence[-1]
        found = frozenset(self._gating(sentence))
        plans = self._plans.get(found)
        if plans is None:
            if len(self._plans) >= _CACHE_SIZE:
                self._plans.clear()
            plans = self._plans[found] = _plan((self._head, self._tail), found)
        tokens = self._contract(_run(plans[1], f" {_run(plans[0], sentence)} ")).split()
        if mark:
            tokens.append(mark)
        return tokens

    def _contract(self, text: str) -> str:
        """The contraction steps; each runs only if its literal is in the text."""
        if text.isascii():  # case-insensitive is ASCII case-insensitive: compare lower case
            lower = text.lower()
            for literal, substitute in self._contractions:
                if literal is None or literal in lower:
                    text = substitute(text)
        elif self._contraction_guard is None or self._contraction_guard(text):
            for _, substitute in self._contractions:
                text = substitute(text)
        return text

    def tokenize(self, text: str) -> list[str]:
        sentences = self.sentences(text)
        if len(sentences) == 1:
            return self.words(sentences[0])
        return [word for sentence in sentences for word in self.words(sentence)]


_BUILD_LOCK = threading.Lock()
_NLTK_LOCK = threading.Lock()  # NLTK's Punkt for a tokenizer built from a spec


@functools.cache
def english() -> EnglishTokenizer:
    with _BUILD_LOCK:  # built once even when a warm-up thread and a scorer race for it
        return _english_once()


@functools.cache
def _english_once() -> EnglishTokenizer:
    return _load_tokenizer()


def needs_nltk_often() -> bool:
    """Whether the English tokenizer will import nltk early in a run (NLTK's trained
    ``punkt_tab`` is installed): a runner may then import it in a background thread."""
    return english().needs_nltk_often


def warm_up(nltk: bool | None = None) -> None:
    """Build the English tokenizer now: a few ms from the spec cache, else importing nltk
    (~0.3 s of CPU). With ``nltk`` (by default: when :func:`needs_nltk_often`), NLTK's Punkt
    too. The runner does this in a background thread while the first requests are in flight."""
    tokenizer = english()
    if tokenizer.needs_nltk_often if nltk is None else nltk:
        tokenizer.nltk_punkt()
