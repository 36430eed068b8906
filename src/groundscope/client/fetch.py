"""Remote audio, fetched at send time: the chat API has no audio URL part (``input_audio``
takes base64 only), so audio a record names by an http(s) URL is downloaded here and sent
inline, as EvalScope does. The URL comes from a dataset, so the download is bounded:

- size: at most ``max_bytes`` (the 64 MiB media cap). A ``Content-Length`` over it fails
  before reading; the body is read with a running count of *decoded* bytes (a gzip bomb
  counts what it inflates to) and dropped at the cap.
- time: ``timeout`` for the whole fetch, redirects included (the request timeout,
  ``--timeout``), and at most :data:`STALL_S` seconds waiting for a connection or a byte.
- redirects: at most :data:`MAX_REDIRECTS`, each to http(s), never from https to http.
- what is sent: a plain GET, none of the endpoint's headers (its API key never goes to a
  media host), no cookies kept.
- where: never a link-local (``169.254.169.254``, the cloud metadata address; ``fe80::``),
  multicast, unspecified (``0.0.0.0``) or reserved address, nor an IPv6 address embedding
  such an IPv4 one (mapped, compatible, 6to4, Teredo, NAT64), for the URL's host and every
  redirect's, whether written as an address or resolved from a name (each resolved address
  is checked, the one connected to among them). Loopback and private addresses stay
  allowed: local dev media servers (and the tests) live there.
- what comes back: a 200 whose bytes are audio by their magic numbers, wav or mp3
  (``media.fetched_audio_format``); the format sent is what the bytes are.

A URL is fetched once per client, i.e. once per run: its bytes stay in an LRU bounded by
``cache_bytes`` (:data:`CACHE_BYTES`), requests for a URL that is being fetched wait for
that download, and a failure is remembered as well (the next sample naming the URL fails
at once). A failure is a :class:`~groundscope.errors.MediaFetchError` (kind
``media_fetch``): that sample's request fails and nothing is sent to the model. URLs in
messages are shown without credentials (``media.describe``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import OrderedDict
from collections.abc import Sequence
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import ResolveResult

from groundscope import media
from groundscope.client.http_errors import truncate
from groundscope.client.limits import HEADER_LIMITS, read_body
from groundscope.defaults import DEFAULT_MAX_BYTES
from groundscope.errors import MediaError, MediaFetchError
from groundscope.redaction import Redactor, redact_url, url_secrets
from groundscope.types import MediaRef, Message, Modality

MAX_REDIRECTS = 3
STALL_S = 30.0  # no connection or no byte for this long: the fetch fails
CACHE_BYTES = 32 * 1024 * 1024
_FAILURES_KEPT = 4096
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def remote_audio(messages: Sequence[Message]) -> dict[str, MediaRef]:
    """The audio media of ``messages`` given as http(s) URLs, by URL (each once)."""
    return {str(ref.source): ref for msg in messages for ref in msg.media()
            if ref.kind is Modality.AUDIO and media.is_remote(ref)}


class MediaFetcher:
    """Fetches remote audio for one client: bounded downloads, cached by URL."""

    def __init__(self, *, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES,
                 cache_bytes: int = CACHE_BYTES) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.cache_bytes = cache_bytes
        self.downloads = 0  # fetches actually made (cache misses)
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached_size = 0
        self._failures: OrderedDict[str, str] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[bytes]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def fetch_all(self, messages: Sequence[Message]) -> dict[str, bytes]:
        """URL -> bytes of every remote audio in ``messages``; MediaFetchError for the first
        that cannot be had."""
        return {url: await self.fetch(ref) for url, ref in remote_audio(messages).items()}

    async def fetch(self, ref: MediaRef) -> bytes:
        """The checked bytes of one remote audio (cached, shared, or downloaded now)."""
        url = str(ref.source)
        data = self._cache.get(url)
        if data is not None:
            self._cache.move_to_end(url)
            return data
        failed = self._failures.get(url)
        if failed is not None:
            raise MediaFetchError(failed)
        task = self._inflight.get(url)
        if task is None:
            task = asyncio.ensure_future(self._fetch_new(ref))
            self._inflight[url] = task
            task.add_done_callback(lambda t: self._settle(url, t))
        return await asyncio.shield(task)  # a cancelled waiter leaves the download to others

    def _settle(self, url: str, task: asyncio.Task[bytes]) -> None:
        self._inflight.pop(url, None)
        if task.cancelled():
            return
        exc = task.exception()  # retrieved: no "never retrieved" warning when nobody waits
        if isinstance(exc, MediaFetchError):
            self._failures[url] = str(exc)
            while len(self._failures) > _FAILURES_KEPT:
                self._failures.popitem(last=False)
        elif exc is None:
            self._remember(url, task.result())

    def _remember(self, url: str, data: bytes) -> None:
        if len(data) > self.cache_bytes:
            return
        self._cache[url] = data
        self._cached_size += len(data)
        while self._cached_size > self.cache_bytes:
            _, dropped = self._cache.popitem(last=False)
            self._cached_size -= len(dropped)

    async def _fetch_new(self, ref: MediaRef) -> bytes:
        shown = f"audio URL {media.describe(ref)}"
        self.downloads += 1
        secrets = url_secrets(str(ref.source))  # and each redirect's: hidden in error texts
        try:
            async with asyncio.timeout(self.timeout):
                data = await self._download(str(ref.source), shown, secrets)
        except MediaFetchError as exc:  # may quote the media host's reason phrase
            raise MediaFetchError(truncate(Redactor(secrets).redact(str(exc)))) from None
        except TimeoutError:  # the whole fetch, or a stall (aiohttp's socket timeouts)
            stall = min(STALL_S, self.timeout)
            limits = f"{self.timeout:g}s (--timeout)" + (
                f", or {stall:g}s without data" if stall < self.timeout else "")
            raise MediaFetchError(f"{shown}: timed out after {limits}") from None
        except aiohttp.ClientError as exc:  # may quote the URL: its credentials are hidden
            what = Redactor(secrets).redact(f"{type(exc).__name__}: {exc}")
            raise MediaFetchError(f"{shown}: cannot fetch it ({truncate(what)})") from None
        try:
            media.fetched_audio_format(ref, data)
        except MediaError as exc:
            raise MediaFetchError(f"audio URL {exc}") from None
        return data

    async def _download(self, url: str, shown: str, secrets: list[str]) -> bytes:
        session = self._ensure_session()
        for _ in range(MAX_REDIRECTS + 1):
            check_host(urlsplit(url).hostname or "", shown)
            async with session.get(url, allow_redirects=False) as resp:
                if resp.status in _REDIRECTS:
                    url = redirect_target(url, resp.headers.get("Location"), shown)
                    secrets += url_secrets(url)
                    continue
                if resp.status != 200:
                    raise MediaFetchError(f"{shown}: HTTP {resp.status} {truncate(resp.reason or '')}"
                                          .rstrip())
                return await read_body(resp, self.max_bytes, over=lambda what: MediaFetchError(
                    f"{shown}: larger than the media cap of {self.max_bytes} bytes ({what})"))
        raise MediaFetchError(f"{shown}: more than {MAX_REDIRECTS} redirects")

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            stall = min(STALL_S, self.timeout)
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=8, ttl_dns_cache=300,
                                               resolver=CheckedResolver()),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=stall, sock_read=stall),
                headers={"Accept": "audio/wav, audio/mpeg, audio/*;q=0.9, */*;q=0.1"},
                cookie_jar=aiohttp.DummyCookieJar(),
                raise_for_status=False,
                auto_decompress=True,
                **HEADER_LIMITS,
            )
            self._session, self._loop = session, loop
        return session

    async def aclose(self) -> None:
        """Close the session and cancel downloads still running (idempotent)."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        session, self._session, self._loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()


def redirect_target(url: str, location: str | None, shown: str) -> str:
    """Where a redirect from ``url`` leads, if it may be followed (http(s), and no https ->
    http); else a MediaFetchError naming ``shown``."""
    if not location:
        raise MediaFetchError(f"{shown}: a redirect without a Location")
    target = urljoin(url, location)
    scheme = urlsplit(target).scheme.lower()
    if scheme not in ("http", "https"):
        raise MediaFetchError(f"{shown}: redirected to a {scheme or 'relative'} URL, not followed")
    if urlsplit(url).scheme.lower() == "https" and scheme == "http":
        raise MediaFetchError(f"{shown}: redirected from https to plain http "
                              f"({redact_url(target)}), not followed")
    return target


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a local prefix of /48 or longer
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible ::a.b.c.d


def _nat64_local(value: int) -> list[ipaddress.IPv4Address]:
    """The IPv4 address 64:ff9b:1::/48 may carry, at each RFC 6052 prefix length it allows
    (48, 56, 64, 96: bits 64-71 are skipped), since the operator's length is unknown."""
    bits = [(value >> (127 - i)) & 1 for i in range(128)]
    out = []
    for start in (48, 56, 64, 96):
        spots = [i for i in range(start, 128) if not 64 <= i < 72][:32]
        out.append(ipaddress.IPv4Address(int("".join(map(str, (bits[i] for i in spots))), 2)))
    return out


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries and reaches, with the form's name: mapped
    (::ffff:a.b.c.d), compatible (::a.b.c.d), 6to4 (2002::/16), Teredo's client (2001::/32,
    the last 32 bits inverted) and NAT64 (64:ff9b::/96, 64:ff9b:1::/48)."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if ip.ipv4_mapped is not None:
        found.append(("IPv4-mapped", ip.ipv4_mapped))
    if ip in _COMPATIBLE and int(ip) > 1:  # not :: or ::1
        found.append(("IPv4-compatible", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    if ip.sixtofour is not None:
        found.append(("6to4", ip.sixtofour))
    if ip.teredo is not None:
        found.append(("Teredo", ip.teredo[1]))
    if ip in _NAT64:
        found.append(("NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    elif ip in _NAT64_LOCAL:
        found += [("NAT64", v4) for v4 in _nat64_local(int(ip))]
    return found


def _refused_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if ip.is_loopback:  # ::1 is inside the reserved ::/8
        return None
    for kind in ("link_local", "multicast", "unspecified", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return {"unspecified": "an unspecified"}.get(kind, "a " + kind.replace("_", "-"))
    return None


def refused_address(address: str) -> str | None:
    """Why a media fetch may not connect to ``address`` (an IP), or None when it may: a
    refused kind of address, or an IPv6 address embedding a refused IPv4 one
    (:func:`embedded_ipv4`: ``2002:a9fe:a9fe::1`` reaches 169.254.169.254 through 6to4)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        else:
            for form, v4 in embedded_ipv4(ip):
                kind = _refused_kind(v4)
                if kind is not None:
                    return f"{ip} is the {form} form of {v4}, {kind} address"
    kind = _refused_kind(ip)
    return None if kind is None else f"{ip} is {kind} address"


def check_host(host: str, shown: str) -> None:
    """A MediaFetchError naming ``shown`` when ``host`` is an IP address not to fetch from."""
    why = refused_address(host.strip("[]"))
    if why is not None:
        raise MediaFetchError(f"{shown}: refused: {why}")


class CheckedResolver(aiohttp.ThreadedResolver):
    """aiohttp's resolver, refusing a name that resolves to an address not to fetch from
    (:func:`refused_address`): checks the addresses actually connected to."""

    def __init__(self) -> None:
        super().__init__()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        found = await super().resolve(host, port, family)
        for entry in found:
            why = refused_address(entry["host"])
            if why is not None:
                raise MediaFetchError(f"audio URL host {host!r}: refused: {why}")
        return found
