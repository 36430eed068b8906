"""The one place where EvalScope's spellings are translated into groundscope's.

Metric names in ``metric_list`` (``BLEU``, ``Rouge``, ``acc``), score keys in EvalScope's
review files (``bleu-1``, ``Rouge-L-R``) and report files (``mean_Rouge-L-R``), eval types
(``service`` is the old name of ``openai_api``), task-config keys that EvalScope accepts
but that mean nothing for a remote multimodal evaluation, and groundscope's own renamed keys
(:func:`renamed_key`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("groundscope")

# metric_list spelling (lower-cased) -> canonical scorer name
METRIC_NAMES: dict[str, str] = {
    "bleu": "bleu",
    "rouge": "rouge",
    "acc": "accuracy",
    "accuracy": "accuracy",
    "exact_match": "exact_match",
    "em": "exact_match",
    "grounding": "grounding",
    "completeness": "completeness",
    "consistency": "consistency",
}

# EvalScope score key -> canonical metric key
SCORE_KEYS: dict[str, str] = {
    **{f"bleu-{n}": f"bleu-{n}" for n in range(1, 5)},
    **{
        f"Rouge-{v}-{s}": f"rouge-{v.lower()}-{s.lower()}"
        for v in ("1", "2", "L")
        for s in ("R", "P", "F")
    },
    "acc": "accuracy",
}

# canonical metric key -> EvalScope's score key, where the two spellings differ
_EVALSCOPE_SCORE_KEYS = {ours: theirs for theirs, ours in SCORE_KEYS.items() if ours != theirs}

# EvalScope's ``eval_type`` spellings -> ours (``TaskConfig`` and ``JudgeModel`` read them)
EVAL_TYPES = {"openai_api": "openai_api", "service": "openai_api", "server": "openai_api",
              "anthropic_api": "anthropic_api", "openai_responses_api": "openai_responses_api",
              "mock": "mock", "simulator": "mock"}

# TaskConfig keys EvalScope has that do not apply here: accepted with a warning.
_IGNORED_TASK_KEYS = {"eval_backend", "dataset_hub", "model_task", "chat_template",
                      "collect_perf", "enable_progress_tracker", "rerun_review"}


# TaskConfig keys of EvalScope's other backends that have no counterpart: what to do instead
# (one line, with an example).
UNSUPPORTED_TASK_KEYS = {
    "eval_config": (
        "is VLMEvalKit's (eval_backend VLMEvalKit) and not used: its TSV layouts are the "
        "datasets legacy_mcq (multiple choice) and legacy_vqa, e.g. datasets: [legacy_mcq], "
        "dataset_args: {legacy_mcq: {local_path: data/my_mcq.tsv}}"
    ),
}


def metric_name(name: str) -> str | None:
    """The canonical scorer name for a ``metric_list`` entry, or None if unknown."""
    return METRIC_NAMES.get(name.strip().lower())


def default_model_id(model: str) -> str:
    """EvalScope's default ``model_id``: the model name's last path part.

    >>> default_model_id("Qwen/Qwen2.5-VL-7B-Instruct"), default_model_id("qwen-vl-plus")
    ('Qwen2.5-VL-7B-Instruct', 'qwen-vl-plus')
    """
    return model.rstrip("/").rpartition("/")[2] or model


def report_metric_name(key: str) -> str:
    """EvalScope's metric name in a report file for a canonical metric key: its v1 spelling
    ``<aggregation>_<score key>`` (``evalscope/report/generator.py``), the aggregation being
    the mean. groundscope's own metrics keep their key.

    >>> [report_metric_name(k) for k in ("rouge-l-r", "bleu-1", "accuracy", "grounding")]
    ['mean_Rouge-L-R', 'mean_bleu-1', 'mean_acc', 'mean_grounding']
    """
    return f"mean_{_EVALSCOPE_SCORE_KEYS.get(key, key)}"


noted_renames: set[str] = set()  # the renamed keys already noted in this process (one note each)


def renamed_key(data: Any, old: str, new: str, where: str) -> Any:
    """``data`` (a config block, as given) with its key ``old`` read as ``new``, and a
    one-line deprecation note, once per process. Both given: left as is, so the block's
    unknown-key error names ``old``.

    >>> renamed_key({"max_retries": 1}, "max_retries", "max_repairs", "judge")
    {'max_repairs': 1}
    """
    if not isinstance(data, Mapping) or old not in data or new in data:
        return data
    if where not in noted_renames:
        noted_renames.add(where)
        log.warning("%s.%s is deprecated: it is now %s.%s (the same value)", where, old, where, new)
    return {(new if k == old else k): v for k, v in data.items()}


def translate_task_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite an EvalScope-style task config dict into groundscope's field names."""
    out = dict(data)
    for key in sorted(_IGNORED_TASK_KEYS & out.keys()):
        log.warning("config key %r is EvalScope-specific and ignored by groundscope", key)
        out.pop(key)
    if "max_concurrency" in out:
        out["eval_batch_size"] = out.pop("max_concurrency")
    _translate_legacy_judge(out)
    gen = out.get("generation_config")
    if isinstance(gen, Mapping):
        gen = dict(gen)
        # EvalScope keeps client settings in generation_config; they are not request fields.
        if "timeout" in gen:
            out.setdefault("timeout", gen.pop("timeout"))
        for client_key in ("stream", "batch_size", "max_retries", "retries"):
            gen.pop(client_key, None)
        out["generation_config"] = gen
    args = out.get("dataset_args")
    if isinstance(args, Mapping):
        out["dataset_args"] = {k: _translate_dataset_args(v) for k, v in args.items()}
    return out


# EvalScope's judge prompt settings (its ``judge.contract``): our verdict contract is fixed.
_JUDGE_PROMPT_KEYS = ("system_prompt", "prompt_template", "score_mapping", "score_type",
                      "score_pattern")


def _translate_legacy_judge(out: dict[str, Any]) -> None:
    """EvalScope's deprecated ``judge_strategy`` + ``judge_model_args`` -> ``judge``."""
    if "judge_strategy" not in out and "judge_model_args" not in out:
        return
    if "judge" in out:
        return  # both given: leave the legacy keys for the unknown-key error
    strategy = out.pop("judge_strategy", "auto")
    model = out.pop("judge_model_args", None)
    if isinstance(model, Mapping):
        model = dict(model)
        for key in _JUDGE_PROMPT_KEYS:
            if model.pop(key, None) is not None:
                log.warning("judge_model_args.%s is ignored: groundscope's judge uses its own "
                            "verdict contract (see the README)", key)
    out["judge"] = {"strategy": strategy, "models": [model] if model else []}


def _translate_dataset_args(args: Any) -> Any:
    if not isinstance(args, Mapping):
        return args
    out = dict(args)
    # EvalScope lets ``dataset_id`` name a local directory; we call it local_path.
    if "dataset_id" in out and "local_path" not in out:
        out["local_path"] = out.pop("dataset_id")
    return out
