"""``/api/webhooks``: endpoints alerts are delivered to, and their deliveries.

Reading needs ``viewer``; everything else ``operator``. A new endpoint's secret (and a
rotated one) is in that one answer only, and so is its full URL (reads show its host).
What receivers answered is shown to operators only.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from sqlalchemy import Engine
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from onceover_backend.api.deps import (
    DispatcherDep,
    EngineDep,
    OperatorDep,
    SessionDep,
    SettingsDep,
    ViewerDep,
)
from onceover_backend.models import (
    DeliveriesPublic,
    DeliveryPublic,
    DeliveryStatus,
    ErrorPublic,
    WebhookCreate,
    WebhookCreatedPublic,
    WebhookPublic,
    WebhooksPublic,
    WebhookUpdate,
)
from onceover_backend.services.webhooks import deliveries, endpoints
from onceover_backend.services.webhooks.dispatch import Dispatcher
from onceover_backend.services.webhooks.urls import parse_networks

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

EndpointId = Annotated[int, Path(ge=1, le=2**31 - 1)]
DeliveryId = Annotated[int, Path(ge=1, le=2**63 - 1)]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "No such endpoint (or delivery)"}
}


@router.get("", operation_id="listWebhooks", response_model=WebhooksPublic)
def list_endpoints(
    *,
    session: SessionDep,
    _principal: ViewerDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> WebhooksPublic:
    return endpoints.list_endpoints(session, limit=limit, offset=offset)


@router.post("", operation_id="createWebhook", response_model=WebhookCreatedPublic, status_code=201)
def create_endpoint(
    *, request: Request, engine: EngineDep, settings: SettingsDep, _principal: OperatorDep,
    endpoint: WebhookCreate,
) -> WebhookCreatedPublic:  # fmt: skip
    """A new endpoint; its secret (``whsec_...``) is shown in this answer only."""
    allowed = parse_networks(settings.webhook_allowed_networks)
    created = endpoints.create(engine, endpoint, allowed)
    request.state.audit_target = f"webhook {created.id} ({created.name})"
    return created


@router.get(
    "/{endpoint_id}", operation_id="getWebhook", response_model=WebhookPublic,
    responses=_NOT_FOUND,
)  # fmt: skip
def get_endpoint(
    *, session: SessionDep, _principal: ViewerDep, endpoint_id: EndpointId
) -> WebhookPublic:
    return endpoints.get(session, endpoint_id)


@router.patch(
    "/{endpoint_id}", operation_id="updateWebhook", response_model=WebhookPublic,
    responses=_NOT_FOUND,
)  # fmt: skip
def update_endpoint(
    *, request: Request, engine: EngineDep, settings: SettingsDep, _principal: OperatorDep,
    endpoint_id: EndpointId, change: WebhookUpdate,
) -> WebhookPublic:  # fmt: skip
    """Change the fields given; ``{"enabled": true}`` re-enables one a 410 disabled."""
    request.state.audit_target = f"webhook {endpoint_id}"
    allowed = parse_networks(settings.webhook_allowed_networks)
    return endpoints.update(engine, endpoint_id, change, allowed)


@router.delete(
    "/{endpoint_id}", operation_id="deleteWebhook", status_code=204, responses=_NOT_FOUND
)
def delete_endpoint(
    *, request: Request, engine: EngineDep, _principal: OperatorDep, endpoint_id: EndpointId
) -> Response:
    """Nothing more is sent to it; its deliveries stay readable in the audit trail."""
    request.state.audit_target = f"webhook {endpoint_id}"
    endpoints.delete(engine, endpoint_id)
    return Response(status_code=204)


@router.post(
    "/{endpoint_id}/rotate-secret", operation_id="rotateWebhookSecret",
    response_model=WebhookCreatedPublic, responses=_NOT_FOUND,
)  # fmt: skip
def rotate_secret(
    *, request: Request, engine: EngineDep, _principal: OperatorDep, endpoint_id: EndpointId
) -> WebhookCreatedPublic:
    """A new secret, shown this once; every delivery from now on is signed with it."""
    request.state.audit_target = f"webhook {endpoint_id}"
    return endpoints.rotate_secret(engine, endpoint_id)


@router.get(
    "/{endpoint_id}/deliveries", operation_id="listWebhookDeliveries",
    response_model=DeliveriesPublic, responses=_NOT_FOUND,
)  # fmt: skip
def list_deliveries(
    *,
    session: SessionDep,
    principal: ViewerDep,
    endpoint_id: EndpointId,
    status: Annotated[list[DeliveryStatus] | None, Query(description="any of these")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> DeliveriesPublic:
    """Deliveries to the endpoint, newest first, each with every try (status code,
    latency, error). What the receiver answered, and the detail of each error, only with
    an operator token."""
    return deliveries.list_deliveries(
        session, endpoint_id, status=list(status) if status else None, limit=limit,
        offset=offset, answers=principal.may("operator"),
    )  # fmt: skip


async def _send_now(
    engine: Engine, dispatcher: Dispatcher, endpoint_id: int, made: int
) -> DeliveryPublic:
    await run_in_threadpool(dispatcher.run_once, made)

    def read() -> DeliveryPublic:
        with Session(engine) as session:
            return deliveries.get_delivery(session, endpoint_id, made, answers=True)

    return await run_in_threadpool(read)


@router.post(
    "/{endpoint_id}/test", operation_id="sendWebhookTest", response_model=DeliveryPublic,
    responses=_NOT_FOUND,
)  # fmt: skip
async def send_test(
    *, request: Request, engine: EngineDep, settings: SettingsDep, dispatcher: DispatcherDep,
    _principal: OperatorDep, endpoint_id: EndpointId,
) -> DeliveryPublic:  # fmt: skip
    """Send a test notification now; the answer shows how its first try went (failed
    tries are retried like any delivery)."""
    request.state.audit_target = f"webhook {endpoint_id}"
    made = await run_in_threadpool(
        deliveries.create_test, engine, endpoint_id, settings.dashboard_url()
    )
    return await _send_now(engine, dispatcher, endpoint_id, made)


@router.post(
    "/{endpoint_id}/deliveries/{delivery_id}/redeliver", operation_id="redeliverWebhook",
    response_model=DeliveryPublic, responses=_NOT_FOUND,
)  # fmt: skip
async def redeliver(
    *, request: Request, engine: EngineDep, dispatcher: DispatcherDep, _principal: OperatorDep,
    endpoint_id: EndpointId, delivery_id: DeliveryId,
) -> DeliveryPublic:  # fmt: skip
    """Send a delivery's message again now (same ``webhook-id`` and body) as a new
    delivery; the answer shows its first try."""
    request.state.audit_target = f"webhook {endpoint_id} delivery {delivery_id}"
    made = await run_in_threadpool(deliveries.create_redelivery, engine, endpoint_id, delivery_id)
    return await _send_now(engine, dispatcher, endpoint_id, made)
