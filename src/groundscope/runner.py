"""The only orchestration: load -> request -> store -> score -> store -> aggregate.

One evaluation is a stream of work items ``(dataset, subset, sample, repeat)``. At most
``eval_batch_size`` items are in flight; each is requested (or taken from the resume
cache), its prediction appended to the run directory *before* scoring, then scored and the
scores appended. Nothing is held per sample but a few floats for the averages, so memory
grows with the concurrency, not the dataset.

Failure policy: a sample whose request fails for good is recorded as errored. Without
``ignore_errors`` the first such failure stops the run (as in EvalScope); with it, the run
goes on until the error rate crosses ``max_error_rate`` (no limit by default). Either way
everything finished is kept, and ``--use-cache RUN_DIR`` resumes.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from groundscope import logs
from groundscope.client.mediaprep import prefetch
from groundscope.config import TaskConfig
from groundscope.dataset.answers import log_answers, note_join, open_answers
from groundscope.errors import ErrorBudgetExceeded, NothingEvaluated, RecordError, one_error
from groundscope.feed import ItemFeed
from groundscope.live import LiveView
from groundscope.memory import TRIM_EVERY, release_free_memory
from groundscope.pipeline import (
    Hooks,
    Predicted,
    Scored,
    evaluate_sample,
    finish_groups,
    record_score,
)
from groundscope.plan import (
    DatasetRun,
    Item,
    check_endpoints,
    iter_samples,
    plan_dataset,
    planned_records,
    run_media_roots,
)
from groundscope.progress import Expected, Progress
from groundscope.redaction import Redactor
from groundscope.report.build import build_dataset_report, write_page
from groundscope.report.model import Report
from groundscope.resume import check_same_shard, warn_config_changes
from groundscope.scaleout.session import check_address
from groundscope.scaleout.shipping import require_ray, shipped_config
from groundscope.scoring import ScoringContext
from groundscope.sharding import Dealer
from groundscope.sidework import SideWork
from groundscope.store import MEDIA_ROOTS_KEY, RunStore, check_subset_files
from groundscope.summary import record_rate_limits
from groundscope.types import PredictionStatus, Sample
from groundscope.usage import MODEL_STEP

if TYPE_CHECKING:
    from groundscope.client.chat import ChatClient

log = logging.getLogger("groundscope")

_READ_AHEAD = 16  # records read and waiting for a model slot, at most


def _mock_judged(cfg: TaskConfig) -> bool:
    from groundscope.scoring.judge import mock_judged  # the judge: imported where judged

    return mock_judged(cfg.judge)


class Runner:
    """Runs one ``TaskConfig``. Use ``await Runner(cfg).run()``; see ``run.run_task``."""

    def __init__(self, cfg: TaskConfig, *, progress: bool | None = None,
                 key_source: str | None = None) -> None:
        self.cfg = cfg
        self.key_source = key_source  # where a literal api_key came from (a 401 names it)
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.scoring = ScoringContext.from_config(cfg)  # its run_dir: once the store is open
        self.datasets = [plan_dataset(cfg, name, self.scoring) for name in cfg.datasets]
        for run in self.datasets:
            run.scored = {}  # the report's judge figures: this plan's samples only
        check_subset_files((run.name, subset) for run in self.datasets for subset in run.subsets)
        self._media_roots = run_media_roots(cfg)  # a bad --media-root: before a run directory
        if cfg.executor == "ray":  # keys as $NAME, Ray installed, a head that answers: before
            shipped_config(cfg)    # a run directory
            require_ray()
            check_address(cfg.ray_address)
        check_endpoints(cfg)  # a wrong port or host: one line now, before a run directory
        # --answers: the file read (and its bad lines shown) before a run directory
        self._answers = open_answers(cfg.answers, cfg.max_record_bytes, strict=cfg.strict) \
            if cfg.answers is not None else None
        if cfg.strict:  # as EvalScope: a bad record is fatal, before any request or run directory
            contextvars.copy_context().run(self._check_records)
        if cfg.use_cache:
            self.store = RunStore.open(cfg.use_cache, cfg.model_name,
                                       legacy_model=cfg.model_id or cfg.model)
        else:
            self.store = RunStore.create(cfg.work_dir, cfg.model_name, no_timestamp=cfg.no_timestamp)
        self.scoring.run_dir = self.store.run_dir
        self._error_budget = cfg.max_error_rate if cfg.max_error_rate is not None else (
            1.0 if cfg.ignore_errors else 0.0)
        self._done = 0
        self._errored = 0
        self._stop_reason: str | None = None
        self._side = SideWork([run.scorers for run in self.datasets])
        self._live = LiveView(self.datasets, self.scoring, cfg.pricing)
        self._progress = Progress(self.progress, self._live.status)
        self._redactor = Redactor(cfg.secrets())  # log lines and error texts saved in outputs
        self._feed = ItemFeed(cfg, self.datasets, self.store, self._side, self._answers)

    def _check_records(self) -> None:
        """Read every record with ``strict`` (the first bad one raises), under this run's
        media settings, in a context of its own (``contextvars.copy_context``)."""
        from groundscope import media

        media.set_media_roots(self._media_roots)
        media.set_max_pixels(self.cfg.max_image_pixels)
        media.set_media_settings(self.cfg.media_settings())
        for run in self.datasets:
            for _, sample in iter_samples(self.cfg, run, strict=True):
                if self._answers is not None and isinstance(sample, Sample):
                    self._answers.require(sample, self.cfg.repeats)  # --strict: none missing
        if self._answers is not None and self.cfg.limit is None:  # beyond --limit: not extra
            self._answers.require_all_used()

    @property
    def skipped_notes(self) -> list[str]:
        """One line per dataset with bad records skipped: how many and the first one's
        ``file:line: field: problem`` (the CLI says them after the table)."""
        return [f"{run.name}: {n} bad record{'s' * (n > 1)} skipped, not evaluated; the first: "
                f"{self._feed.first_skipped.get(run.name, '?')} (all in {self.run_dir / 'skipped.jsonl'})"
                for run in self.datasets if (n := run.summary.skipped)]

    @property
    def run_dir(self) -> Path:
        return self.store.run_dir

    # ------------------------------------------------------------------ top level

    async def run(self) -> Report:
        try:
            return await self._run()
        finally:
            self.store.unlock()

    async def _run(self) -> Report:
        cfg = self.cfg
        logs.configure(debug=cfg.debug, redactor=self._redactor, log_file=self.store.log_file)
        log.info("run directory: %s", self.run_dir)
        if self.store.note:
            log.warning("%s", self.store.note)
        if cfg.use_cache:
            check_same_shard(self.run_dir, cfg.shard)
            warn_config_changes(self.run_dir, cfg.redacted())
        from groundscope import media

        roots = media.set_media_roots(self._media_roots)  # this run's context: load, send, page
        self._roots = list(roots)
        self.store.write_config({**cfg.redacted(), MEDIA_ROOTS_KEY: list(roots)})
        media.set_max_pixels(cfg.max_image_pixels)  # this run's context: load and send
        media.set_media_settings(cfg.media_settings())  # frames, image sizes, wav: model and judges
        if self._answers is not None:
            log_answers(self._answers)
        try:
            async with AsyncExitStack() as stack:
                api_url = cfg.api_url
                stack.push_async_callback(self.scoring.aclose)
                if cfg.eval_type == "mock":
                    from groundscope.simulator import start_run_simulator

                    samples = (s for run in self.datasets
                               for _, s in iter_samples(cfg, run, strict=False)
                               if not isinstance(s, RecordError))
                    server = await start_run_simulator(cfg.simulator, samples)
                    stack.push_async_callback(server.astop)
                    api_url = self.scoring.mock_url = server.base_url
                elif cfg.eval_type == "answers" and _mock_judged(cfg):  # judges only
                    from groundscope.simulator import start_judge_simulator

                    server = await start_judge_simulator(cfg.simulator)
                    stack.push_async_callback(server.astop)
                    self.scoring.mock_url = server.base_url
                if cfg.executor == "ray":
                    await self._evaluate_ray(api_url or "")
                else:
                    await self._evaluate_local(stack, api_url)
                for run in self.datasets:  # the groups, once every member is scored
                    await finish_groups(self.store, run)
            if self._answers is not None:
                note_join(self._answers, self.datasets, self._feed.missing)
            for run in self.datasets:
                if run.summary.changed:
                    log.warning("%s: %d samples changed since the cached run (request or "
                                "reference): asked or scored again", run.name, run.summary.changed)
        finally:
            self._progress.close()
            self.store.close()
            self._side.close()
            record_rate_limits(self.run_dir, {name: gate.stats.to_json() for name, gate
                                              in self.scoring.gates.items()},
                               (run.summary for run in self.datasets))
        report = self._build_report()
        if self._stop_reason:
            logs.close()
            raise ErrorBudgetExceeded(self._stop_reason)
        empty = report.nothing_evaluated(shard=cfg.shard is not None)
        if empty:
            raise NothingEvaluated(empty, report)
        return report

    async def _evaluate_local(self, stack: AsyncExitStack, api_url: str | None) -> None:
        """The items on this process's event loop, through one model client."""
        cfg = self.cfg
        from groundscope.client.apis import wire_api
        from groundscope.client.chat import ChatClient
        from groundscope.client.retry import RetryPolicy

        if cfg.eval_type == "answers":  # read, never requested: client/answers.py
            from groundscope.client.answers import AnswersClient

            book = self._answers
            await self._evaluate(AnswersClient(cfg.model, book.lookup if book else None))  # type: ignore[arg-type]
            return
        api = cfg.simulator.api if cfg.eval_type == "mock" else cfg.eval_type
        gate = self.scoring.gate("model", api_url or "", cfg.model, cfg.eval_batch_size,
                                 rpm=cfg.rpm, tpm=cfg.tpm, max_pause=cfg.retry_max_delay)
        client = ChatClient(
            api_url or "", cfg.model, api_key=cfg.api_key,
            generation_config=cfg.generation_config, timeout=cfg.timeout,
            retry=RetryPolicy(max_retries=cfg.max_retries, base_delay=cfg.retry_base_delay,
                              max_delay=cfg.retry_max_delay,
                              rate_limit_budget=cfg.rate_limit_budget),
            concurrency=cfg.eval_batch_size, max_response_bytes=cfg.max_response_bytes,
            wire=wire_api(api), gate=gate, key_source=self.key_source,
        )
        stack.push_async_callback(client.aclose)
        from groundscope import media

        media.set_sending(True)  # an image read at load is kept for its request (one read)
        await self._evaluate(client)

    async def _evaluate_ray(self, api_url: str) -> None:
        """The same items, dispatched to Ray workers (scaleout/driver.py); what comes back is
        stored and counted here, as in a local run."""
        from groundscope.scaleout.driver import RayDriver

        self._progress.open()
        driver = RayDriver(self.cfg, self, self.scoring, api_url=api_url, mock_url=self.scoring.mock_url,
                           roots=self._roots)
        self._side.first_wave_out()  # the requests go out from the workers, not from here
        await driver.run(self._feed.items(self._progress.expected), self._feed.saved)
        if driver.requeued:
            log.warning("Ray: %d samples of dead workers were sent to the others", driver.requeued)

    async def _evaluate(self, client: ChatClient) -> None:
        """Feed items to tasks. Two stages with their own bounds: model requests
        (``eval_batch_size``) and scoring (``judge_concurrency``), so slow judging never
        holds a model slot; the number of live items is bounded by their sum. A record is
        read only when few enough are waiting for a model slot (``_READ_AHEAD``): the first
        wave is not slowed by reading records the next waves will need."""
        n_model = self.cfg.eval_batch_size
        n_score = self.scoring.judge_concurrency
        live = asyncio.Semaphore(n_model + n_score)
        ahead = asyncio.Semaphore(min(n_model, _READ_AHEAD))
        self._model_slots = asyncio.Semaphore(n_model)
        self._score_slots = asyncio.Semaphore(n_score)
        if self.cfg.eval_type != "answers":  # an answers run has no endpoint to show
            self._live.client = client
        self._side.before_requests()
        records = sum(planned_records(self.cfg, run) for run in self.datasets)
        shard = Dealer.of(self.cfg.shard)  # a shard's total: the records dealt to it
        self._progress.expected = Expected(shard.share(records) if shard else records,
                                           self.cfg.repeats)
        self._progress.open()
        items = self._feed.items(self._progress.expected)
        try:
            async with asyncio.TaskGroup() as tg:
                while not self._stop_reason:
                    await live.acquire()
                    await ahead.acquire()
                    item = None if self._stop_reason else next(items, None)  # read it now
                    if item is None:
                        live.release()
                        ahead.release()
                        break
                    tg.create_task(self._guarded(client, item, live, ahead))
                    # Let the new task build and send its request before the next record is
                    # read: the first wave goes out while later records load, not after.
                    await asyncio.sleep(0)
                    if self._model_slots.locked():
                        self._side.first_wave_out()
                self._side.first_wave_out()
        except BaseExceptionGroup as group:  # a user error stays one line, not a traceback
            first = one_error(group)
            if first is None:
                raise
            raise first from None

    async def _guarded(self, client: ChatClient, item: Item, live: asyncio.Semaphore,
                       ahead: asyncio.Semaphore) -> None:
        try:
            await self._process(client, item, ahead)
        finally:
            live.release()

    async def _process(self, client: ChatClient, item: Item, ahead: asyncio.Semaphore) -> None:
        hooks = Hooks(self._model_slot(ahead), self._score_slots,
                      partial(self.on_prediction, item), partial(self.on_score, item))
        saved = self._feed.saved(item)
        if saved.prediction is None and self.cfg.eval_type != "answers":  # media converted while it waits
            prefetch(item.sample.messages)
        await evaluate_sample(item.sample, item.repeat, item.run.scorers, client=client,
                              saved=saved, redact=self._redactor.redact, hooks=hooks)
        self.on_done(item)

    # what a sample's path hands back, locally or from a Ray worker (scaleout/driver.py's Sink)

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    def on_prediction(self, item: Item, p: Predicted) -> None:
        """Store a prediction (before it is scored) and count it."""
        if p.new:
            self.store.append_prediction(item.run.name, item.subset, item.sample, p.prediction)
        self._count(item.run, p)

    def on_score(self, item: Item, scored: Scored) -> None:
        record_score(self.store, item.run, item.sample, scored)
        self._live.scored(item.run, scored)

    def on_done(self, item: Item) -> None:
        self._progress.advance(self._errored)
        if self._progress.done % TRIM_EVERY == 0:
            release_free_memory()  # the payloads' freed pages: see groundscope/memory.py

    @asynccontextmanager
    async def _model_slot(self, ahead: asyncio.Semaphore) -> AsyncIterator[None]:
        try:
            await self._model_slots.acquire()
        finally:
            ahead.release()  # no longer waiting: the feeder may read another record
        try:
            yield
        finally:
            self._model_slots.release()

    # ------------------------------------------------------------------ accounting

    def _count(self, run: DatasetRun, p: Predicted) -> None:
        s, pred = run.summary, p.prediction
        s.count(pred.status is PredictionStatus.OK, pred.error_kind)
        s.cached += p.cached
        s.changed += p.changed
        if pred.completion is not None and self.cfg.eval_type != "answers":  # read answers: no request
            s.usage.add(MODEL_STEP, self.cfg.model, pred.completion.usage, billed=not p.cached)
        self._done += 1
        if pred.status is PredictionStatus.OK:
            return
        self._errored += 1
        log.error("sample %s failed: %s", pred.sample_id, pred.error)
        rate = self._errored / self._done
        warming_up = self.cfg.max_error_rate is not None and self._done < 20
        if rate > self._error_budget and not self._stop_reason and not warming_up:
            if self.cfg.ignore_errors or self.cfg.max_error_rate is not None:
                why = f"error rate {rate:.1%} crossed max_error_rate {self._error_budget:.1%}"
            else:
                why = (f"a sample failed: {pred.error} (pass --ignore-errors to record "
                       "failures and go on)")
            self._stop_reason = (f"run stopped early: {why}. Finished work is kept in "
                                 f"{self.run_dir}; resume with --use-cache {self.run_dir}")

    def _build_report(self) -> Report:
        cfg = self.cfg
        out = []
        for run in self.datasets:
            out.append(build_dataset_report(self.store, run, model=cfg.model_name, seed=cfg.seed,
                                            judge=cfg.judge, pricing=cfg.pricing))
            log.info("%s: report written to %s", run.name, self.store.evalscope_report_file(run.name))
        page = write_page(self.run_dir, end_of_run=True)
        if page is not None:
            log.info("HTML report: %s", page)
        return Report(run_dir=str(self.run_dir), model=cfg.model_name, datasets=out,
                      page=None if page is None else str(page))

