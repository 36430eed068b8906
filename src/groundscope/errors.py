"""The one exception tree of groundscope.

::

    GroundscopeError                 base: anything groundscope raises on purpose
    ├── ConfigError                  a bad TaskConfig / CLI flag / config file (before any request)
    ├── DatasetError                 a dataset cannot be loaded at all (no file, unreadable file)
    │   └── RecordError              one bad record: ``file:line: field: problem``
    ├── MediaError                   one medium is missing, unreadable, too big or of an
    │   │                            unsupported format (formats re-raise it as a RecordError
    │   │                            naming the record; at send time it fails the sample)
    │   └── MediaRootError           a local medium lies outside the allowed media roots
    ├── ModelError                   a request to a model endpoint failed for good
    │   ├── RetryableError           429 / 5xx / timeout / connection: worth another try
    │   └── ResponseError            a non-retryable answer (4xx, unparseable body, refusal)
    │       └── MediaFetchError      remote audio could not be fetched at send time (media_fetch)
    ├── StoreError                   the run directory is unusable or does not match the run
    ├── ErrorBudgetExceeded          too many samples failed: the run stopped early
    └── NothingEvaluated             a dataset of a finished run has no answered sample (every
                                     record bad, every request failed, or no record at all)

User errors (config, dataset, record) are shown as one line, without a traceback.
No message ever contains an API key or an Authorization header.
"""

from __future__ import annotations

from pathlib import Path


class GroundscopeError(Exception):
    """Base class of every error groundscope raises on purpose."""


class ConfigError(GroundscopeError):
    """Bad configuration, detected before any request is sent."""


class DatasetError(GroundscopeError):
    """A dataset cannot be loaded (missing file, unreadable file, unknown format)."""


class RecordError(DatasetError):
    """One malformed record. ``str()`` is ``file:line: field: problem``."""

    def __init__(self, path: Path | str, line: int, field: str, problem: str) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}:{line}: {field}: {problem}")

    def at(self, path: Path | str, line: int) -> RecordError:
        """The same problem, re-anchored at a given file and line."""
        return type(self)(path, line, self.field, self.problem)


class MediaError(GroundscopeError):
    """A medium is missing, unreadable, too big or of an unsupported format.

    Raised by ``media.py``, which does not know which record it serves: dataset formats turn
    it into a ``RecordError`` naming the file, line and column.
    """


class MediaRootError(MediaError):
    """A local medium's real path lies outside the allowed media roots (``media_roots``)."""


class ModelError(GroundscopeError):
    """A model request failed. ``kind`` is a short machine-readable label.

    ``attempts`` is how many requests were sent before giving up (set by the retry loop).
    """

    def __init__(self, message: str, kind: str = "error", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = 1


class RetryableError(ModelError):
    """A transient failure (429, 5xx, timeout, dropped connection).

    ``retry_after`` is the server's ``Retry-After`` in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        kind: str = "retryable",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, kind, status)
        self.retry_after = retry_after


class ResponseError(ModelError):
    """A non-retryable failure: 4xx other than 408/429, malformed body, refusal."""


class MediaFetchError(ResponseError):
    """Remote audio named by an http(s) URL could not be fetched at send time, or what came
    back is no usable audio (``kind`` ``media_fetch``): that sample's request fails, unsent."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="media_fetch")


class StoreError(GroundscopeError):
    """The run directory cannot be used (unreadable, or written by a different run)."""


class ErrorBudgetExceeded(GroundscopeError):
    """The share of failed samples crossed ``max_error_rate``; finished work is kept."""


class NothingEvaluated(GroundscopeError):
    """A run finished, but some dataset has no answered sample to score: every record was
    bad (``skipped.jsonl``), every request failed, or there was no record. ``str()`` is one
    line naming each such dataset and where to look; ``report`` is the run's ``Report`` (the
    other datasets' results, all outputs already written). The CLI exits 1."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


def one_error(group: BaseExceptionGroup) -> GroundscopeError | None:
    """The first error of a task group that failed with groundscope errors only (shown as
    one line), or None when anything else failed too (a bug: its traceback is wanted)."""
    mine, other = group.split(GroundscopeError)
    if mine is None or other is not None:
        return None
    first: BaseException = mine
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first if isinstance(first, GroundscopeError) else None
