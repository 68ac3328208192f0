"""Which URLs a webhook may be sent to.

http and https only, with a host. Link-local addresses and the clouds' instance metadata
services are refused: a webhook pointed there would hand whoever can create endpoints
the machine's credentials (server-side request forgery). The check runs when an
endpoint is saved (literal addresses and known metadata names) and again before every
request (what the name resolves to then). ``webhook_allowed_networks`` lets a network
through on purpose.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

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


class RefusedURLError(ValueError):
    """The URL may not receive webhooks; the message says why."""


def parse_networks(cidrs: Iterable[str]) -> list[IPNetwork]:
    return [ipaddress.ip_network(cidr, strict=False) for cidr in cidrs]


def _refused_address(address: IPAddress, allowed: list[IPNetwork]) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return False
    return any(address in network for network in REFUSED_NETWORKS)


def check_url(url: str, allowed: list[IPNetwork]) -> str:
    """The host of ``url`` if it may receive webhooks; :class:`RefusedURLError` if not."""
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
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None and _refused_address(literal, allowed):
        raise RefusedURLError(f"{host} is a link-local or cloud metadata address")
    return host


def check_resolved(url: str, allowed: list[IPNetwork]) -> None:
    """:func:`check_url`, and every address the host resolves to now."""
    host = check_url(url, allowed)
    port = urlsplit(url).port or 443
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise RefusedURLError(f"cannot resolve {host}: {exc}") from None
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if _refused_address(address, allowed):
            raise RefusedURLError(f"{host} resolves to {address}, a link-local or metadata address")
