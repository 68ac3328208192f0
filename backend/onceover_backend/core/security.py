"""Bearer tokens and roles.

Roles: ``ingest`` (jobs posting events), ``viewer`` (read the API), ``operator``
(everything a viewer may, plus resume, reconcile and alert rules). Tokens come from
``ONCEOVER_TOKENS`` or from the ``apitoken`` table (``onceover token create``), where
only a SHA-256 of each is stored: a token is 32 random bytes, so a plain hash is as
strong as a slow one and costs nothing per request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

import anyio.to_thread
from sqlalchemy import Engine
from sqlmodel import Session, select

from onceover_backend.tables import ApiToken

# Which roles each role includes.
GRANTS: dict[str, frozenset[str]] = {
    "ingest": frozenset({"ingest"}),
    "viewer": frozenset({"viewer"}),
    "operator": frozenset({"operator", "viewer"}),
}
TOKEN_PREFIX = "oo_"  # noqa: S105 - a prefix that makes leaked tokens greppable


@dataclass(frozen=True)
class Principal:
    """Who made a request: a name for the audit log and the role the token carries. A
    person signed in through single sign-on has their subject too, and the session's
    CSRF token, which their writes must show."""

    name: str
    role: str
    subject: str | None = None
    csrf_token: str | None = None

    def may(self, role: str) -> bool:
        return role in GRANTS.get(self.role, frozenset())


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class TokenVerifier:
    """Finds the principal a bearer token belongs to (configured tokens first)."""

    def __init__(self, engine: Engine, configured: list[tuple[str, str]]) -> None:
        self.engine = engine
        self._configured = [
            (hash_token(token), Principal(name=f"env:{role}", role=role))
            for role, token in configured
        ]

    async def verify(self, token: str) -> Principal | None:
        """The token's principal: a configured token is checked on the event loop; only
        one it does not know is looked up in the database, on a worker thread."""
        return self.configured(token) or await anyio.to_thread.run_sync(self.stored, token)

    def configured(self, token: str) -> Principal | None:
        """The principal of a token from ``ONCEOVER_TOKENS``: no database, so the
        event loop may ask (a hand-off to a worker thread a request fewer)."""
        digest = hash_token(token)
        for known, principal in self._configured:
            if hmac.compare_digest(known, digest):
                return principal
        return None

    def stored(self, token: str) -> Principal | None:
        """The principal of an unrevoked token in the ``apitoken`` table (a query)."""
        with Session(self.engine) as session:
            stored = session.exec(
                select(ApiToken).where(
                    ApiToken.token_hash == hash_token(token),
                    ApiToken.revoked_at.is_(None),  # type: ignore[union-attr]
                )
            ).first()
        if stored is None:
            return None
        return Principal(name=f"token:{stored.name}", role=stored.role)
