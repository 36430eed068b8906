"""An estimate shown: the tables ``--dry-run`` prints, and its JSON (``--dry-run --json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from groundscope import tokens
from groundscope.estimate.steps import ASSUMED_ANSWER_TOKENS

if TYPE_CHECKING:
    from groundscope.estimate.model import Estimate
    from groundscope.estimate.steps import StepRow

RULES = {
    "chars_per_token": tokens.CHARS_PER_TOKEN, "cjk_char_tokens": 1,
    "message_tokens": tokens.MESSAGE_TOKENS, "reply_tokens": tokens.REPLY_TOKENS,
    "image": "OpenAI tiles: low 85; high/auto 85 + 170 per 512px tile after fitting 2048 "
             "and a 768 short side",
    "unknown_image_tokens": tokens.UNKNOWN_IMAGE_TOKENS,
    "audio_tokens_per_second": tokens.AUDIO_TOKENS_PER_SECOND,
    "video_tokens": tokens.VIDEO_TOKENS, "assumed_answer_tokens": ASSUMED_ANSWER_TOKENS,
}


def _cost(est: Estimate, row: StepRow) -> float | None:
    cost = est.cost(row)
    return None if cost is None else round(cost, 6)


def estimate_json(est: Estimate) -> dict[str, Any]:
    """The estimate as JSON-able data: datasets, steps, totals, media and the rules used."""
    steps = [{"step": r.step, "model": r.model, "model_id": r.model_id,
              "bound": "exact" if r.exact else "upper",
              "requests": r.requests, "requests_with_repairs": r.requests_with_repairs,
              "repairs_per_request": r.repairs, "prompt_tokens": r.prompt_tokens,
              "completion_tokens_max": r.completion_tokens, "completion_cap": r.cap,
              "cost": _cost(est, r), "cost_prompt_only": r.completion_tokens is None}
             for r in est.rows]
    judge = [r for r in est.rows if not r.exact]
    total = est.total_cost()
    totals = {
        "model_requests": sum(d.model_requests for d in est.datasets),
        "judge_requests_max": sum(r.requests for r in judge),
        "judge_requests_with_repairs_max": sum(r.requests_with_repairs for r in judge),
        "prompt_tokens": sum(r.prompt_tokens for r in est.rows),
        "completion_tokens_max": None if any(r.cap is None for r in est.rows)
        else sum(r.completion_tokens or 0 for r in est.rows),
        "cost": None if total is None else round(total, 6),
        "cost_prompt_only": any(r.cap is None and est.cost(r) is not None for r in est.rows),
        "unpriced_models": sorted({r.model_id for r in est.rows if est.cost(r) is None}),
    }
    return {"model": est.model, "datasets": [d.to_json() for d in est.datasets], "steps": steps,
            "totals": totals, "media": est.media.to_json(), "rules": RULES}


def _n(value: int | None, bound: bool = False) -> str:
    if value is None:
        return "no cap"
    return f"≤ {value:,}" if bound else f"{value:,}"


def _money(value: float | None, prompt_only: bool = False) -> str:
    if value is None:
        return "-"
    return f"≥ {value:,.4f}" if prompt_only else f"{value:,.4f}"


def render_estimate(est: Estimate) -> str:
    """Datasets, steps and media as readable tables (bounds marked ≤, costs in the pricing's
    currency per its per-million prices)."""
    data = [[d.dataset, d.records, d.bad_records, d.duplicate_ids, d.samples, d.repeats,
             d.model_requests] for d in est.datasets]
    out = ["Estimate before any request (nothing was sent; tokens are estimates; ≤: an upper "
           "bound)", "",
           tabulate(data, headers=["Dataset", "Records", "Bad", "Duplicate ids", "Samples",
                                   "Repeats", "Model requests"], intfmt=",")]
    rows = [[r.step, r.model, _n(r.requests, not r.exact),
             "-" if r.exact else _n(r.requests_with_repairs, True), f"~{r.prompt_tokens:,}",
             _n(r.completion_tokens, True), _money(est.cost(r), r.completion_tokens is None)]
            for r in est.rows]
    summary = estimate_json(est)["totals"]
    judged = f" + ≤ {summary['judge_requests_max']:,}" if len(est.rows) > 1 else ""
    rows.append(["total", "", f"{summary['model_requests']:,}{judged}",
                 _n(summary["judge_requests_with_repairs_max"], True) if len(est.rows) > 1
                 else "-", f"~{summary['prompt_tokens']:,}",
                 _n(summary["completion_tokens_max"], True),
                 _money(est.total_cost(), summary["cost_prompt_only"])])
    out += ["", tabulate(rows, headers=["Step", "Model", "Requests", "With repairs",
                                        "Prompt tokens", "Completion tokens", "Cost"],
                         disable_numparse=True, colalign=("left", "left", "right", "right",
                                                          "right", "right", "right"))]
    m = est.media
    kinds = [f"{m.images:,} images (~{m.image_tokens:,} tokens"
             + (f"; {m.unknown_images} remote: {tokens.UNKNOWN_IMAGE_TOKENS} each)"
                if m.unknown_images else ")") if m.images else "",
             f"{m.audio:,} audio ({m.audio_seconds:,.1f} s, ~{m.audio_tokens:,} tokens)"
             if m.audio else "",
             f"{m.videos:,} videos (~{m.video_tokens:,} tokens: "
             f"{m.video_tokens // m.videos:,} each)" if m.videos else ""]
    if any(kinds):
        out += ["", "Media in the model's requests: " + ", ".join(k for k in kinds if k)]
    for d in est.datasets:
        skipped = d.bad_records + d.duplicate_ids
        if skipped:
            more = f" (first {len(d.problems)})" if skipped > len(d.problems) else ""
            out += ["", f"{d.dataset}: {skipped:,} records a run would skip{more}:",
                    *(f"  {p}" for p in d.problems)]
    if summary["unpriced_models"]:
        out.append("Not priced (no cost shown): " + ", ".join(summary["unpriced_models"]))
    if any(r.cap is None for r in est.rows):
        out.append("no cap: the requests carry no max_tokens, so completions have no bound "
                   "(≥: the cost of the prompts alone)")
    return "\n".join(out)
