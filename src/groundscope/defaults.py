"""The defaults a run starts from, beneath both the config that sets them (``config.py``) and
the code that uses them (client, dataset, media, scoring): each is written once, here.
Pure constants; imports nothing.

============================ ==================== ================================================
name                         value                used by
============================ ==================== ================================================
DEFAULT_TIMEOUT              300 s                a request's timeout (client, judges)
DEFAULT_MAX_RETRIES          5                    transport retries after the first attempt
DEFAULT_RETRY_BASE_DELAY     0.5 s                the first backoff (doubling, client/retry.py)
DEFAULT_RETRY_MAX_DELAY      30 s                 the longest backoff
DEFAULT_RATE_LIMIT_BUDGET    300 s                how long a 429 is retried past the count
DEFAULT_MAX_RESPONSE_BYTES   4 MiB                a reply's decoded body (client/limits.py)
DEFAULT_MAX_RECORD_BYTES     64 MiB               one dataset record (dataset/readers.py)
DEFAULT_MAX_BYTES            64 MiB               one medium's bytes (media/sources.py)
DEFAULT_MAX_PIXELS           89,478,485           an image's pixels: Pillow's decompression-bomb
                                                  limit (media/images.py)
DEFAULT_ANSWERS_MODEL        ``answers``          an answers run's model name (client/answers.py)
============================ ==================== ================================================
"""

from __future__ import annotations

DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_RETRY_BASE_DELAY = 0.5
DEFAULT_RETRY_MAX_DELAY = 30.0
DEFAULT_RATE_LIMIT_BUDGET = 300.0
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_RECORD_BYTES = 64 << 20
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS (its decompression-bomb limit)
DEFAULT_ANSWERS_MODEL = "answers"
