"""Webhooks and server-side request forgery (issue 25): what an endpoint may point at,
which address the sender connects to, and what each role reads back.

The network is fenced: every outgoing connection these tests make goes through
``fence``, which lets through 127.0.0.1 only and records every address asked for, so a
test can say the backend never tried to reach the metadata address. DNS is the one
thing with no local stand-in: ``resolver`` answers the names a test gives it (by
monkeypatching ``socket.getaddrinfo``) and passes every other name to the real one.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.services.webhooks import deliveries
from onceover_backend.services.webhooks.dispatch import Dispatcher
from onceover_backend.services.webhooks.urls import CheckedTransport
from sqlalchemy import Engine
from sqlmodel import Session

from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.helpers.local_http import LocalServer, TrackedHandler
from tests.helpers.webhook_receiver import WebhookReceiver

METADATA = "169.254.169.254"
SECRET_PATH = "/services/T0001/B0002/pathIsTheSecret?token=queryIsTooS3cret"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    settings.webhook_max_attempts = 1  # each test looks at one try; nothing is retried
    settings.webhook_timeout_s = 5
    return settings


# -- the network: DNS answers chosen by the test, connections to 127.0.0.1 only --------


class Resolver:
    """``socket.getaddrinfo`` with chosen answers for some names: the n-th question about
    a name gets its n-th answer (the last one from then on)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.answers: dict[str, list[str]] = {}
        self.asked: list[str] = []

    def __call__(
        self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
        flags: int = 0,
    ) -> Any:  # fmt: skip
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return self.real(host, port, family, type, proto, flags)
        if flags & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        self.asked.append(name)
        answers = self.answers[name]
        address = answers[min(self.asked.count(name), len(answers)) - 1]
        number = int(port or 0)
        if ipaddress.ip_address(address).version == 6:
            return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                     (address, number, 0, 0))]  # fmt: skip
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, number))]


class Fence:
    """``socket.create_connection`` that reaches 127.0.0.1 only, and records every address
    a connection was tried to."""

    def __init__(self, real: Callable[..., socket.socket]) -> None:
        self.real = real
        self.tried: list[str] = []

    def __call__(self, address: tuple[Any, ...], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = address[0], address[1]
        for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            self.tried.append(str(sockaddr[0]))
            if sockaddr[0] != "127.0.0.1":
                raise OSError(f"fenced: the tests connect to 127.0.0.1 only, not {sockaddr[0]}")
            return self.real((sockaddr[0], port), *args, **kwargs)
        raise OSError(f"{host} resolves to nothing")


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    fake = Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


@pytest.fixture
def fence(monkeypatch: pytest.MonkeyPatch, resolver: Resolver) -> Fence:
    fenced = Fence(socket.create_connection)
    monkeypatch.setattr(socket, "create_connection", fenced)
    return fenced


# -- a receiver that answers what it is told, and records where requests went ----------


@dataclass
class Scripted:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # path, headers


class _ScriptedHandler(TrackedHandler):
    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        script: Scripted = self.owner.script
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        script.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        self.send_response(script.status)
        for name, value in script.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(script.body)))
        self.end_headers()
        self.wfile.write(script.body)


class ScriptedReceiver(LocalServer):
    handler = _ScriptedHandler

    def __init__(self, script: Scripted) -> None:
        super().__init__()
        self.script = script


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedReceiver, Scripted]]:
    script = Scripted()
    receiver = ScriptedReceiver(script)
    receiver.up()
    try:
        yield receiver, script
    finally:
        receiver.down()


def _create(client: TestClient, url: str) -> dict[str, Any]:
    response = client.post(
        "/api/webhooks", json={"name": "pager", "url": url}, headers=bearer(OPERATOR)
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _test(client: TestClient, endpoint_id: int) -> dict[str, Any]:
    response = client.post(f"/api/webhooks/{endpoint_id}/test", headers=bearer(OPERATOR))
    assert response.status_code == 200, response.text
    delivery: dict[str, Any] = response.json()
    return delivery


def _read_deliveries(client: TestClient, endpoint_id: int, token: str) -> Any:
    response = client.get(f"/api/webhooks/{endpoint_id}/deliveries", headers=bearer(token))
    assert response.status_code == 200, response.text
    return response


# -- refused when saved --------------------------------------------------------------


TRANSLATED_URLS = (
    "http://[::169.254.169.254]/",  # IPv4-compatible
    "http://[::ffff:0:169.254.169.254]/",  # IPv4-translated (SIIT)
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64, the well-known prefix
    "http://[64:ff9b::100.100.100.200]/",  # NAT64 of Alibaba Cloud's metadata
    "http://[64:ff9b:1::a9fe:a9fe]/",  # NAT64 local-use prefix, a /96 in it
    "http://[64:ff9b:1:a9fe:a9:fe00::]/",  # NAT64 local-use prefix as a /48
    "http://[2002:a9fe:a9fe::1]/",  # 6to4
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",  # Teredo (client 169.254.169.254)
    "http://2852039166/",  # one decimal number
    "http://0xa9fea9fe/",  # one hex number
    "http://0xa9.0xfe.0xa9.0xfe/",  # hex parts
    "http://0251.0376.0251.0376/",  # octal parts
    "http://169.254.43518/",  # a.b.c, c of 16 bits
)


def test_translated_and_numeric_forms_of_the_metadata_address_are_refused_when_saved(
    client: TestClient,
) -> None:
    for url in TRANSLATED_URLS:  # one app for all: each form is a request, not a setup
        response = client.post(
            "/api/webhooks", json={"name": "x", "url": url}, headers=bearer(OPERATOR)
        )

        assert response.status_code == 422, (url, response.text)
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "url"]
        assert "link-local or cloud metadata" in detail["msg"], url
    assert client.get("/api/webhooks", headers=bearer(VIEWER)).json()["count"] == 0


def test_an_allowed_network_is_allowed_behind_a_translation_too(
    settings: Settings, client: TestClient
) -> None:
    settings.webhook_allowed_networks = ["169.254.0.0/16"]
    _create(client, "http://[64:ff9b::a9fe:a0a]/hook")  # NAT64 of 169.254.10.10


# -- refused when connecting -----------------------------------------------------------


TRANSLATED_ADDRESSES = (
    "64:ff9b::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
    "::a9fe:a9fe",
    "2001:0:4136:e378:8000:63bf:5601:5601",
    "64:ff9b:1::a9fe:a9fe",
)


def test_a_name_that_resolves_to_a_translated_metadata_address_is_never_connected_to(
    client: TestClient, resolver: Resolver, fence: Fence
) -> None:
    endpoint = _create(client, "http://hooks.example.test:8080/hook")  # names are not resolved
    for address in TRANSLATED_ADDRESSES:
        resolver.answers["hooks.example.test"] = [address]

        delivery = _test(client, endpoint["id"])

        assert delivery["status"] == "failed", address
        [attempt] = delivery["attempts"]
        assert attempt["status_code"] is None
        assert attempt["error"].startswith("refused: hooks.example.test resolves to "), attempt
    assert fence.tried == []


def test_the_request_goes_to_the_address_that_was_checked(
    client: TestClient, hook: WebhookReceiver, resolver: Resolver, fence: Fence
) -> None:
    # DNS rebinding: the first answer passes the check, the next is the metadata address.
    resolver.answers["rebind.example.test"] = ["127.0.0.1", METADATA]
    endpoint = _create(client, f"http://rebind.example.test:{hook.port}/hook")
    hook.secret = endpoint["secret"]

    delivery = _test(client, endpoint["id"])

    assert delivery["status"] == "succeeded", delivery
    [got] = hook.wait_for(1)
    assert got.verified
    assert got.headers["host"] == f"rebind.example.test:{hook.port}"
    assert fence.tried == ["127.0.0.1"]
    assert resolver.asked == ["rebind.example.test"]  # resolved once: checked, then used


def test_a_redirect_to_the_metadata_address_is_not_followed(
    client: TestClient, scripted: tuple[ScriptedReceiver, Scripted], fence: Fence
) -> None:
    receiver, script = scripted
    script.status = 307
    script.headers = {"Location": f"http://{METADATA}/latest/meta-data/iam/"}
    endpoint = _create(client, f"http://127.0.0.1:{receiver.port}/hook")

    delivery = _test(client, endpoint["id"])

    assert delivery["status"] == "failed"
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] == 307
    assert attempt["error"].startswith("redirected: "), attempt
    assert "not followed" in attempt["error"]
    assert fence.tried == ["127.0.0.1"]
    assert [path for path, _ in script.seen] == ["/hook"]


# -- https: connected by address, verified by name -------------------------------------


def _tls(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for ``name`` from a fresh CA, and a client
    context that trusts that CA only."""
    now = dt.datetime.now(dt.UTC)

    def certificate(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey, ca: bool,
    ) -> x509.Certificate:  # fmt: skip
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                              content_commitment=False, key_encipherment=False,
                              data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False),
                critical=True,
            )  # fmt: skip
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Onceover test CA")])
    ca = certificate("Onceover test CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = certificate(name, key, ca_name, ca_key, ca=False)
    pem = tmp_path / "server.pem"
    pem.write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pem)
    client = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


class TLSReceiver(WebhookReceiver):
    """:class:`WebhookReceiver` over TLS; records the SNI name of every handshake."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.names: list[str | None] = []
        context.sni_callback = lambda _sock, name, _ctx: self.names.append(name)
        self.context = context

    def up(self) -> None:
        super().up()
        assert self._server is not None
        plain = self._server.get_request
        context = self.context

        def get_request() -> tuple[socket.socket, Any]:
            sock, address = plain()
            return context.wrap_socket(sock, server_side=True), address

        self._server.get_request = get_request  # type: ignore[method-assign]


@pytest.fixture
def tls_hook(tmp_path: Path) -> Iterator[tuple[TLSReceiver, ssl.SSLContext]]:
    server, client = _tls(tmp_path, "hooks.example.test")
    receiver = TLSReceiver(server)
    receiver.up()
    try:
        yield receiver, client
    finally:
        receiver.down()


def test_https_connects_to_the_checked_address_and_verifies_the_name(
    client: TestClient, engine: Engine, settings: Settings, resolver: Resolver, fence: Fence,
    tls_hook: tuple[TLSReceiver, ssl.SSLContext],
) -> None:  # fmt: skip
    receiver, trust = tls_hook
    resolver.answers["hooks.example.test"] = ["127.0.0.1", METADATA]
    resolver.answers["other.example.test"] = ["127.0.0.1"]
    good = _create(client, f"https://hooks.example.test:{receiver.port}/hook")
    wrong_name = _create(client, f"https://other.example.test:{receiver.port}/hook")
    receiver.secret = good["secret"]
    dispatcher = Dispatcher(engine, settings, transport=CheckedTransport(lambda: [], trust))
    try:
        made = deliveries.create_test(engine, good["id"], "http://dashboard.example")
        assert dispatcher.run_once(made) == ["succeeded"]
        refused = deliveries.create_test(engine, wrong_name["id"], "http://dashboard.example")
        assert dispatcher.run_once(refused) == ["failed"]
    finally:
        dispatcher.close()

    [got] = receiver.wait_for(1)
    assert got.verified
    assert got.headers["host"] == f"hooks.example.test:{receiver.port}"
    assert receiver.names[0] == "hooks.example.test"  # SNI: the name, not the address
    assert fence.tried == ["127.0.0.1", "127.0.0.1"]
    with Session(engine) as session:
        failed = deliveries.get_delivery(session, wrong_name["id"], refused, answers=True)
    assert failed.last_error is not None
    assert "CERTIFICATE_VERIFY_FAILED" in failed.last_error  # the certificate is for another name


# -- what each role reads --------------------------------------------------------------


def test_what_a_receiver_answered_is_shown_to_operators_only(
    client: TestClient, scripted: tuple[ScriptedReceiver, Scripted], resolver: Resolver,
    fence: Fence,
) -> None:  # fmt: skip
    receiver, script = scripted
    script.status, script.body = 500, b'{"AccessKeyId": "ASIAINTERNAL", "Token": "s3cr3t"}'
    answered = _create(client, f"http://127.0.0.1:{receiver.port}/hook")
    resolver.answers["internal.example.test"] = [METADATA]
    refused = _create(client, "http://internal.example.test/hook")
    _test(client, answered["id"])
    _test(client, refused["id"])

    as_operator = _read_deliveries(client, answered["id"], OPERATOR).json()["data"][0]
    as_viewer = _read_deliveries(client, answered["id"], VIEWER)
    [attempt] = as_viewer.json()["data"][0]["attempts"]

    assert as_operator["attempts"][0]["response"] == script.body.decode()
    assert (attempt["status_code"], attempt["error"], attempt["response"]) == (
        500, "HTTP 500", None
    )  # fmt: skip
    assert "ASIAINTERNAL" not in as_viewer.text
    assert "s3cr3t" not in as_viewer.text

    operator_refused = _read_deliveries(client, refused["id"], OPERATOR).json()["data"][0]
    viewer_refused = _read_deliveries(client, refused["id"], VIEWER)
    assert METADATA in operator_refused["attempts"][0]["error"]
    assert METADATA in operator_refused["last_error"]
    shown = viewer_refused.json()["data"][0]
    assert (shown["attempts"][0]["error"], shown["last_error"]) == ("refused", "refused")
    assert METADATA not in viewer_refused.text


def test_a_webhook_url_is_shown_whole_only_in_the_answer_that_creates_it(
    client: TestClient, scripted: tuple[ScriptedReceiver, Scripted]
) -> None:
    receiver, script = scripted
    url = f"http://127.0.0.1:{receiver.port}{SECRET_PATH}"
    masked = f"http://127.0.0.1:{receiver.port}/…"

    created = _create(client, url)

    assert created["url"] == url
    endpoint = f"/api/webhooks/{created['id']}"
    answers = [
        client.patch(endpoint, json={"name": "renamed"}, headers=bearer(OPERATOR)),
        client.post(f"{endpoint}/rotate-secret", headers=bearer(OPERATOR)),
        *(client.get(path, headers=bearer(token))
          for path in ("/api/webhooks", endpoint) for token in (VIEWER, OPERATOR)),
    ]  # fmt: skip
    for answer in answers:
        assert answer.status_code == 200, answer.text
        shown = answer.json()
        assert (shown["data"][0] if "data" in shown else shown)["url"] == masked
        assert "pathIsTheSecret" not in answer.text
        assert "queryIsTooS3cret" not in answer.text

    # The mask is not a URL to send to; the deliveries still go to the whole one.
    put_back = client.patch(endpoint, json={"url": masked}, headers=bearer(OPERATOR))
    assert put_back.status_code == 422, put_back.text
    assert put_back.json()["detail"][0]["loc"] == ["body", "url"]
    assert _test(client, created["id"])["status"] == "succeeded"
    assert [path for path, _ in script.seen] == [SECRET_PATH]

    # A refused URL is not echoed whole either: that answer is kept in the audit log.
    refused = client.post(
        "/api/webhooks", json={"name": "x", "url": f"http://[64:ff9b::a9fe:a9fe]{SECRET_PATH}"},
        headers=bearer(OPERATOR),
    )  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["input"] == "http://[64:ff9b::a9fe:a9fe]/…"
    # Nor in a body FastAPI itself refuses (no name), echoed by its 422.
    unnamed = client.post("/api/webhooks", json={"url": url}, headers=bearer(OPERATOR))
    assert unnamed.status_code == 422
    assert unnamed.json()["detail"][0]["input"]["url"] == masked
    audit = client.get("/api/audit", params={"limit": 500}, headers=bearer(OPERATOR))
    assert audit.status_code == 200, audit.text
    assert "createWebhook" in audit.text
    assert "pathIsTheSecret" not in audit.text
