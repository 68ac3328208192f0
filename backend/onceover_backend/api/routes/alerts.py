"""``/api/alert-rules`` (read: ``viewer``; change: ``operator``) and ``/api/alerts``:
what is firing now and what fired before (``viewer``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from onceover_backend.api.deps import EngineDep, OperatorDep, SessionDep, SettingsDep, ViewerDep
from onceover_backend.models import (
    AlertDetailPublic,
    AlertHistoryPublic,
    AlertRuleCreate,
    AlertRulePublic,
    AlertRulesPublic,
    AlertsPublic,
    AlertState,
    ErrorPublic,
    Text,
)
from onceover_backend.services.alerts import reads, rules

router = APIRouter(tags=["alerts"])

RuleId = Annotated[int, Path(ge=1, le=2**31 - 1)]
Limit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0)]
_NO_RULE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "No such alert rule"}
}


@router.get("/alert-rules", operation_id="listAlertRules", response_model=AlertRulesPublic)
def list_rules(
    *, session: SessionDep, _principal: ViewerDep, limit: Limit = 100, offset: Offset = 0
) -> AlertRulesPublic:
    """Alert rules, oldest first."""
    return rules.list_rules(session, limit=limit, offset=offset)


@router.post(
    "/alert-rules", operation_id="createAlertRule", response_model=AlertRulePublic,
    status_code=201,
)  # fmt: skip
def create_rule(
    *, request: Request, engine: EngineDep, _principal: OperatorDep, rule: AlertRuleCreate
) -> AlertRulePublic:
    """A new rule; it is evaluated from the next round on."""
    created = rules.create(engine, rule)
    request.state.audit_target = f"alert rule {created.id} ({created.name})"
    return created


@router.get(
    "/alert-rules/{rule_id}", operation_id="getAlertRule", response_model=AlertRulePublic,
    responses=_NO_RULE,
)  # fmt: skip
def get_rule(*, session: SessionDep, _principal: ViewerDep, rule_id: RuleId) -> AlertRulePublic:
    return rules.get(session, rule_id)


@router.put(
    "/alert-rules/{rule_id}", operation_id="replaceAlertRule", response_model=AlertRulePublic,
    responses=_NO_RULE,
)  # fmt: skip
def replace_rule(
    *, request: Request, engine: EngineDep, _principal: OperatorDep, rule_id: RuleId,
    rule: AlertRuleCreate,
) -> AlertRulePublic:  # fmt: skip
    """The rule, replaced whole; its alerts are judged by the new rule from the next round."""
    request.state.audit_target = f"alert rule {rule_id}"
    return rules.replace(engine, rule_id, rule)


@router.delete(
    "/alert-rules/{rule_id}", operation_id="deleteAlertRule", status_code=204,
    responses=_NO_RULE,
)  # fmt: skip
def delete_rule(
    *, request: Request, engine: EngineDep, _principal: OperatorDep, rule_id: RuleId
) -> Response:
    """The rule stops; its firing alerts resolve (and say so) at the next round."""
    request.state.audit_target = f"alert rule {rule_id}"
    rules.delete(engine, rule_id)
    return Response(status_code=204)


@router.get("/alerts", operation_id="listAlerts", response_model=AlertsPublic)
def list_alerts(
    *,
    session: SessionDep,
    settings: SettingsDep,
    _principal: ViewerDep,
    state: Annotated[
        list[AlertState] | None,
        Query(description="any of these (default: pending, firing, resolved)"),
    ] = None,
    rule_id: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    run_id: Annotated[Text | None, Query(max_length=200)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AlertsPublic:
    """Alerts as they stand: firing first, then pending, then resolved."""
    return reads.list_alerts(
        session, settings.dashboard_url(), state=list(state) if state else None,
        rule_id=rule_id, run_id=run_id, limit=limit, offset=offset,
    )  # fmt: skip


@router.get("/alerts/history", operation_id="listAlertHistory", response_model=AlertHistoryPublic)
def alert_history(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    rule_id: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    run_id: Annotated[Text | None, Query(max_length=200)] = None,
    fingerprint: Annotated[Text | None, Query(max_length=16)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AlertHistoryPublic:
    """Every notification alerts made (firing, repeats, resolved), newest first."""
    return reads.history(
        session, rule_id=rule_id, run_id=run_id, fingerprint=fingerprint, limit=limit,
        offset=offset,
    )  # fmt: skip


@router.get(
    "/alerts/{alert_id}", operation_id="getAlert", response_model=AlertDetailPublic,
    responses={404: {"model": ErrorPublic, "description": "No such alert"}},
)  # fmt: skip
def get_alert(
    *, session: SessionDep, settings: SettingsDep, _principal: ViewerDep,
    alert_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
) -> AlertDetailPublic:  # fmt: skip
    """One alert with its history."""
    return reads.get_alert(session, settings.dashboard_url(), alert_id)
