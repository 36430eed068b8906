"""The command line's grammar: the parser of ``groundscope eval | score | report | merge |
simulate`` (one-line errors, every JSON flag bounded like a config file) and the config dict
of ``eval`` built from a namespace (config file first, flags over it). ``cli.py`` runs the
commands.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

_S = argparse.SUPPRESS
_MAX_FLAG_CHARS = 1 << 20  # bounds.MAX_CONFIG_BYTES: a JSON flag is bounded like a config file


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``groundscope: error: argument --x: ...``, exit 2)
    instead of a usage block; sub-commands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"groundscope: error: {' '.join(message.split())}\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse, but a mistyped flag of this (sub-)command is an error with a
        did-you-mean among its flags (a sub-command's parser sees its own flags here)."""
        ns, extras = super().parse_known_args(args, namespace)
        if extras:  # (a sub-command's parser fails first, on its own flags)
            hints = [_did_you_mean(tok, self._option_string_actions)
                     for tok in extras if tok.startswith("-")]
            hint = next((h for h in hints if h), "")
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return ns, extras


def _did_you_mean(token: str, options: Sequence[str] | dict[str, Any]) -> str:
    """`` (did you mean --model?)`` for ``--modle`` (``--modle=x`` too); empty if none is close."""
    flag = token.split("=", 1)[0]
    close = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1,
                                      cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _bounded(text: str) -> str:
    if len(text) > _MAX_FLAG_CHARS:
        raise argparse.ArgumentTypeError(f"over {_MAX_FLAG_CHARS} characters (1 MiB); refused")
    return text.strip()


def parse_kv_or_json(text: str) -> dict[str, Any]:
    """``--generation-config`` value: a JSON object, or ``k=v,k2=v2`` (values as literals).

    >>> parse_kv_or_json('temperature=0.2,max_tokens=64,do_sample=true,stop=END')
    {'temperature': 0.2, 'max_tokens': 64, 'do_sample': True, 'stop': 'END'}
    """
    text = _bounded(text)
    if text.startswith("{"):
        return _json_object(text)
    out: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise argparse.ArgumentTypeError(f"expected key=value or a JSON object, got {pair!r}")
        key, raw = (s.strip() for s in pair.split("=", 1))
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            out[key] = {"true": True, "false": False}.get(raw.lower(), raw)
    return out


def _json_object(text: str) -> dict[str, Any]:
    """A JSON-object flag, parsed within the config bounds (size, values, depth)."""
    from groundscope.configfile import parse_json_text
    from groundscope.errors import ConfigError

    try:
        value = parse_json_text(_bounded(text), "value")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _seed(text: str) -> int:
    """``report --seed`` (no TaskConfig validates it): numpy's range, as ``TaskConfig.seed``."""
    from groundscope.bounds import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got {text[:40]}")
    return value


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--config", metavar="FILE", help="YAML/JSON task config; flags given here override it")
    a("--model", default=_S, help="model name sent in each request")
    a("--model-id", default=_S, help="model name shown in reports (default: --model)")
    a("--api-url", default=_S, help="the API's base URL, e.g. http://host:8000/v1")
    a("--api-key", default=_S, help="API key, or $ENV_VAR to read it from the environment")
    a("--eval-type", default=_S,
      help="openai_api (chat completions), anthropic_api (Messages), openai_responses_api "
           "(Responses), mock (the built-in offline model) or answers (grade the records' "
           "'prediction' answers; no endpoint)")
    a("--answers", metavar="FILE", default=_S,
      help="grade the answers in FILE, joined by sample id (groundscope JSONL or run directory, "
           "VLMEvalKit .xlsx/.tsv/.csv, lmms-eval samples_*.jsonl); implies --eval-type answers")
    a("--datasets", nargs="+", default=_S, help="dataset names, e.g. general_vqa general_vmcq")
    a("--dataset-args", type=_json_object, default=_S, help="JSON: per-dataset arguments")
    a("--limit", default=_S,  # a string: TaskConfig's validator is the one rule (bounds.py)
      help="first N records per subset, or a fraction in (0,1)")
    a("--eval-batch-size", "--max-concurrency", dest="eval_batch_size", type=int, default=_S,
      help="requests in flight at once (default 8)")
    a("--rpm", type=int, default=_S, help="the model endpoint's limit of requests a minute")
    a("--tpm", type=int, default=_S,
      help="the model endpoint's limit of tokens a minute (estimated before sending)")
    a("--generation-config", type=parse_kv_or_json, default=_S,
      help="JSON or k=v,... passed into each request (temperature defaults to 0)")
    a("--judge", type=_json_object, default=_S, help="JSON judge config (see README)")
    a("--judge-strategy", default=_S, help="EvalScope's older spelling of judge.strategy")
    a("--judge-model-args", type=_json_object, default=_S,
      help="EvalScope's older spelling of one judge model (JSON)")
    a("--eval-config", default=_S, help=_S)  # EvalScope's (VLMEvalKit): refused, saying what instead
    a("--stream", action="store_true", default=_S,
      help="accepted for EvalScope compatibility; requests are never streamed")
    a("--dry-run", action="store_true", help="print the resolved config (secrets hidden) and "
      "an estimate of the run's requests, tokens and cost; send nothing, write nothing")
    a("--json", action="store_true", help="with --dry-run: the config and the estimate as one "
      "JSON object")
    a("--work-dir", default=_S, help="where run directories are created (default ./outputs)")
    a("--no-timestamp", action="store_true", default=_S, help="write into --work-dir itself")
    a("--use-cache", metavar="RUN_DIR", default=_S, help="resume a run directory")
    a("--shard", metavar="K/N", default=_S, help="ask only part K of N of the records (K from 1; "
      "join the parts with groundscope merge)")
    a("--repeats", type=int, default=_S, help="ask each sample this many times")
    a("--seed", type=int, default=_S, help="seed for shuffling and the bootstrap (default 42)")
    a("--ignore-errors", action="store_true", default=_S,
      help="record failed samples and go on (default: stop at the first failure)")
    a("--max-error-rate", type=float, default=_S, help="stop when this share of samples failed")
    a("--strict", action="store_true", default=_S, help="a bad record is fatal (default: skip it)")
    a("--debug", action="store_true", default=_S, help="debug logging")
    a("--timeout", type=float, default=_S, help="per-request timeout in seconds (default 300)")
    a("--max-retries", type=int, default=_S, help="retries on 429/5xx/timeouts (default 5)")
    a("--retry-base-delay", type=float, default=_S,
      help="seconds before the first retry, doubled each time, jittered (default 0.5)")
    a("--retry-max-delay", type=float, default=_S,
      help="cap on one retry delay, Retry-After included (default 30)")
    a("--rate-limit-budget", type=float, default=_S, metavar="SECONDS",
      help="retry a rate-limited (429) request for up to this long, past --max-retries "
           "(default 300; 0: count retries only)")
    a("--max-image-pixels", type=int, default=_S,
      help="larger images are refused: a decompression-bomb guard (default: Pillow's, ~89.5M)")
    a("--video-frames", type=int, default=_S, metavar="N",
      help="send each video as N frames (images, in order; needs groundscope[video]); "
           "default 0: the video itself")
    a("--max-image-side", type=int, default=_S, metavar="PX",
      help="downscale larger images to this longest side before sending (format kept)")
    a("--audio-transcode", action=argparse.BooleanOptionalAction, default=_S,
      help="convert flac / ogg / m4a audio to wav before sending (default: on for openai_api, "
           "whose chat API takes only wav and mp3)")
    a("--media-root", dest="media_roots", metavar="DIR", action="append", default=_S,
      help="also read local media under DIR (repeatable; by default only the dataset's folder "
           "and the working directory)")
    a("--max-media-per-record", type=int, default=_S,
      help="a record with more media is a bad record, before any is read (default 64)")
    a("--max-record-bytes", type=int, default=_S,
      help="a dataset line / row longer than this is a bad record (default 64 MiB)")
    a("--judge-concurrency", type=int, default=_S, help="judge requests in flight at once")
    a("--max-response-bytes", type=int, default=_S,
      help="a reply (model or judge) whose decoded body is larger fails as response_too_large "
           "(default 4194304, 4 MiB)")
    a("--sim-accuracy", type=float, default=_S, help="mock: share of correct answers (0.8)")
    a("--sim-latency-ms", type=float, default=_S, help="mock: latency per request (0)")
    a("--sim-judge-noise", type=float, default=_S,
      help="mock: share of flipped verdicts of 'mock' judge models (0)")
    a("--sim-api", default=_S,
      help="mock: the API the run speaks to the simulator (openai_api, anthropic_api, "
           "openai_responses_api; default openai_api)")
    a("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    a("--executor", default=_S, help="local (default) or ray: samples run on Ray actors "
      "(pip install -e '.[ray]' in the clone; docs/scale-out.md)")
    a("--ray-address", default=_S, help="ray: the cluster to join (default: start a local Ray)")
    a("--workers", type=int, default=_S, help="ray: worker actors (default: one per cluster CPU)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="groundscope",
        description="Evaluate multimodal models served over OpenAI-compatible chat APIs.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_eval_flags(sub.add_parser("eval", help="run an evaluation"))
    score = sub.add_parser("score", help="re-score a run directory's saved predictions")
    score.add_argument("run_dir")
    score.add_argument("--judge", type=_json_object, default=None,
                       help="JSON judge config (its api_key is not saved in the run)")
    score.add_argument("--judge-key-env", dest="judge_key_env", metavar="NAME", action="append",
                       default=[], help="expand the saved judge key reference $NAME from this "
                       "environment (repeatable; a run directory's config is untrusted: no other "
                       "variable is ever read)")
    report = sub.add_parser("report", help="rebuild table, JSON and HTML from a run directory; "
                            "with several, compare them")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    for p in (score, report):
        p.add_argument("--media-root", dest="media_roots", metavar="DIR", action="append",
                       default=[], help="also read media under DIR (repeatable); a run's "
                       "recorded roots count only inside the working directory or the run's "
                       "work directory")
    report.add_argument("--out", metavar="FILE", default="comparison.html",
                        help="with several run directories: the comparison page (./comparison.html)")
    report.add_argument("--seed", type=_seed, default=0,
                        help="seed of the paired permutation test (0..2**32-1)")
    merge = sub.add_parser("merge", help="join the run directories of eval --shard K/N")
    merge.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    merge.add_argument("--work-dir", default="./outputs",
                       help="where the merged run directory is created (default ./outputs)")
    merge.add_argument("--partial", action="store_true",
                       help="merge even with shards missing or unfinished (the report says so)")
    sim = sub.add_parser("simulate", help="serve the offline model simulator on loopback")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--datasets", nargs="+", required=True)
    sim.add_argument("--dataset-args", type=_json_object, default={})
    sim.add_argument("--accuracy", type=float, default=0.8)
    sim.add_argument("--latency-ms", type=float, default=0.0)
    sim.add_argument("--seed", type=_seed, default=0)
    sim.add_argument("--judge-noise", type=float, default=0.0,
                     help="share of flipped verdicts when answering LLM-judge requests")
    sim.add_argument("--truth", metavar="FILE", default=None,
                     help="ground-truth file for the grounding judge steps and planted answers")
    sim.add_argument("--rpm", type=int, default=None, help="answer 429 over this many requests a minute")
    sim.add_argument("--tpm", type=int, default=None, help="answer 429 over this many tokens a minute")
    sim.add_argument("--max-in-flight", type=int, default=None,
                     help="answer 429 to a request while this many are in flight")
    sim.add_argument("--gateway", default="openai",
                     choices=["openai", "litellm", "limit_only", "on_429", "hintless"],
                     help="pass the rate-limit headers on as this gateway does (simulator/gateway.py)")
    sim.add_argument("--models", type=_names, default=(), metavar="A,B",
                     help="serve only these model names (another is a 404; GET /v1/models lists them)")
    for kind in ("429", "500", "timeout", "malformed", "disconnect"):
        sim.add_argument(f"--rate-{kind}", type=float, default=0.0,
                         help=f"share of requests answered with a {kind} fault")
    _add_hostile_flags(sim)
    return parser


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names (``--models a,b``): at most 64, each 1..256 characters."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names or len(names) > 64 or any(len(n) > 256 for n in names):
        raise argparse.ArgumentTypeError("expected 1 to 64 comma-separated names")
    return names


def _add_hostile_flags(sim: argparse.ArgumentParser) -> None:
    """``groundscope simulate``: the untrusted-endpoint behaviours (simulator/faults.py)."""
    a = sim.add_argument
    a("--malformed-body", default="truncated", metavar="KIND",
      help="the broken 200 body a malformed fault sends: a kind of faults.MALFORMED_BODIES "
           "(truncated, not_json, message_string, usage_string, ...) or 'each' (all in turn)")
    a("--reply-bytes", type=int, default=0, help="pad every answer to this many bytes")
    a("--reply-gzip", action="store_true", help="send answers gzip-encoded (with a large "
      "--reply-bytes: a gzip bomb)")
    a("--reply-chunked", action="store_true",
      help="stream answers chunked, without a Content-Length (huge --reply-bytes: endless)")
    a("--declared-length", type=int, default=None,
      help="declare this Content-Length on every answer, send a short body, hang up")
    a("--header-bytes", type=int, default=0, help="add a header this long to every answer")
    a("--redirect-to", metavar="URL", default=None,
      help="answer every chat request with a 307 to URL")
    a("--echo-key", choices=["error", "reply"], default=None,
      help="echo the request's key back in many forms: in a 401 body, or in the answer")


def eval_config(ns: argparse.Namespace) -> dict[str, Any]:
    """The config dict of ``groundscope eval``: config file first, flags over it."""
    data: dict[str, Any] = {}
    if ns.config:
        from groundscope.configfile import read_config_file

        data = read_config_file(ns.config)
    skip = {"command", "config", "no_progress", "version", "sim_accuracy", "sim_latency_ms",
            "dry_run", "json", "stream", "sim_judge_noise", "sim_api", "argv"}
    for key, value in vars(ns).items():
        if key not in skip:
            data[key] = value
    if hasattr(ns, "answers") and not hasattr(ns, "eval_type"):  # --answers overrides the file's
        data["eval_type"] = "answers"
    sim = dict(data.get("simulator") or {})
    if hasattr(ns, "sim_accuracy"):
        sim["accuracy"] = ns.sim_accuracy
    if hasattr(ns, "sim_latency_ms"):
        sim["latency_ms"] = ns.sim_latency_ms
    if hasattr(ns, "sim_judge_noise"):
        sim["judge_noise"] = ns.sim_judge_noise
    if hasattr(ns, "sim_api"):
        sim["api"] = ns.sim_api
    if sim:
        data["simulator"] = sim
    return data


_KEY_REF = re.compile(r"^\$(?:\{\w+\}|\w+)$")
_DROPPED = {"--use-cache": 1, "--dry-run": 0, "--json": 0}  # flag -> values it takes


def resume_command(argv: Sequence[str], run_dir: str, redact: Callable[[str], str]) -> str:
    """The command that resumes an interrupted ``groundscope eval ARGV``: its flags, with
    ``--use-cache RUN_DIR`` for any earlier one; a key given as a value shows as
    ``$API_KEY`` (a ``$NAME`` stays as typed), every other secret through ``redact``.

    >>> resume_command(["eval", "--api-key", "sk-1", "--model", "m x"], "out/r1", str)
    "groundscope eval --api-key '$API_KEY' --model 'm x' --use-cache out/r1"
    """
    out = ["groundscope"]
    args = iter(argv)
    for arg in args:
        flag, eq, value = arg.partition("=")
        if flag in _DROPPED:
            if not eq and _DROPPED[flag]:
                next(args, None)
            continue
        if flag == "--api-key":
            value = value if eq else next(args, "")
            out += ["--api-key", value if _KEY_REF.match(value) else "$API_KEY"]
            continue
        out.append(redact(arg))
    return shlex.join([*out, "--use-cache", run_dir])
