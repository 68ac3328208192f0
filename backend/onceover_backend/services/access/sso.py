"""Single sign-on for the dashboard: OpenID Connect's authorization code flow with PKCE.

:meth:`SingleSignOn.begin` keeps a sign-in's state, nonce and PKCE verifier in the
database (any replica may take the callback) and sends the browser to the provider;
:meth:`SingleSignOn.complete` takes the callback: the state found once and fresh, the
code exchanged for an ID token, whose signature (the provider's published keys), issuer,
audience, expiry and nonce are checked, then the person's role from a claim's values
(``ONCEOVER_OIDC_ROLES``). The session that follows is a row whose secret only the
browser's cookie holds (a SHA-256 is kept), so signing out or expiry ends it for good.

Every call to the provider goes through one ``httpx.Client``: the discovery document and
the keys are read once and again when a token names a key not yet seen (a rotation).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
from sqlalchemy import Engine, delete
from sqlmodel import Session, col, select

from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.core.security import Principal, hash_token
from onceover_backend.errors import SignInRefusedError
from onceover_backend.tables import SsoLogin, SsoSession, utcnow

SIGN_IN_WITHIN = timedelta(minutes=10)
"""From leaving for the provider to coming back: past it, the sign-in starts again."""
CLOCK_SKEW_S = 60
"""Leeway for the provider's clock in ``exp``, ``iat`` and ``nbf``."""
ROLE_ORDER = ("viewer", "operator")  # the highest a person's values map to wins
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
SESSION_COOKIE = "onceover_session"
CALLBACK_PATH = "/auth/callback"


class _NoAuth(httpx.Auth):
    pass


_NO_AUTH = _NoAuth()


@dataclass(frozen=True)
class SignedIn:
    session: SsoSession
    cookie: str  # the session's secret, for the browser's cookie only
    next_path: str


def _pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def safe_next(path: str | None) -> str:
    """Where to land after signing in: a path of this dashboard, never another site's."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


class SingleSignOn:
    def __init__(self, engine: Engine, settings: Settings, http: httpx.Client | None = None):
        self.engine = engine
        self.settings = settings
        self._http = http or httpx.Client(timeout=10.0, follow_redirects=False)
        self._lock = threading.Lock()
        self._discovery: dict[str, Any] | None = None
        self._keys: jwt.PyJWKSet | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.settings.oidc_issuer)

    def redirect_uri(self) -> str:
        return self.settings.dashboard_url() + CALLBACK_PATH

    def close(self) -> None:
        self._http.close()

    # -- to the provider ----------------------------------------------------------------

    def begin(self, next_path: str | None) -> str:
        """Record a sign-in and answer the provider's authorization URL to send the
        browser to."""
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(64)
        endpoint = str(self._configuration()["authorization_endpoint"])
        with write_transaction(self.engine) as session:
            # Sign-ins never finished are dropped as new ones start: the table stays small.
            session.execute(
                delete(SsoLogin).where(col(SsoLogin.created_at) < utcnow() - SIGN_IN_WITHIN)
            )
            login = SsoLogin(state_hash=hash_token(state), nonce=nonce,
                             code_verifier=verifier, next_path=safe_next(next_path))  # fmt: skip
            session.add(login)
        query = {
            "response_type": "code",
            "client_id": self.settings.oidc_client_id,
            "redirect_uri": self.redirect_uri(),
            "scope": self.settings.oidc_scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": _pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"

    # -- back from it -------------------------------------------------------------------

    def complete(self, params: dict[str, str]) -> SignedIn:
        """The callback's query: a session, or :class:`SignInRefusedError` saying why."""
        if "error" in params:
            said = params.get("error_description") or params["error"]
            raise SignInRefusedError(
                "provider", f"The identity provider refused the sign-in: {said}."
            )
        login = self._take_login(params.get("state", ""))
        code = params.get("code")
        if not code:
            raise SignInRefusedError("provider", "The identity provider sent no code back.")
        claims = self._verified_claims(self._exchange(code, login.code_verifier), login.nonce)
        subject = str(claims["sub"])
        # An e-mail the provider says it has not verified may be anyone's to type: it
        # names nobody in the audit log (absent, the claim counts as the provider's word).
        email = claims.get("email") if claims.get("email_verified", True) is not False else None
        who = str(email or subject)
        role = self._role(claims, who)
        cookie = secrets.token_urlsafe(32)
        now = utcnow()
        record = SsoSession(
            token_hash=hash_token(cookie), csrf_token=secrets.token_urlsafe(24),
            subject=subject, email=str(email) if email else None, role=role, created_at=now,
            expires_at=now + timedelta(hours=self.settings.oidc_session_hours),
        )  # fmt: skip
        with write_transaction(self.engine) as session:
            session.add(record)
        return SignedIn(record, cookie, login.next_path)

    def _take_login(self, state: str) -> SsoLogin:
        """The sign-in ``state`` names, removed: a callback is taken once."""
        with write_transaction(self.engine) as session:
            login = session.get(SsoLogin, hash_token(state)) if state else None
            if login is not None:
                session.delete(login)
        if login is None:
            raise SignInRefusedError(
                "state",
                "This sign-in is unknown or was finished already (the link was used twice, "
                "or it came from another browser). Start again.",
            )
        if utcnow() - login.created_at > SIGN_IN_WITHIN:
            raise SignInRefusedError(
                "state",
                f"The sign-in took longer than {SIGN_IN_WITHIN.seconds // 60} minutes. "
                "Start again.",
            )
        return login

    def _exchange(self, code: str, verifier: str) -> str:
        """The ID token for ``code`` (the token endpoint, with the PKCE verifier)."""
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": self.redirect_uri(), "code_verifier": verifier}  # fmt: skip
        secret = self.settings.oidc_client_secret.get_secret_value()
        # A confidential client authenticates with HTTP Basic; a public one names itself.
        auth: httpx.Auth = (
            httpx.BasicAuth(self.settings.oidc_client_id, secret) if secret else _NO_AUTH
        )
        if not secret:
            form["client_id"] = self.settings.oidc_client_id
        try:
            answer = self._http.post(
                str(self._configuration()["token_endpoint"]), data=form, auth=auth
            )
        except httpx.HTTPError as exc:
            raise SignInRefusedError(
                "provider",
                f"The identity provider's token endpoint did not answer: {exc}.",
                status_code=502,
            ) from exc
        body = (
            answer.json()
            if answer.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        if answer.status_code != 200 or "id_token" not in body:
            said = body.get("error_description") or body.get("error") or answer.text[:200]
            raise SignInRefusedError(
                "token",
                "The identity provider would not give an ID token for the code "
                f"({answer.status_code}: {said}).",
            )
        return str(body["id_token"])

    def _verified_claims(self, id_token: str, nonce: str) -> dict[str, Any]:
        issuer = self.settings.oidc_issuer.rstrip("/")
        audience = self.settings.oidc_client_id
        try:
            key = self._signing_key(id_token)
            claims: dict[str, Any] = jwt.decode(
                id_token, key, algorithms=ALGORITHMS, audience=audience,
                issuer=str(self._configuration().get("issuer", issuer)), leeway=CLOCK_SKEW_S,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )  # fmt: skip
        except jwt.ExpiredSignatureError as exc:
            raise SignInRefusedError(
                "expired", "The identity provider's ID token had expired. Start again."
            ) from exc
        except jwt.InvalidAudienceError as exc:
            raise SignInRefusedError(
                "audience",
                f"The ID token was not made for this dashboard (its audience is not {audience!r}).",
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise SignInRefusedError(
                "issuer", f"The ID token was not issued by {issuer!r}."
            ) from exc
        except jwt.PyJWTError as exc:
            raise SignInRefusedError("token", f"The ID token is not valid: {exc}.") from exc
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != audience:
            raise SignInRefusedError(
                "audience",
                "The ID token names several audiences and was not authorized for "
                f"{audience!r} (azp).",
            )
        if not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
            raise SignInRefusedError(
                "nonce",
                "The ID token does not answer this sign-in (its nonce differs): it may be "
                "replayed. Start again.",
            )
        return claims

    def _role(self, claims: dict[str, Any], who: str) -> str:
        claim = self.settings.oidc_roles_claim
        given = claims.get(claim)
        values = (
            [str(v) for v in given] if isinstance(given, list) else [str(given)] if given else []
        )
        mapping = self.settings.oidc_role_map()
        roles = {mapping[v] for v in values if v in mapping}
        if not roles:
            raise SignInRefusedError(
                "role",
                f"{who} signed in, but no value of their {claim!r} claim "
                f"({', '.join(values) or 'none'}) is given a role here (ONCEOVER_OIDC_ROLES). "
                "Ask an administrator for access.",
                status_code=403, who=who,
            )  # fmt: skip
        return max(roles, key=ROLE_ORDER.index)

    # -- the provider's documents -------------------------------------------------------

    def _configuration(self) -> dict[str, Any]:
        with self._lock:
            if self._discovery is None:
                url = self.settings.oidc_issuer.rstrip("/") + "/.well-known/openid-configuration"
                try:
                    answer = self._http.get(url)
                    answer.raise_for_status()
                except httpx.HTTPError as exc:
                    raise SignInRefusedError(
                        "provider",
                        f"The identity provider's configuration ({url}) could not be read: {exc}.",
                        status_code=502,
                    ) from exc
                self._discovery = answer.json()
            return self._discovery

    def _signing_key(self, id_token: str) -> Any:
        kid = jwt.get_unverified_header(id_token).get("kid")
        for fresh in (False, True):  # a key not seen yet: the provider may have rotated
            keys = self._key_set(refresh=fresh)
            for key in keys.keys:
                if kid is None or key.key_id == kid:
                    return key.key
        raise jwt.InvalidTokenError(f"no published key has the token's kid {kid!r}")

    def _key_set(self, *, refresh: bool) -> jwt.PyJWKSet:
        with self._lock:
            keys = self._keys
        if keys is None or refresh:
            answer = self._http.get(str(self._configuration()["jwks_uri"]))
            answer.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(answer.json())
            with self._lock:
                self._keys = keys
        return keys

    # -- sessions -----------------------------------------------------------------------

    def principal(self, cookie: str) -> Principal | None:
        """The person whose live session ``cookie`` holds (a query)."""
        with Session(self.engine) as session:
            record = session.exec(
                select(SsoSession).where(
                    SsoSession.token_hash == hash_token(cookie),
                    col(SsoSession.ended_at).is_(None),
                    col(SsoSession.expires_at) > utcnow(),
                )
            ).first()
        return None if record is None else principal_of(record)

    def end(self, cookie: str, at: datetime | None = None) -> SsoSession | None:
        """Sign the session out (it never works again); the session, if it was live."""
        with write_transaction(self.engine) as session:
            record = session.exec(
                select(SsoSession).where(
                    SsoSession.token_hash == hash_token(cookie), col(SsoSession.ended_at).is_(None)
                )
            ).first()
            if record is not None:
                record.ended_at = at or utcnow()
                session.add(record)
        return record


def principal_of(record: SsoSession) -> Principal:
    return Principal(name=f"sso:{record.email or record.subject}", role=record.role,
                     subject=record.subject, csrf_token=record.csrf_token)  # fmt: skip
