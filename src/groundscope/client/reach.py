"""Whether an endpoint answers at all, asked once before a run starts (no request is sent).

A wrong port, a misspelt host or a TLS mismatch would otherwise surface as every sample's
connection error, retried for seconds each. :func:`check_reachable` resolves the host, opens
a TCP connection and, for ``https``, completes the TLS handshake, then closes it: one line
naming ``host:port`` and what happened (refused, DNS, TLS, timeout), raised as a
:class:`~groundscope.errors.ConfigError` before a run directory exists. Synchronous and
bounded by ``timeout``; it reads no environment proxy (the client uses none either).
"""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit

from groundscope.errors import ConfigError
from groundscope.redaction import redact_url

DEFAULT_TIMEOUT_S = 5.0


def host_port(url: str) -> tuple[str, int]:
    """The host and port a URL connects to (the scheme's port when none is given).

    >>> host_port("https://api.example.com/v1")
    ('api.example.com', 443)
    >>> host_port("http://user:pw@[::1]:8000/v1")
    ('::1', 8000)
    """
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname or "", port or default


def check_reachable(url: str, where: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
    """Connect to ``url``'s host and port (and shake hands for ``https``), then hang up;
    a ConfigError ``where: cannot reach host:port (...)`` if that fails."""
    host, port = host_port(url)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    at = f"{where}: cannot reach {shown} ({redact_url(url)})"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{at}: DNS: the host name does not resolve ({_reason(exc)})") from None
    sock, failed = None, None
    for address in dict.fromkeys(a[4][:2] for a in addresses):
        # every address the name resolves to, as the client's connector tries them: a server
        # listening on 127.0.0.1 only is reached as ``localhost`` though ::1 comes first
        try:
            sock = socket.create_connection(address, timeout=timeout)
            break
        except OSError as exc:
            failed = failed if isinstance(failed, ConnectionRefusedError) else exc
    if sock is None:
        if isinstance(failed, ConnectionRefusedError):
            raise ConfigError(f"{at}: connection refused: nothing is listening on port {port} "
                              "(is the server up, the port right?)")
        if isinstance(failed, TimeoutError):
            raise ConfigError(f"{at}: no answer to a connection within {timeout:g}s")
        raise ConfigError(f"{at}: {_reason(failed or OSError('no address'))}")
    with sock:
        if urlsplit(url.strip()).scheme != "https":
            return
        try:
            with ssl.create_default_context().wrap_socket(sock, server_hostname=host):
                pass
        except ssl.SSLCertVerificationError as exc:
            raise ConfigError(f"{at}: TLS: the certificate is not trusted "
                              f"({exc.verify_message})") from None
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"{at}: TLS handshake failed ({_reason(exc)}); is it an http:// "
                              "server?") from None


def _reason(exc: BaseException) -> str:
    """The OS's words for a socket error, on one line, bounded."""
    text = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
    return " ".join(str(text).split())[:200]
