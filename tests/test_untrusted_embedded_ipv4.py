"""Remote audio never reaches a refused IPv4 address through an IPv6 form embedding it:
IPv4-mapped, IPv4-compatible, 6to4, Teredo and NAT64 (red team round 3, item 8)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from groundscope.client.fetch import CheckedResolver, MediaFetcher, refused_address
from groundscope.errors import MediaFetchError
from groundscope.types import MediaRef, Modality

# each form of 169.254.169.254 (the cloud metadata address), 224.0.0.1 and 240.0.0.1
EMBEDDED = [
    ("2002:a9fe:a9fe::1", "6to4", "169.254.169.254", "link-local"),
    ("2002:e000:1::", "6to4", "224.0.0.1", "multicast"),
    ("2002:f000:1:5::9", "6to4", "240.0.0.1", "reserved"),
    # Teredo: server 65.54.227.120, client = NOT of the last 32 bits
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo", "169.254.169.254", "link-local"),
    ("2001:0:4136:e378:8000:63bf:1fff:fffe", "Teredo", "224.0.0.1", "multicast"),
    ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254", "link-local"),
    ("64:ff9b::f000:1", "NAT64", "240.0.0.1", "reserved"),
    ("64:ff9b:1:a9fe:a9:fe00::", "NAT64", "169.254.169.254", "link-local"),  # a /48 prefix
    ("64:ff9b:1:a9:fe:a9fe::", "NAT64", "169.254.169.254", "link-local"),  # a /56 prefix
    ("64:ff9b:1:0:a9:fea9:fe00:0", "NAT64", "169.254.169.254", "link-local"),  # a /64 prefix
    ("::a9fe:a9fe", "IPv4-compatible", "169.254.169.254", "link-local"),
]


@pytest.mark.parametrize(("address", "form", "v4", "kind"), EMBEDDED)
def test_an_ipv6_form_of_a_refused_ipv4_address_is_refused(
        address: str, form: str, v4: str, kind: str) -> None:
    assert refused_address(address) == (f"{address} is the {form} form of {v4}, "
                                         f"a {kind} address")


@pytest.mark.parametrize("address", [
    "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
    "2002:c0a8:102::1",  # 6to4 of 192.168.1.2 (private: allowed, as the address itself)
    "2001:0:4136:e378:8000:63bf:a247:27dd",  # Teredo of 93.184.216.34
    "::ffff:10.0.0.1",
])
def test_forms_of_allowed_ipv4_addresses_stay_allowed(address: str) -> None:
    assert refused_address(address) is None


async def test_the_resolver_refuses_a_resolved_embedded_form() -> None:
    resolver = CheckedResolver()
    try:
        with pytest.raises(MediaFetchError, match=r"refused: 2002:a9fe:a9fe::1 is the 6to4 form"):
            await resolver.resolve("2002:a9fe:a9fe::1", 80, socket.AF_INET6)  # no network
    finally:
        await resolver.close()


@pytest.fixture
async def redirector() -> AsyncIterator[int]:
    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://[{request.match_info['ip']}]:80/tone.wav")

    app = web.Application()
    app.router.add_get("/to/{ip}", away)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    await runner.cleanup()


@pytest.mark.parametrize("address", ["2002:a9fe:a9fe::1", "64:ff9b::a9fe:a9fe",
                                     "2001:0:4136:e378:8000:63bf:5601:5601"])
async def test_a_fetch_is_refused_written_or_redirected_to(redirector: int, address: str) -> None:
    fetcher = MediaFetcher(timeout=5)
    try:
        for url in (f"http://[{address}]/tone.wav", f"http://127.0.0.1:{redirector}/to/{address}"):
            with pytest.raises(MediaFetchError, match=f"refused: {address} is the .* form of "
                                                      r"169\.254\.169\.254, a link-local address"):
                await fetcher.fetch(MediaRef(Modality.AUDIO, url))
        assert fetcher.downloads == 2
    finally:
        await fetcher.aclose()
