"""Logging set-up: one ``groundscope`` logger, a run-directory log file, secret scrubbing.

Every handler carries a ``Redactor`` filter that replaces each configured secret, and
anything that looks like a bearer token, with ``***`` before a record is written, so an
API key never reaches a log line even if a library puts it in an exception message.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from groundscope.terminal import VisibleFormatter

LOGGER_NAME = "groundscope"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",]+")


class Redactor(logging.Filter):
    """Scrubs secrets from the fully formatted message of every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return _BEARER.sub(r"\1***", text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message = f"{message}: {record.exc_info[1]}"
            record.exc_info = None
            record.exc_text = None
        record.msg = self.scrub(message)
        record.args = ()
        return True


def configure(*, debug: bool = False, secrets: Iterable[str] = (), log_file: Path | None = None,
              console: bool = True) -> Redactor:
    """(Re)configure the groundscope logger for one run. Returns its redactor."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    logger.propagate = False
    redactor = Redactor(secrets)
    line, date = "%(asctime)s - %(levelname)s - %(message)s", "%Y-%m-%d %H:%M:%S"
    fmt = logging.Formatter(line, date)
    if console:  # the terminal shows control characters as escapes; the log file keeps them
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(VisibleFormatter(line, date))
        stream.addFilter(redactor)
        logger.addHandler(stream)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setFormatter(fmt)
        fh.addFilter(redactor)
        logger.addHandler(fh)
    return redactor


def close() -> None:
    """Detach and close the handlers (flushes the run's log file)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
