"""The work items of one run, in dataset order: ``(dataset, subset, sample, repeat)``.

Every record is read (a shard reads them all, so duplicate ids and the plan merge checks
see the whole file) and only this shard's are handed on (``sharding.Dealer``). Bad
records, duplicate ids and samples an answers file has no answer for are skipped here:
counted in the dataset's summary, written to ``skipped.jsonl`` and remembered for the
closing lines. The runner (locally or through Ray) pulls the items one at a time, and
asks the feed what a resumed run directory already holds for each (``saved``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence

from groundscope.config import TaskConfig
from groundscope.dataset.answers import AnswerBook
from groundscope.errors import RecordError
from groundscope.pipeline import NOTHING_SAVED, Saved
from groundscope.plan import DatasetRun, Item, iter_samples
from groundscope.planid import PlanRecorder
from groundscope.progress import Expected
from groundscope.sharding import Dealer
from groundscope.sidework import SideWork
from groundscope.store import RunStore
from groundscope.types import Sample

log = logging.getLogger("groundscope")

LOGGED_BAD_RECORDS = 50  # per dataset, one warning line each


class ItemFeed:
    """The items of ``datasets`` under ``cfg``; what was skipped stays on the feed:
    ``first_skipped`` (dataset -> its first bad record's problem) and ``missing`` (dataset
    -> the ids the answers file lacks)."""

    def __init__(self, cfg: TaskConfig, datasets: Sequence[DatasetRun], store: RunStore,
                 side: SideWork, answers: AnswerBook | None) -> None:
        self.cfg = cfg
        self.datasets = datasets
        self.store = store
        self.side = side
        self.answers = answers
        self.first_skipped: dict[str, str] = {}
        self.missing: dict[str, list[str]] = {}
        self._bad: dict[str, int] = {}  # bad records seen per dataset

    def items(self, expected: Expected) -> Iterator[Item]:
        """The items; ``expected`` (the progress total) is corrected as this shard's records
        are read and made exact once the stream ends."""
        dealer = Dealer.of(self.cfg.shard)  # a shard reads every record, asks its own
        plan = PlanRecorder(self.store.run_dir) if dealer else None  # what merge checks shards by
        try:
            yield from self._dealt(dealer, plan, expected)
            if plan:
                plan.finish()
        finally:
            if plan:
                plan.close()
        expected.finish()

    def saved(self, item: Item) -> Saved:
        """What the resumed run directory holds for the item (nothing without --use-cache)."""
        run = item.run
        if not self.cfg.use_cache:
            return NOTHING_SAVED
        if item.subset not in run.cache:
            run.cache[item.subset] = self.store.load_predictions(run.name, item.subset)
            run.review_cache[item.subset] = self.store.load_reviews(run.name, item.subset)
        key = (item.sample.id, item.repeat)
        row = run.cache[item.subset].get(key)
        if row is None:
            return NOTHING_SAVED
        reviews = run.review_cache[item.subset]
        return Saved(row, {s.name: reviews[(*key, s.name)] for s in run.scorers
                           if (*key, s.name) in reviews})

    def _dealt(self, dealer: Dealer | None, plan: PlanRecorder | None,
               expected: Expected) -> Iterator[Item]:
        for run in self.datasets:
            seen: dict[str, str] = {}  # ids are unique per subset (its outputs are its own)
            current = origin = None
            for subset, loaded in iter_samples(self.cfg, run, strict=self.cfg.strict):
                if subset != current:
                    current, seen = subset, {}
                if plan:
                    plan.add(run.name, subset, loaded)
                mine = dealer is None or dealer.owns(*deal_key(run.name, subset, loaded))
                if isinstance(loaded, RecordError):
                    if mine:
                        expected.bad()
                        self.skip(run, subset, str(loaded))
                    continue
                if mine:
                    self.side.loaded(loaded)
                new_record, origin = loaded.origin != origin, loaded.origin
                first = seen.setdefault(loaded.id, str(loaded.origin))
                if mine:
                    expected.sample(new_record=new_record, kept=first == str(loaded.origin))
                if first != str(loaded.origin):
                    if mine:
                        self.skip(run, subset, f"{loaded.origin}: id: duplicate sample id "
                                               f"{loaded.id!r} (first at {first})")
                    continue
                if mine:
                    yield from self._repeats(run, subset, loaded)

    def _repeats(self, run: DatasetRun, subset: str, loaded: Sample) -> Iterator[Item]:
        for repeat in range(self.cfg.repeats):
            sample = loaded
            if self.answers is not None:
                if self.answers.lookup(loaded, repeat) is None:
                    self._unanswered(run, subset, loaded, repeat)
                    continue
                if labels := self.answers.labels_of(loaded, repeat):  # the file's labels
                    sample = dataclasses.replace(loaded, metadata={**loaded.metadata, **labels})
            yield Item(run, subset, sample, repeat)

    def _unanswered(self, run: DatasetRun, subset: str, sample: Sample, repeat: int) -> None:
        """A sample the answers file has no answer for: skipped, counted, named at the end."""
        run.summary.skipped += 1
        self.missing.setdefault(run.name, []).append(sample.id + (f"#r{repeat}" if repeat else ""))
        self.store.append_skipped(run.name, subset, f"{sample.origin}: id: {sample.id!r} has no "
                                                    f"answer in {self.cfg.answers}")

    def skip(self, run: DatasetRun, subset: str, problem: str) -> None:
        """A bad record: counted, written to ``skipped.jsonl``, logged (the first
        :data:`LOGGED_BAD_RECORDS` of a dataset one line each; the rest at debug level,
        after one line saying so: a file of a million bad lines is not a million lines)."""
        run.summary.skipped += 1
        self.first_skipped.setdefault(run.name, problem)
        self.store.append_skipped(run.name, subset, problem)
        seen = self._bad[run.name] = self._bad.get(run.name, 0) + 1
        if seen <= LOGGED_BAD_RECORDS:
            log.warning("skipped bad record: %s", problem)
            return
        if seen == LOGGED_BAD_RECORDS + 1:
            log.warning("%s: more than %d bad records; the rest are not logged one by one "
                        "(--debug logs them; every one is in %s and counted in the summary)",
                        run.name, LOGGED_BAD_RECORDS, self.store.run_dir / "skipped.jsonl")
        log.debug("skipped bad record: %s", problem)


def deal_key(dataset: str, subset: str, loaded: Sample | RecordError
             ) -> tuple[tuple[str, str, int], str | None]:
    """What ``sharding.Dealer.owns`` deals by: the record (its line in the subset's file)
    and its consistency group (``group`` in the sample's metadata, if any)."""
    if isinstance(loaded, RecordError):
        return (dataset, subset, loaded.line), None
    group = loaded.metadata.get("group")
    return (dataset, subset, loaded.origin.line), None if group is None else str(group)
