"""``from groundscope.run import run_task``: the import path of EvalScope's examples.

Kept so the seed guide's Python examples work with ``evalscope`` replaced by ``groundscope``;
the canonical import is ``from groundscope import run_task``.
"""

from groundscope.runner import run_task

__all__ = ["run_task"]
