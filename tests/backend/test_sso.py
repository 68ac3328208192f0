"""Single sign-on, the backend's side: the authorization code flow with PKCE against an
identity provider that misbehaves on demand (in process, with keys of its own: a real
provider will not sign a wrong nonce, issuer, audience or an expired token, which is
what is checked here; tests/browser/test_sso.py signs in through a real one). Each
refusal is answered with a page naming what failed and audited; the session cookie's
attributes, CSRF on cookie writes, sign-out, bearer tokens beside it."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.services.access.sso import SESSION_COOKIE, SingleSignOn
from onceover_backend.tables import AuditLog
from pydantic import SecretStr, ValidationError
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from tests.backend.conftest import OPERATOR, VIEWER, bearer

ISSUER = "https://idp.example"
CLIENT = "onceover"
SECRET = "client-secret-0123456789"
OTTO = {"sub": "u-otto", "email": "otto@example.com", "groups": ["data-operators"]}
VERA = {"sub": "u-vera", "email": "vera@example.com", "groups": ["data-viewers"]}


class Provider:
    """An identity provider's three endpoints; ``tamper`` changes the next ID token."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.codes: dict[str, dict[str, Any]] = {}  # code -> the authorization request
        self.person: dict[str, Any] = OTTO
        self.tamper: dict[str, Any] = {}
        self.token_requests: list[dict[str, list[str]]] = []

    def authorize(self, url: str, code: str = "code-1") -> dict[str, str]:
        """What the provider does with the authorization URL: a code for that request,
        and the query it sends the browser back with."""
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        self.codes[code] = query
        return {"code": code, "state": query["state"]}

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json={
                "issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize",
                "token_endpoint": f"{ISSUER}/token", "jwks_uri": f"{ISSUER}/jwks",
            })  # fmt: skip
        if request.url.path == "/jwks":
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
            return httpx.Response(200, json={"keys": [{**public, "kid": "k1", "use": "sig"}]})
        assert request.url.path == "/token"
        form = parse_qs(request.content.decode())
        self.token_requests.append(form)
        asked = self.codes.get(form["code"][0])
        if asked is None:
            return httpx.Response(400, json={"error": "invalid_grant"})
        # PKCE: the verifier must answer the challenge the authorization request sent.
        verifier = form["code_verifier"][0].encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if challenge.decode() != asked["code_challenge"]:
            return httpx.Response(400, json={"error": "invalid_grant", "error_description": "PKCE"})
        now = int(time.time())
        claims = {**self.person, "iss": ISSUER, "aud": CLIENT, "iat": now, "exp": now + 300,
                  "nonce": asked["nonce"], **self.tamper}  # fmt: skip
        token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})
        answer = {"id_token": token, "access_token": "a", "token_type": "Bearer"}
        return httpx.Response(200, json=answer)


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={
        "oidc_issuer": ISSUER, "oidc_client_id": CLIENT,
        "oidc_client_secret": SecretStr(SECRET),
        "oidc_roles": "data-viewers:viewer,data-operators:operator",
        "oidc_provider_name": "Example IdP", "public_url": "https://onceover.example",
    })  # fmt: skip


@pytest.fixture
def app(app: FastAPI, engine: Engine, settings: Settings, provider: Provider) -> FastAPI:
    app.state.sso = SingleSignOn(
        app.state.engine,
        settings,
        http=httpx.Client(transport=httpx.MockTransport(provider.handle)),
    )
    return app


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    """The dashboard's browser: https, so the Secure cookie is kept and sent."""
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        yield client


def sign_in(browser: TestClient, provider: Provider, next_path: str = "/runs") -> Any:
    started = browser.get("/auth/login", params={"next": next_path})
    assert started.status_code == 302, started.text
    return browser.get("/auth/callback", params=provider.authorize(started.headers["location"]))


def audited(engine: Engine, action: str) -> list[AuditLog]:
    with Session(engine) as session:
        return list(session.exec(
            select(AuditLog).where(AuditLog.action == action).order_by(col(AuditLog.id))
        ))  # fmt: skip


def test_the_sign_in_is_a_code_flow_with_pkce_and_ends_in_a_secure_session(
    browser: TestClient, provider: Provider, engine: Engine
) -> None:
    assert browser.get("/auth/config").json() == {
        "sso": True, "provider": "Example IdP", "login_path": "/auth/login"
    }  # fmt: skip
    started = browser.get("/auth/login", params={"next": "/runs/r1"})
    asked = parse_qs(urlparse(started.headers["location"]).query)
    assert started.headers["location"].startswith(f"{ISSUER}/authorize?")
    assert asked["response_type"] == ["code"]
    assert asked["client_id"] == [CLIENT]
    assert asked["redirect_uri"] == ["https://onceover.example/auth/callback"]
    assert asked["code_challenge_method"] == ["S256"]
    assert asked["scope"] == ["openid email profile"]

    back = browser.get("/auth/callback", params=provider.authorize(started.headers["location"]))
    assert back.status_code == 302, back.text
    assert back.headers["location"] == "/runs/r1"
    cookie = back.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=lax", "Path=/"):
        assert attribute.lower() in cookie.lower(), cookie
    # The client authenticated with its secret; the verifier went along (checked above).
    assert provider.token_requests[0]["code_verifier"]

    me = browser.get("/api/session").json()
    assert (me["name"], me["role"], me["signed_in_with"]) == (
        "sso:otto@example.com", "operator", "sso"
    )  # fmt: skip
    assert me["csrf_token"]
    [entry] = audited(engine, "ssoSignIn")
    assert (entry.actor, entry.subject, entry.role, entry.outcome) == (
        "sso:otto@example.com", "u-otto", "operator", "ok"
    )  # fmt: skip


def test_a_cookie_write_needs_the_sessions_csrf_token_and_names_the_person(
    browser: TestClient, provider: Provider, engine: Engine
) -> None:
    sign_in(browser, provider)
    csrf = browser.get("/api/session").json()["csrf_token"]
    rule = {"name": "failed runs", "kind": "run_failed"}

    refused = browser.post("/api/alert-rules", json=rule)
    wrong = browser.post("/api/alert-rules", json=rule, headers={"X-CSRF-Token": "guess"})
    made = browser.post("/api/alert-rules", json=rule, headers={"X-CSRF-Token": csrf})

    assert refused.status_code == 403
    assert "X-CSRF-Token" in refused.json()["detail"]
    assert wrong.status_code == 403
    assert made.status_code == 201, made.text
    with Session(engine) as session:
        entries = session.exec(select(AuditLog).where(AuditLog.path == "/api/alert-rules")).all()
    assert [(e.status_code, e.actor, e.subject) for e in entries] == [
        (403, "anonymous", None), (403, "anonymous", None),
        (201, "sso:otto@example.com", "u-otto"),
    ]  # fmt: skip


def test_a_viewer_is_refused_an_operator_action_and_bearer_tokens_still_work(
    browser: TestClient, provider: Provider, client: TestClient
) -> None:
    provider.person = VERA
    sign_in(browser, provider)
    csrf = browser.get("/api/session").json()["csrf_token"]
    resume = browser.post("/api/runs/r1/resume", headers={"X-CSRF-Token": csrf})
    assert resume.status_code == 403
    assert "operator" in resume.json()["detail"]
    assert client.get("/api/runs", headers=bearer(VIEWER)).status_code == 200
    # A token wins over a cookie: a script's calls are the token's, whatever the jar holds.
    assert browser.get("/api/session", headers=bearer(OPERATOR)).json()["name"] == "env:operator"


def test_signing_out_ends_the_session_for_good(
    browser: TestClient, provider: Provider, engine: Engine
) -> None:
    sign_in(browser, provider)
    session_cookie = browser.cookies[SESSION_COOKIE]
    csrf = browser.get("/api/session").json()["csrf_token"]

    assert browser.post("/auth/logout").status_code == 403  # no CSRF token
    out = browser.post("/auth/logout", headers={"X-CSRF-Token": csrf})

    assert out.status_code == 204
    assert SESSION_COOKIE not in browser.cookies
    # The old cookie, shown again, opens nothing.
    browser.cookies.set(SESSION_COOKIE, session_cookie, domain="testserver.local")
    again = browser.get("/api/session")
    assert again.status_code == 401
    assert "sign in again" in again.json()["detail"]
    [entry] = audited(engine, "ssoSignOut")
    assert (entry.actor, entry.subject) == ("sso:otto@example.com", "u-otto")


@pytest.mark.parametrize(
    ("case", "reason", "status", "says"),
    [
        ("nonce", "nonce", 400, "nonce differs"),
        ("issuer", "issuer", 400, "not issued by"),
        ("audience", "audience", 400, "not made for this dashboard"),
        ("azp", "audience", 400, "several audiences"),
        ("expired", "expired", 400, "expired"),
        ("signature", "token", 400, "not valid"),
        ("group", "role", 403, "no value of their &#x27;groups&#x27; claim (marketing)"),
    ],
)
def test_each_refusal_is_a_page_saying_what_failed_and_is_audited(
    browser: TestClient, provider: Provider, engine: Engine,
    case: str, reason: str, status: int, says: str,
) -> None:  # fmt: skip
    now = int(time.time())
    tampered: dict[str, dict[str, Any]] = {
        "nonce": {"nonce": "another-sign-in"},
        "issuer": {"iss": "https://attacker.example"},
        "audience": {"aud": "another-client"},
        "azp": {"aud": [CLIENT, "another-client"], "azp": "another-client"},
        "expired": {"iat": now - 3600, "exp": now - 600},
        "signature": {},
        "group": {"groups": ["marketing"]},
    }
    provider.tamper = tampered[case]
    if case == "signature":  # signed by a key the provider never published
        provider.key, published = rsa.generate_private_key(65537, 2048), provider.key
        handle = provider.handle

        def keys_of_old(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/jwks":
                public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(published.public_key()))
                return httpx.Response(200, json={"keys": [{**public, "kid": "k1"}]})
            return handle(request)

        browser.app.state.sso._http = httpx.Client(transport=httpx.MockTransport(keys_of_old))  # type: ignore[attr-defined]

    answer = sign_in(browser, provider)

    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert f'data-reason="{reason}"' in answer.text
    assert says in answer.text
    assert 'href="/auth/login"' in answer.text  # what to do: sign in again
    assert SESSION_COOKIE not in browser.cookies
    [entry] = audited(engine, "ssoSignIn")
    assert entry.outcome.startswith(f"refused ({reason})")
    assert entry.status_code == status
    if case == "group":
        assert entry.actor == "sso:otto@example.com"


def test_a_state_is_taken_once_and_a_provider_error_is_shown(
    browser: TestClient, provider: Provider, engine: Engine
) -> None:
    started = browser.get("/auth/login")
    back = provider.authorize(started.headers["location"])
    assert browser.get("/auth/callback", params=back).status_code == 302
    browser.cookies.clear()
    replayed = browser.get("/auth/callback", params=back)
    unknown = browser.get("/auth/callback", params={"code": "x", "state": "made-up"})
    said_no = browser.get(
        "/auth/callback", params={"error": "access_denied", "error_description": "user said no"}
    )
    for answer in (replayed, unknown):
        assert answer.status_code == 400
        assert 'data-reason="state"' in answer.text
    assert said_no.status_code == 400
    assert "user said no" in said_no.text
    assert [e.outcome.split(":")[0] for e in audited(engine, "ssoSignIn")] == [
        "ok", "refused (state)", "refused (state)", "refused (provider)"
    ]  # fmt: skip


def test_next_never_leaves_the_dashboard(browser: TestClient, provider: Provider) -> None:
    for given in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        assert sign_in(browser, provider, given).headers["location"] == "/"


def test_the_settings_say_what_single_sign_on_needs(settings: Settings) -> None:
    with pytest.raises(ValidationError, match="ONCEOVER_OIDC_CLIENT_ID and ONCEOVER_OIDC_ROLES"):
        Settings(oidc_issuer=ISSUER, oidc_client_id=CLIENT)
    with pytest.raises(ValidationError, match="pair 2 has role 'ingest'"):
        Settings(oidc_issuer=ISSUER, oidc_client_id=CLIENT, oidc_roles="a:viewer,b:ingest")
    assert Settings(oidc_roles="urn:team:ops:operator").oidc_role_map() == {
        "urn:team:ops": "operator"
    }


def test_an_email_the_provider_has_not_verified_does_not_name_the_person(
    browser: TestClient, provider: Provider, engine: Engine
) -> None:
    """Some providers let a person type any e-mail: unverified, it names nobody; the
    subject does."""
    provider.tamper = {"email": "ceo@example.com", "email_verified": False}
    sign_in(browser, provider)
    assert browser.get("/api/session").json()["name"] == "sso:u-otto"
    [entry] = audited(engine, "ssoSignIn")
    assert (entry.actor, entry.subject) == ("sso:u-otto", "u-otto")
