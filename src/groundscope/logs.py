"""Logging set-up: one ``groundscope`` logger, a run-directory log file, redaction of every line.

Every handler carries a :class:`RedactingFilter`: the run's
:class:`~groundscope.redaction.Redactor` hides each configured secret (in any form it
recognises), and anything that looks like a bearer token, before a record is written, so an
API key never reaches a log line even if a library puts it in an exception message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from tqdm import tqdm

from groundscope.errors import StoreError
from groundscope.fileio import open_regular_fd
from groundscope.redaction import Redactor
from groundscope.terminal import VisibleFormatter

LOGGER_NAME = "groundscope"


class RedactingFilter(logging.Filter):
    """Redacts the fully formatted message of every record (exception text included)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message = f"{message}: {record.exc_info[1]}"
            record.exc_info = None
            record.exc_text = None
        record.msg = self.redactor.redact(message)
        record.args = ()
        return True


class RunLogFile(logging.FileHandler):
    """The run's log file. A line that cannot be written (a full disk) stops the file, with
    one line on stderr, instead of logging's traceback per record: the log is a convenience,
    the run's outputs say on their own when they cannot be written."""

    failed = False

    def _open(self):  # type: ignore[no-untyped-def]
        """Append without following a symlink planted in a run directory (nor a FIFO)."""
        fd = open_regular_fd(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handleError(record)
            return
        self.failed = True
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
        reason = exc.strerror or str(exc)
        print(f"groundscope: warning: {self.baseFilename}: {reason[:1].lower()}{reason[1:]}; "
              "log lines go to the terminal only from here", file=sys.stderr)


class ConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The terminal's log lines, written through ``tqdm.write``: an open progress bar is
    cleared, the line written on its own, the bar drawn again below it (never glued on)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # as logging.StreamHandler: a broken stream is handleError's
            self.handleError(record)


def configure(*, debug: bool = False, redactor: Redactor | None = None, log_file: Path | None = None,
              console: bool = True) -> None:
    """(Re)configure the groundscope logger for one run; ``redactor`` hides the run's secrets."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    logger.propagate = False
    redacting = RedactingFilter(redactor or Redactor())
    # EvalScope's line: "2025-01-01 12:00:00 - evalscope - INFO: message"
    line, date = "%(asctime)s - %(name)s - %(levelname)s: %(message)s", "%Y-%m-%d %H:%M:%S"
    fmt = logging.Formatter(line, date)
    if console:  # the terminal shows control characters as escapes; the log file keeps them
        stream = ConsoleHandler(sys.stderr)
        stream.setFormatter(VisibleFormatter(line, date))
        stream.addFilter(redacting)
        logger.addHandler(stream)
    if log_file is not None:
        try:
            if log_file.parent.is_symlink():
                raise StoreError(f"{log_file.parent}: is a symbolic link")
            log_file.parent.mkdir(parents=True, exist_ok=True)
            fh = RunLogFile(log_file, encoding="utf-8")
        except (OSError, StoreError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"groundscope: warning: {log_file}: {reason}; log lines go to "
                  "the terminal only", file=sys.stderr)
        else:
            fh.setFormatter(fmt)
            fh.addFilter(redacting)
            logger.addHandler(fh)


def close() -> None:
    """Detach and close the handlers (flushes the run's log file); the logger's level and
    propagation to the root logger are as before :func:`configure`."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
