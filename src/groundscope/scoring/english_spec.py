"""The English tokenizer's spec cache: what ``english.py`` takes from NLTK, kept as JSON.

All the tokenizer takes from nltk is data: the word steps' patterns and replacements,
Punkt's candidate and realignment patterns, the abbreviations and whether the parameters
have collocations (:class:`Parts`). Importing nltk for it costs ~0.3 s of CPU, so the first
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
at most, and rewrites the file atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

log = logging.getLogger("groundscope")

def bare(pattern: Any) -> Any:
    """The compiled pattern inside NLTK's timeout wrapper (same engine, much faster)."""
    return getattr(pattern, "_rx", pattern)


_PUNKT_TAB = "tokenizers/punkt_tab/english/"


def find_punkt_tab() -> Any | None:
    """nltk's pointer to the English ``punkt_tab`` model, or None when it finds none."""
    import nltk

    try:
        return nltk.data.find(_PUNKT_TAB)
    except (LookupError, OSError, ValueError):
        return None


# ---------------------------------------------------------------- what the tokenizer takes from nltk

class Parts(NamedTuple):
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


def parts_from_nltk(punkt: Any) -> Parts:
    """The parts of NLTK's word tokenizer and of ``punkt`` (see ``english._punkt``)."""
    from nltk.tokenize.destructive import NLTKWordTokenizer as Word

    def steps(pairs: Sequence[tuple[Any, str]]) -> list[tuple[Any, str]]:
        return [(bare(pattern), replacement) for pattern, replacement in pairs]

    lang_vars, params = punkt._lang_vars, punkt._params
    parens, dashes = steps([Word.PARENS_BRACKETS, Word.DOUBLE_DASHES])
    return Parts(
        starting_quotes=steps(Word.STARTING_QUOTES), punctuation=steps(Word.PUNCTUATION),
        parens_brackets=parens, double_dashes=dashes, ending_quotes=steps(Word.ENDING_QUOTES),
        contractions2=[bare(p) for p in Word.CONTRACTIONS2],
        contractions3=[bare(p) for p in Word.CONTRACTIONS3],
        period_context=lang_vars.period_context_re(),
        boundary_realignment=lang_vars.re_boundary_realignment,
        abbrev_types=frozenset(params.abbrev_types), collocations=bool(params.collocations),
    )


def _patterns_of(parts: Parts) -> list[Any]:
    return [*(p for name in _STEP_LISTS for p, _ in getattr(parts, name)),
            *(getattr(parts, name)[0] for name in _STEPS),
            *(p for name in _PATTERN_LISTS for p in getattr(parts, name)),
            *(getattr(parts, name) for name in _PATTERNS)]


# ---------------------------------------------------------------- the spec cache

_SPEC_FORMAT = 1
_SPEC_MAX_BYTES = 1 << 20
_SPEC_KEYS = ("format", "nltk", "regex", "origin", "parts", "digest")
_ORIGIN_KEYS = ("nltk_data", "search_path", "punkt_tab", "probe")
_PART_KEYS = Parts._fields
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


def spec_location() -> tuple[str, str] | None:
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


def origin() -> dict[str, Any] | None:
    """How ``punkt_parameters`` is decided in this process, as a spec records it; None when it
    could not be checked again without nltk (``nltk.data.path`` is not the one nltk derives
    from the environment: changed at run time, or laid out unlike :func:`_nltk_search_path`)."""
    import nltk

    search_path = nltk.data.path
    if search_path != _nltk_search_path():
        log.debug("english tokenizer: nltk.data.path is not nltk's default, spec cache not written")
        return None
    probe = _probe(search_path)  # first: whatever changes after this shows in the next probe
    found = find_punkt_tab()
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


def _encode_parts(parts: Parts) -> dict[str, Any]:
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


def _decode_parts(value: object, regex_version: str | None) -> Parts:
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
    return Parts(**fields)


def _digest(body: Mapping[str, Any]) -> str:
    """SHA-256 of the spec's canonical JSON: a file changed by hand or cut short is not used."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def _decode_spec(text: str, nltk_version: str) -> Parts:
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


def _encode_spec(parts: Parts, origin: dict[str, Any], nltk_version: str,
                 own_abbreviations: frozenset[str]) -> str:
    """A spec's text for ``parts`` built from nltk in this process (checked to decode to the
    same patterns)."""
    import nltk

    _require(getattr(nltk, "__version__", None) == nltk_version, "imported nltk is not the installed one")
    if origin["punkt_tab"] is None:  # else parameters other than punkt_parameters' own
        _require(parts.abbrev_types == own_abbreviations and not parts.collocations,
                 "unknown parameters")
    uses_regex = any(_engine(p) == "regex" for p in _patterns_of(parts))
    regex_version = getattr(sys.modules["regex"], "__version__", None) if uses_regex else None
    _require(not uses_regex or _is_str(regex_version), "regex version unknown")
    encoded = _encode_parts(parts)
    _require(_encode_parts(_decode_parts(encoded, regex_version)) == encoded, "patterns do not round-trip")
    body = {"format": _SPEC_FORMAT, "nltk": nltk_version, "regex": regex_version, "origin": origin,
            "parts": encoded}
    return json.dumps({**body, "digest": _digest(body)}, indent=1, sort_keys=True, ensure_ascii=True)


def read_spec(path: str, nltk_version: str) -> Parts | None:
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


def write_spec(path: str, parts: Parts, origin: dict[str, Any], nltk_version: str,
               own_abbreviations: frozenset[str]) -> None:
    """Write the spec atomically (a temporary file in the same directory, then renamed)."""
    import tempfile

    try:
        text = _encode_spec(parts, origin, nltk_version, own_abbreviations)
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
