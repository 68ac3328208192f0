"""Google's endpoints as far as a client can tell them apart from the local BigQuery:
HTTPS and gRPC over TLS, with a certificate the client checks against its roots.

Real BigQuery is the one part of the field with no local stand-in. What a job's clients
do differently against it (a TLS channel with credentials, a proxy's CONNECT, an
``https://`` REST endpoint) is exercised by putting a TLS front before each of the local
BigQuery's two endpoints: it ends TLS with a certificate of a certificate authority made
for the test (the clients are pointed at that authority with
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` and ``REQUESTS_CA_BUNDLE``, as a user behind a
TLS-inspecting corporate proxy points them at theirs) and relays the plain bytes on.
ALPN offers ``h2`` (gRPC insists on it) and ``http/1.1``.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import selectors
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class Authority:
    """A certificate authority's certificate (the clients' root) and a server certificate
    it signed for 127.0.0.1 and localhost."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def make_authority(directory: Path) -> Authority:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "onceover test authority")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(LOCALHOST))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    authority = Authority(directory / "ca.pem", directory / "server.pem", directory / "key.pem")
    authority.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    authority.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    authority.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return authority


class TlsFront:
    """TLS on a port of its own, relayed in plain bytes to ``upstream`` (``host:port``)."""

    def __init__(self, upstream: str, authority: Authority) -> None:
        self.upstream = upstream
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(authority.cert_file, authority.key_file)
        self.context.set_alpn_protocols(["h2", "http/1.1"])
        self.port = 0
        self.connections = 0
        """TLS connections accepted (handshakes completed) so far."""
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._accepting: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"{LOCALHOST}:{self.port}"

    def __enter__(self) -> Self:
        listener = socket.create_server((LOCALHOST, 0))
        listener.settimeout(0.5)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                raw, _ = self._listener.accept()  # type: ignore[union-attr]
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        with contextlib.suppress(OSError), contextlib.closing(raw):
            raw.settimeout(30)
            client = self.context.wrap_socket(raw, server_side=True)
            client.settimeout(None)
            self.connections += 1
            host, port = self.upstream.rsplit(":", 1)
            with contextlib.closing(client), socket.create_connection((host, int(port))) as plain:
                _relay(client, plain, self._stopping)


def _relay(tls: ssl.SSLSocket, plain: socket.socket, stopping: threading.Event) -> None:
    selector = selectors.DefaultSelector()
    selector.register(tls, selectors.EVENT_READ, plain)
    selector.register(plain, selectors.EVENT_READ, tls)
    try:
        while not stopping.is_set():
            ready = selector.select(timeout=0.2)
            if tls.pending() and all(key.fileobj is not tls for key, _ in ready):
                # decrypted bytes held in the TLS layer, which the selector cannot see
                ready.append((selector.get_key(tls), selectors.EVENT_READ))
            for key, _ in ready:
                source, sink = key.fileobj, key.data
                assert isinstance(source, socket.socket)
                data = source.recv(65_536)
                if not data:
                    return
                sink.sendall(data)
    finally:
        selector.close()
