"""Where a webhook may be sent, and connecting only there.

http and https only, with a host. Link-local addresses and the clouds' instance metadata
services are refused: a webhook pointed there would hand whoever can create endpoints
the machine's credentials (server-side request forgery). An IPv6 address that stands
for an IPv4 one (mapped, compatible, NAT64, 6to4, Teredo) is judged by the IPv4 address
too, and a host written as a number in another base (``2852039166``, ``0xa9.0xfe.0xa9.0xfe``)
by the address the resolver makes of it. ``webhook_allowed_networks`` lets a network
through on purpose.

The check runs when an endpoint is saved (:func:`check_url`: the scheme, known metadata
names, literal addresses) and at every connection (:class:`CheckedTransport`): the host
is resolved once, every address it resolves to is checked, and the connection is made
to a checked address, so a name that answers differently a moment later (DNS
rebinding) cannot lead it elsewhere. TLS still verifies the certificate against the
URL's host name and sends it as SNI, and the Host header is the URL's.

Webhook URLs often carry their secret in the path (a Slack incoming webhook's does):
:func:`redacted` is how they are shown after the answer that creates them.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "169.254.0.0/16",  # IPv4 link-local; AWS, GCP and Azure metadata at 169.254.169.254
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "192.0.0.192/32",  # Oracle Cloud metadata
    )
)
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
     "instance-data.ec2.internal"}
)  # fmt: skip

_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated, still routed by some stacks
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT (RFC 2765)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix (RFC 6052)
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use (RFC 8215)
# Where RFC 6052 puts the IPv4 address for a prefix of each length, counted in the
# address without its bits 64..71 (which must be zero): /96 is the last 32 bits.
_NAT64_LOCAL_OFFSETS = (48, 56, 64, 88)
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
REDACTED_PATH = "/…"


class RefusedURLError(ValueError):
    """The URL (or what its host resolves to) may not receive webhooks; the message says
    why."""


def parse_networks(cidrs: Iterable[str]) -> list[IPNetwork]:
    return [ipaddress.ip_network(cidr, strict=False) for cidr in cidrs]


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches through a mapping or translation."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    value = int(address)
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE or address in _IPV4_TRANSLATED or address in _NAT64:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if address in _NAT64_LOCAL:
        squeezed = ((value >> 64) << 56) | (value & ((1 << 56) - 1))
        found += [
            ipaddress.IPv4Address((squeezed >> (120 - offset - 32)) & 0xFFFFFFFF)
            for offset in _NAT64_LOCAL_OFFSETS
        ]
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.append(address.teredo[1])  # the client's address (the server is a relay)
    return found


def refused_address(address: IPAddress, allowed: list[IPNetwork]) -> bool:
    """Whether ``address``, or an IPv4 address it stands for, is link-local or a metadata
    service, and not in an ``allowed`` network."""
    if any(address in network for network in allowed):
        return False
    return any(
        any(form in network for network in REFUSED_NETWORKS)
        and not any(form in network for network in allowed)
        for form in (address, *embedded_ipv4(address))
    )


def _literal(host: str) -> IPAddress | None:
    """The address ``host`` is written as, if it is one: in the usual notation, or in
    any other the resolver reads without asking DNS (``2852039166``, ``0xa9fea9fe``,
    ``0251.0376.0251.0376``, ``169.254.43518``)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not _NUMERIC_HOST.fullmatch(host.lower()):
        return None
    try:
        infos = socket.getaddrinfo(
            host, None, family=socket.AF_INET, type=socket.SOCK_STREAM,
            flags=socket.AI_NUMERICHOST,
        )  # fmt: skip
    except (OSError, UnicodeError):
        return None
    return ipaddress.ip_address(infos[0][4][0]) if infos else None


def check_url(url: str, allowed: list[IPNetwork]) -> str:
    """The host of ``url`` if it may receive webhooks; :class:`RefusedURLError` if not.

    Asks no DNS server: a host name is checked by what it resolves to when a request
    connects (:class:`CheckedTransport`)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError as exc:
        raise RefusedURLError(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise RefusedURLError("only http and https URLs receive webhooks")
    if not host:
        raise RefusedURLError("the URL has no host")
    if parts.username or parts.password:
        raise RefusedURLError("credentials in the URL are not allowed; use the signature")
    if host.rstrip(".").lower() in METADATA_HOSTS:
        raise RefusedURLError(f"{host} is a cloud metadata service")
    literal = _literal(host.split("%")[0])
    if literal is not None and refused_address(literal, allowed):
        shown = host if str(literal) == host else f"{host} ({literal})"
        raise RefusedURLError(f"{shown} is a link-local or cloud metadata address")
    return host


def checked_addresses(host: str, port: int, allowed: list[IPNetwork]) -> list[str]:
    """What ``host`` resolves to now, each address once, in the resolver's order;
    :class:`RefusedURLError` if any of them is refused (a name that answers one refused
    address is not trusted with the others), ``OSError`` if it does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses = list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in infos))
    for address in addresses:
        parsed = ipaddress.ip_address(address.split("%")[0])
        if refused_address(parsed, allowed):
            raise RefusedURLError(
                f"{host} resolves to {parsed}, a link-local or cloud metadata address"
            )
    return addresses


class CheckedBackend(httpcore.SyncBackend):
    """Opens TCP connections only to addresses :func:`checked_addresses` let through,
    resolving each host once per connection."""

    def __init__(self, allowed: Callable[[], list[IPNetwork]]) -> None:
        self._allowed = allowed

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = checked_addresses(host, port, self._allowed())
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        deadline = None if timeout is None else time.monotonic() + timeout
        failure: Exception = httpcore.ConnectError(f"{host} resolves to no address")
        for address in addresses:  # in turn, as socket.create_connection would
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise httpcore.ConnectTimeout(f"timed out connecting to {host}")
            try:
                return super().connect_tcp(address, port, left, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure


class CheckedTransport(httpx.HTTPTransport):
    """httpx's transport, connecting through :class:`CheckedBackend`.

    A refused address raises :class:`RefusedURLError` out of the request. Proxies from
    the environment are not used (a proxy would resolve the host itself)."""

    def __init__(
        self, allowed: Callable[[], list[IPNetwork]], verify: ssl.SSLContext | bool = True
    ) -> None:
        super().__init__(verify=verify)
        # httpx takes no network backend; the pool it made is replaced by one with ours.
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=5.0,
            network_backend=CheckedBackend(allowed),
        )


def redacted(url: str) -> str:
    """``url`` as anyone may see it: scheme, host and port, with the path and query
    masked (``https://hooks.slack.com/…``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "…"
    netloc = parts.netloc.rpartition("@")[2]
    if parts.path in ("", "/") and not parts.query and not parts.fragment:
        return f"{parts.scheme}://{netloc}/"
    return f"{parts.scheme}://{netloc}{REDACTED_PATH}"


def is_redacted(url: str) -> bool:
    """Whether ``url`` is what :func:`redacted` shows in place of a longer one."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.path == REDACTED_PATH and not parts.query and not parts.fragment
