"""Tokens made with ``onceover token create``: stored as SHA-256, shown once."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover_backend.core.config import ROLES
from onceover_backend.core.db import write_transaction
from onceover_backend.core.security import hash_token, new_token
from onceover_backend.tables import ApiToken, AuditLog


class TokenError(ValueError):
    """A token request that cannot be done; the message says why."""


def create_token(engine: Engine, role: str, name: str, actor: str) -> str:
    """A new random token for ``role``; only its hash is stored, so this is the one
    chance to see it. Audited as ``createToken``."""
    if role not in ROLES:
        raise TokenError(f"role {role!r} is not one of {', '.join(ROLES)}")
    token = new_token()
    with write_transaction(engine) as session:
        if session.exec(select(ApiToken).where(ApiToken.name == name)).first() is not None:
            raise TokenError(f"a token named {name!r} exists; choose another --name")
        session.add(ApiToken(name=name, role=role, token_hash=hash_token(token)))
        session.add(_audit(actor, "createToken", name, f"ok: created a {role} token"))
    return token


def revoke_token(engine: Engine, name: str, actor: str) -> None:
    with write_transaction(engine) as session:
        stored = session.exec(select(ApiToken).where(ApiToken.name == name)).first()
        if stored is None or stored.revoked_at is not None:
            raise TokenError(f"no live token named {name!r}")
        stored.revoked_at = datetime.now(UTC)
        session.add(_audit(actor, "revokeToken", name, "ok: revoked"))


def list_tokens(engine: Engine) -> list[ApiToken]:
    with Session(engine) as session:
        return list(session.exec(select(ApiToken).order_by(col(ApiToken.created_at))))


def _audit(actor: str, action: str, target: str, outcome: str) -> AuditLog:
    return AuditLog(
        actor=actor,
        action=action,
        method="CLI",
        path="onceover token",
        target=target,
        request_id="-",
        status_code=0,
        outcome=outcome,
    )
