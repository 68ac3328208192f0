"""Alert rules: what each kind watches, the parameters it takes, and their storage.

Kinds (evaluated in :mod:`onceover_backend.services.alerts.conditions`):

* ``out_of_range`` — OUT_OF_RANGE answers in the window: a gap in the client's offsets.
* ``already_exists_rate`` — ALREADY_EXISTS above a threshold (per minute, or as a share
  of requests). Deduplication at work; only a high rate is worth a look.
* ``error_rate`` — the other error codes (UNAVAILABLE, INVALID_ARGUMENT, ...).
* ``reconciliation`` — the latest check of a run or table is a mismatch (or found
  duplicate keys).
* ``run_failed``, ``run_stalled`` — the run's status (``silent_s`` adds a deadline of
  its own for running runs).
* ``orphan_streams`` — PENDING streams left uncommitted longer than ``older_than_s``.
* ``rows_dead_lettered`` — rows committed batches set aside in a dead-letter table in the
  window, above a threshold (default 0: any). The load went on; someone has rows to fix.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover_backend.core.db import write_transaction
from onceover_backend.errors import InvalidParameterError, NotFoundError
from onceover_backend.models import (
    AlertRuleCreate,
    AlertRuleParams,
    AlertRulePublic,
    AlertRulesPublic,
)
from onceover_backend.services.paging import page
from onceover_backend.tables import AlertRule

RATE_KINDS = frozenset({"out_of_range", "already_exists_rate", "error_rate"})
PARAMS_OF_KIND: dict[str, frozenset[str]] = {
    "out_of_range": frozenset({"window_s", "threshold"}),
    "already_exists_rate": frozenset({"window_s", "threshold", "per"}),
    "error_rate": frozenset({"window_s", "threshold", "per", "codes"}),
    "reconciliation": frozenset({"duplicates_only"}),
    "run_failed": frozenset(),
    "run_stalled": frozenset({"silent_s"}),
    "orphan_streams": frozenset({"older_than_s", "include_succeeded"}),
    "rows_dead_lettered": frozenset({"window_s", "threshold"}),
}
REQUIRED_OF_KIND: dict[str, frozenset[str]] = {
    "already_exists_rate": frozenset({"threshold"}),
    "error_rate": frozenset({"threshold"}),
}
DEFAULT_WINDOW_S = 300
DEFAULT_ORPHAN_AGE_S = 3600.0


def validate(rule: AlertRuleCreate) -> None:
    """Refuse what the schema cannot express: parameters of another kind, a missing
    threshold, a scope without its value. The 422 names the field."""
    given = {name for name, value in rule.params if value is not None}
    allowed = PARAMS_OF_KIND[rule.kind]
    for name in sorted(given - allowed):
        users = sorted(kind for kind, names in PARAMS_OF_KIND.items() if name in names)
        raise InvalidParameterError(
            f"params.{name}", f"{rule.kind} rules take no {name} (it is for {', '.join(users)})",
            getattr(rule.params, name), where="body",
        )  # fmt: skip
    for name in sorted(REQUIRED_OF_KIND.get(rule.kind, frozenset()) - given):
        raise InvalidParameterError(
            f"params.{name}", f"{rule.kind} rules need a {name}", None, where="body"
        )
    if rule.params.per == "share" and (rule.params.threshold or 0) > 1:
        raise InvalidParameterError(
            "params.threshold", "a share is between 0 and 1", rule.params.threshold, where="body"
        )
    if rule.scope == "all" and rule.scope_value is not None:
        raise InvalidParameterError(
            "scope_value", "scope all takes no scope_value", rule.scope_value, where="body"
        )
    if rule.scope != "all" and rule.scope_value is None:
        raise InvalidParameterError(
            "scope_value", f"scope {rule.scope} needs the {rule.scope}'s name", None, where="body"
        )


def to_public(rule: AlertRule) -> AlertRulePublic:
    assert rule.id is not None
    return AlertRulePublic(
        id=rule.id,
        name=rule.name,
        kind=rule.kind,
        scope=rule.scope,
        scope_value=rule.scope_value,
        severity=rule.severity,
        params=AlertRuleParams.model_validate(rule.params),
        for_s=rule.for_s,
        repeat_interval_s=rule.repeat_interval_s,
        enabled=rule.enabled,
        description=rule.description,
        created_at=rule.created_at,
        updated_at=rule.updated_at,
    )


def _fill(row: AlertRule, rule: AlertRuleCreate) -> None:
    row.name = rule.name
    row.kind = rule.kind
    row.scope = rule.scope
    row.scope_value = rule.scope_value
    row.severity = rule.severity
    row.params = rule.params.model_dump(exclude_none=True)
    row.for_s = rule.for_s
    row.repeat_interval_s = rule.repeat_interval_s
    row.enabled = rule.enabled
    row.description = rule.description


def create(engine: Engine, rule: AlertRuleCreate) -> AlertRulePublic:
    validate(rule)
    with write_transaction(engine) as session:
        row = AlertRule(name=rule.name, kind=rule.kind, scope=rule.scope, severity=rule.severity)
        _fill(row, rule)
        session.add(row)
        session.flush()
        return to_public(row)


def _live(session: Session, rule_id: int) -> AlertRule:
    row = session.get(AlertRule, rule_id)
    if row is None or row.deleted_at is not None:
        raise NotFoundError(f"no alert rule {rule_id}")
    return row


def get(session: Session, rule_id: int) -> AlertRulePublic:
    return to_public(_live(session, rule_id))


def replace(engine: Engine, rule_id: int, rule: AlertRuleCreate) -> AlertRulePublic:
    """The rule becomes ``rule``; its alerts are judged by the new rule from the next
    evaluation (one that no longer holds resolves)."""
    validate(rule)
    with write_transaction(engine) as session:
        row = _live(session, rule_id)
        _fill(row, rule)
        row.updated_at = datetime.now(UTC)
        session.flush()
        return to_public(row)


def delete(engine: Engine, rule_id: int) -> None:
    """Deleted rules are kept for their alerts' history; their firing alerts resolve at
    the next evaluation."""
    with write_transaction(engine) as session:
        row = _live(session, rule_id)
        row.deleted_at = row.updated_at = datetime.now(UTC)


def list_rules(session: Session, *, limit: int, offset: int) -> AlertRulesPublic:
    query = select(AlertRule).where(col(AlertRule.deleted_at).is_(None))
    rows, count = page(session, query, [col(AlertRule.id)], limit=limit, offset=offset)
    return AlertRulesPublic(data=[to_public(row) for row in rows], count=count)
