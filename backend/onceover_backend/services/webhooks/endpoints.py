"""Webhook endpoints: create (the secret is generated and shown once), change, delete,
rotate the secret. URLs are checked by :mod:`onceover_backend.services.webhooks.urls`, and shown
whole only in the answer that creates the endpoint: after that, its host only (a
webhook URL's path is often a secret of its own)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover_backend.core.db import write_transaction
from onceover_backend.errors import InvalidParameterError, NotFoundError
from onceover_backend.models import (
    WebhookCreate,
    WebhookCreatedPublic,
    WebhookPublic,
    WebhooksPublic,
    WebhookUpdate,
)
from onceover_backend.services.paging import page
from onceover_backend.services.webhooks.signing import SECRET_PREFIX, new_secret
from onceover_backend.services.webhooks.urls import (
    IPNetwork,
    RefusedURLError,
    check_url,
    is_redacted,
    redacted,
)
from onceover_backend.tables import AlertRule, WebhookEndpoint

HINT_CHARS = 4


def to_public(row: WebhookEndpoint) -> WebhookPublic:
    assert row.id is not None
    hint = row.secret[: len(SECRET_PREFIX) + HINT_CHARS] + "…"
    return WebhookPublic(
        id=row.id, name=row.name, url=redacted(row.url), format=row.format,
        enabled=row.enabled, disabled_reason=row.disabled_reason, rule_ids=row.rule_ids,
        severities=row.severities, send_resolved=row.send_resolved,
        secret_hint=hint, created_at=row.created_at, updated_at=row.updated_at,
    )  # fmt: skip


def _created(row: WebhookEndpoint, *, full_url: bool) -> WebhookCreatedPublic:
    """The endpoint with its secret; with its whole URL only when it was just created."""
    shown = to_public(row).model_dump()
    if full_url:
        shown["url"] = row.url
    return WebhookCreatedPublic(**shown, secret=row.secret)


def _check(session: Session, url: str | None, rule_ids: list[int] | None,
           allowed: list[IPNetwork]) -> None:  # fmt: skip
    if url is not None:
        if is_redacted(url):
            raise InvalidParameterError(
                "url", "this is how a saved URL is shown (its path masked); give the whole URL",
                url, where="body",
            )  # fmt: skip
        try:
            check_url(url, allowed)
        except RefusedURLError as exc:  # echoed masked: the answer is kept in the audit log
            raise InvalidParameterError("url", str(exc), redacted(url), where="body") from None
    if rule_ids:
        unknown = sorted(set(rule_ids) - _live_rule_ids(session, rule_ids))
        if unknown:
            raise InvalidParameterError(
                "rule_ids", f"no alert rule {', '.join(map(str, unknown))}", rule_ids, where="body"
            )


def _live_rule_ids(session: Session, ids: list[int]) -> set[int]:
    """Those of ``ids`` that name alert rules not deleted (an endpoint may be sent theirs)."""
    query = select(AlertRule.id).where(
        col(AlertRule.id).in_(ids), col(AlertRule.deleted_at).is_(None)
    )
    return {rule_id for rule_id in session.exec(query) if rule_id is not None}


def live(session: Session, endpoint_id: int) -> WebhookEndpoint:
    row = session.get(WebhookEndpoint, endpoint_id)
    if row is None or row.deleted_at is not None:
        raise NotFoundError(f"no webhook endpoint {endpoint_id}")
    return row


def create(engine: Engine, given: WebhookCreate, allowed: list[IPNetwork]) -> WebhookCreatedPublic:
    with write_transaction(engine) as session:
        _check(session, given.url, given.rule_ids, allowed)
        row = WebhookEndpoint(**given.model_dump(), secret=new_secret())
        session.add(row)
        session.flush()
        return _created(row, full_url=True)


def update(
    engine: Engine, endpoint_id: int, change: WebhookUpdate, allowed: list[IPNetwork]
) -> WebhookPublic:
    with write_transaction(engine) as session:
        row = live(session, endpoint_id)
        _check(session, change.url, change.rule_ids, allowed)
        for name, value in change.model_dump(exclude_unset=True).items():
            if value is None:
                raise InvalidParameterError(name, "may be left out, not null", None, where="body")
            setattr(row, name, value)
        if change.enabled:
            row.disabled_reason = None
        row.updated_at = datetime.now(UTC)
        session.flush()
        return to_public(row)


def rotate_secret(engine: Engine, endpoint_id: int) -> WebhookCreatedPublic:
    """A new secret, shown once; deliveries from now on are signed with it."""
    with write_transaction(engine) as session:
        row = live(session, endpoint_id)
        row.secret = new_secret()
        row.updated_at = datetime.now(UTC)
        session.flush()
        return _created(row, full_url=False)


def delete(engine: Engine, endpoint_id: int) -> None:
    """Kept with its deliveries' history; nothing more is sent to it."""
    with write_transaction(engine) as session:
        row = live(session, endpoint_id)
        row.deleted_at = row.updated_at = datetime.now(UTC)
        row.enabled = False


def get(session: Session, endpoint_id: int) -> WebhookPublic:
    return to_public(live(session, endpoint_id))


def list_endpoints(session: Session, *, limit: int, offset: int) -> WebhooksPublic:
    query = select(WebhookEndpoint).where(col(WebhookEndpoint.deleted_at).is_(None))
    rows, count = page(session, query, [col(WebhookEndpoint.id)], limit=limit, offset=offset)
    return WebhooksPublic(data=[to_public(row) for row in rows], count=count)
