"""Bounds on what an endpoint may send back, enforced while the reply is read.

- The decoded body of a reply is read in chunks with a running count and abandoned (the
  connection dropped) as soon as it passes ``max_response_bytes`` (default 4 MiB): a
  gzip bomb, an endless chunked stream or a 20 MB answer costs at most the cap in memory,
  never the whole body. A ``Content-Length`` over the cap fails before anything is read.
  Over the cap the request fails with a ``ResponseError`` of kind ``response_too_large``,
  not retried: the same request would very likely get the same reply, and a retry would
  only read another cap's worth of it.
- An error reply (any status but 200) is read up to :data:`ERROR_BODY_BYTES`; the rest is
  dropped, since only its message (cut to 500 characters) is kept.
- aiohttp (>= 3.14.4) decompresses in bounded steps and pauses reading while its buffer is
  full, so the decoded bytes waiting for us stay small as well; a slow endless body is
  bounded by the request timeout. Header lines and fields are capped by
  :data:`HEADER_LIMITS` (aiohttp's parser refuses longer ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groundscope.errors import ResponseError

if TYPE_CHECKING:  # no aiohttp import at import time
    import aiohttp

ERROR_BODY_BYTES = 64 * 1024
HEADER_LIMITS: dict[str, Any] = {"max_line_size": 8190, "max_field_size": 8190, "max_headers": 128}
_CHUNK = 64 * 1024


def too_large(limit: int, what: str) -> ResponseError:
    return ResponseError(
        f"response too large: {what}, over max_response_bytes={limit} "
        "(raise --max-response-bytes if such replies are expected)",
        kind="response_too_large",
    )


async def read_body(resp: aiohttp.ClientResponse, limit: int, *, cut: bool = False,
                    over: Callable[[str], Exception] | None = None) -> bytes:
    """The decoded body of ``resp``, at most ``limit`` bytes.

    Past ``limit``: with ``cut`` the first ``limit`` bytes are returned, else ``over(what)``
    is raised (default: a ``response_too_large`` ``ResponseError``). Either way the rest is
    never read and the connection is closed rather than reused.
    """
    def fail(what: str) -> Exception:
        return over(what) if over is not None else too_large(limit, what)

    declared = resp.content_length
    if declared is not None and declared > limit and not cut:
        resp.close()
        raise fail(f"Content-Length is {declared} bytes")
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        buf += chunk
        if len(buf) > limit:
            resp.close()
            if cut:
                return bytes(buf[:limit])
            raise fail(f"stopped reading after {len(buf)} decoded bytes")
    return bytes(buf)
