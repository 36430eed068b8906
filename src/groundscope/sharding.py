"""``--shard K/N``: which records of a run this shard asks (pure; imports nothing).

A shard is an ordinary run over a deterministic part of the run's records, for schedulers
without a distributed engine (a Slurm array, a Kubernetes Indexed Job); ``groundscope
merge`` joins the shards' run directories into the run directory a single run gives.

``K`` counts from 1 (``1/3``, ``2/3``, ``3/3``), as ``split -n K/N`` and a Slurm array
``--array=1-N`` do; a 0-based index such as Kubernetes' ``JOB_COMPLETION_INDEX`` is passed
as ``$((JOB_COMPLETION_INDEX + 1))/N``.

The rule (:class:`Dealer`): every shard reads the whole plan (each dataset, each subset,
its records after ``shuffle`` and ``limit``, the same seed), so it sees exactly the record
stream a single run sees, and deals the records round-robin to shards 1..N in that order,
across subsets and datasets. A record's samples (its paraphrases, its repeats) stay
together; the records of one consistency group (one ``group`` id in a subset) go to the
shard of the group's first record, so a group is scored whole. A bad record and a duplicate
sample id are judged by every shard as the single run judges them (a duplicate against the
first occurrence, wherever that went) and written to ``skipped.jsonl`` only by the shard
the record is dealt to: the union counts each bad record once.

>>> parse_shard(" 2/3 ")
(2, 3)
>>> d = Dealer(2, 3)
>>> [d.owns(("vqa", "s", line), None) for line in range(6)]
[False, True, False, False, True, False]
"""

from __future__ import annotations

import re
from collections.abc import Hashable

MAX_SHARDS = 100_000  # more shards than any array job runs; a typo such as 1/1e9 is refused

_SHARD = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``, with 1 <= K <= N <= ``MAX_SHARDS``; ``ValueError`` (one
    line saying what is expected) otherwise.

    >>> parse_shard("5/4")
    Traceback (most recent call last):
    ...
    ValueError: K must be in 1..4, got 5/4
    """
    m = _SHARD.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        shown = str(text)[:40]
        raise ValueError(f"expected K/N, e.g. 2/3 (shard 2 of 3), got {shown!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"N must be in 1..{MAX_SHARDS}, got {k}/{n}")
    if k == 0:
        raise ValueError(f"K counts from 1 (1..{n}), got 0/{n}; for a 0-based index such as "
                         f"JOB_COMPLETION_INDEX pass $((INDEX + 1))/{n}")
    if k > n:
        raise ValueError(f"K must be in 1..{n}, got {k}/{n}")
    return k, n


class Dealer:
    """Deals the records of a run's stream to shards (see the module docstring); ``owns``
    is asked once per loaded item, in stream order."""

    def __init__(self, k: int, n: int) -> None:
        self.k, self.n = k, n
        self._next = 0  # records (or groups) dealt so far, over the whole run
        self._record: Hashable = object()
        self._owner = 0
        self._scope: Hashable = object()  # the (dataset, subset) the groups below belong to
        self._groups: dict[str, int] = {}

    @classmethod
    def of(cls, shard: str | None) -> Dealer | None:
        """The dealer of a config's ``shard`` (None: not sharded)."""
        return None if shard is None else cls(*parse_shard(shard))

    def share(self, records: int) -> int:
        """How many of a stream of ``records`` records fall to this shard when none is in a
        group (a group moves records between shards: the progress total corrects it).

        >>> [Dealer(k, 3).share(7) for k in (1, 2, 3)], Dealer(3, 4).share(2)
        ([3, 2, 2], 0)
        """
        return max(0, records - self.k + self.n) // self.n

    def owns(self, record: tuple[str, str, Hashable], group: str | None) -> bool:
        """Whether this shard asks the item of ``record`` ``(dataset, subset, origin)``,
        whose consistency group is ``group`` (None: the record is its own group)."""
        if record != self._record:
            self._record = record
            scope = record[:2]
            if scope != self._scope:
                self._scope, self._groups = scope, {}
            owner = self._groups.get(group) if group is not None else None
            if owner is None:
                owner = self._next % self.n + 1
                self._next += 1
                if group is not None:
                    self._groups[group] = owner
            self._owner = owner
        return self._owner == self.k
