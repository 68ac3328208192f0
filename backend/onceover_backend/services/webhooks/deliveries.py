"""Webhook deliveries in the database: made (by the evaluator, a test, a redelivery),
claimed for sending, and every try recorded.

A delivery is claimed by one sender at a time: claiming moves it to ``sending`` with a
lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, the write lock on SQLite), so two
replicas never send the same try. A sender that dies mid-try loses its lease, and the
delivery is tried again once the lease has passed: at least once, under one
``webhook-id``, which is how receivers deduplicate (Standard Webhooks).

What a receiver answered, and the detail of an error (the addresses a host resolved
to, where a redirect pointed), is read by operators only: a webhook can be pointed at
an internal address, and its answers would show what is there.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session, and_, col, or_, select

from onceover_backend.core.db import write_transaction
from onceover_backend.errors import NotFoundError
from onceover_backend.models import DeliveriesPublic, DeliveryAttemptPublic, DeliveryPublic
from onceover_backend.services.paging import page
from onceover_backend.services.webhooks import endpoints, payloads
from onceover_backend.services.webhooks.signing import new_message_id
from onceover_backend.tables import DeliveryAttempt, WebhookDelivery, WebhookEndpoint

RESPONSE_KEPT = 1000
# A delivery made by hand (a test, a redelivery) is sent at once by the request that
# made it; the dispatch loop leaves it alone this long, and sends it if that request died.
SENT_BY_REQUEST = timedelta(seconds=60)


@dataclass(frozen=True)
class Claimed:
    """A delivery's try, claimed for sending: everything the sender needs."""

    delivery_id: int
    number: int
    message_id: str
    body: str
    endpoint_id: int
    url: str
    secret: str


@dataclass(frozen=True)
class Outcome:
    """How one try went."""

    started_at: datetime
    latency_ms: float
    status_code: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    response: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _not_sendable(endpoint: WebhookEndpoint) -> str:
    if endpoint.deleted_at is not None:
        return "the endpoint was deleted"
    return "the endpoint is disabled" + (
        f": {endpoint.disabled_reason}" if endpoint.disabled_reason else ""
    )


def claim(
    engine: Engine, now: datetime, lease: timedelta, limit: int, only: int | None = None
) -> list[Claimed]:
    """Due deliveries (or the one named ``only``, if not being sent), each now ``sending``
    under a lease. Deliveries to endpoints that are disabled or deleted fail here."""
    due = or_(
        and_(col(WebhookDelivery.status) == "pending", col(WebhookDelivery.next_attempt_at) <= now),
        and_(col(WebhookDelivery.status) == "sending", col(WebhookDelivery.lease_until) < now),
    )
    if only is not None:
        due = and_(
            col(WebhookDelivery.id) == only,
            or_(col(WebhookDelivery.status) == "pending", due),
        )
    claimed: list[Claimed] = []
    with write_transaction(engine) as session:
        rows = session.exec(
            select(WebhookDelivery, WebhookEndpoint)
            .join(WebhookEndpoint, col(WebhookEndpoint.id) == col(WebhookDelivery.endpoint_id))
            .where(due)
            .order_by(col(WebhookDelivery.next_attempt_at))
            .limit(limit)
            .with_for_update(skip_locked=True, of=WebhookDelivery)
        )
        for delivery, endpoint in list(rows):
            assert delivery.id is not None
            if not endpoint.enabled or endpoint.deleted_at is not None:
                delivery.status, delivery.finished_at = "failed", now
                delivery.last_error = _not_sendable(endpoint)
                delivery.next_attempt_at = None
                continue
            delivery.attempts += 1
            delivery.status, delivery.lease_until = "sending", now + lease
            claimed.append(Claimed(
                delivery.id, delivery.attempts, delivery.message_id, delivery.body,
                delivery.endpoint_id, endpoint.url, endpoint.secret,
            ))  # fmt: skip
    return claimed


def record(
    engine: Engine, claimed: Claimed, outcome: Outcome, *, max_attempts: int,
    retry_in: timedelta | None,
) -> str:  # fmt: skip
    """Store the try and move the delivery on; its new status.

    ``retry_in`` is the wait before the next try (None: no more tries are due, e.g. a
    410). A 410 Gone disables the endpoint: the receiver says it will never take more.
    """
    with write_transaction(engine) as session:
        session.add(DeliveryAttempt(
            delivery_id=claimed.delivery_id, number=claimed.number,
            started_at=outcome.started_at, status_code=outcome.status_code,
            latency_ms=outcome.latency_ms, error=outcome.error,
            retry_after_s=outcome.retry_after_s,
            response=None if outcome.response is None else outcome.response[:RESPONSE_KEPT],
        ))  # fmt: skip
        delivery = session.exec(
            select(WebhookDelivery)
            .where(WebhookDelivery.id == claimed.delivery_id)
            .with_for_update()
        ).one()
        if delivery.status != "sending" or delivery.attempts != claimed.number:
            return delivery.status  # the lease ran out and another try took over
        ended = outcome.started_at + timedelta(milliseconds=outcome.latency_ms)
        delivery.last_status_code, delivery.last_error = outcome.status_code, outcome.error
        delivery.lease_until = None
        if outcome.succeeded:
            delivery.status, delivery.finished_at, delivery.next_attempt_at = (
                "succeeded", ended, None
            )  # fmt: skip
        elif retry_in is None or delivery.attempts >= max_attempts:
            delivery.status, delivery.finished_at, delivery.next_attempt_at = "failed", ended, None
        else:
            delivery.status, delivery.next_attempt_at = "pending", ended + retry_in
        if outcome.status_code == 410:
            endpoint = session.get(WebhookEndpoint, claimed.endpoint_id)
            assert endpoint is not None
            endpoint.enabled = False
            endpoint.disabled_reason = (
                f"the receiver answered 410 Gone at {ended.isoformat()} "
                f"(delivery {claimed.delivery_id})"
            )
            endpoint.updated_at = ended
        return delivery.status


# -- made by hand ------------------------------------------------------------------


def create_test(engine: Engine, endpoint_id: int, public_url: str) -> int:
    """A test notification to the endpoint, for the caller to send now; its delivery id."""
    now = datetime.now(UTC)
    with write_transaction(engine) as session:
        endpoint = endpoints.live(session, endpoint_id)
        message_id = new_message_id()
        delivery = WebhookDelivery(
            endpoint_id=endpoint_id, message_id=message_id, dedupe_key=f"test:{message_id}",
            kind="test", event_status="firing",
            body=payloads.sample_body(endpoint, public_url, now),
            status="pending", next_attempt_at=now + SENT_BY_REQUEST, created_at=now,
        )  # fmt: skip
        session.add(delivery)
        session.flush()
        assert delivery.id is not None
        return delivery.id


def create_redelivery(engine: Engine, endpoint_id: int, delivery_id: int) -> int:
    """The same message again (same ``webhook-id`` and body, so a receiver that already
    has it can tell), as a new delivery for the caller to send now; its id."""
    now = datetime.now(UTC)
    with write_transaction(engine) as session:
        endpoints.live(session, endpoint_id)
        original = session.get(WebhookDelivery, delivery_id)
        if original is None or original.endpoint_id != endpoint_id:
            raise NotFoundError(f"no delivery {delivery_id} to webhook endpoint {endpoint_id}")
        copy = WebhookDelivery(
            endpoint_id=endpoint_id, message_id=original.message_id,
            dedupe_key=f"redelivery:{delivery_id}:{new_message_id()}", kind="redelivery",
            transition_id=original.transition_id, redelivery_of=delivery_id,
            event_status=original.event_status, body=original.body, status="pending",
            next_attempt_at=now + SENT_BY_REQUEST, created_at=now,
        )  # fmt: skip
        session.add(copy)
        session.flush()
        assert copy.id is not None
        return copy.id


# -- read ----------------------------------------------------------------------------


def error_kind(error: str | None) -> str | None:
    """What anyone may read of a try's error: its kind, before the first ``": "``
    (``refused``, ``timed out``, ``ConnectError``, ``HTTP 500``)."""
    return None if error is None else error.partition(": ")[0]


def _attempt(attempt: DeliveryAttempt, answers: bool) -> DeliveryAttemptPublic:
    shown = DeliveryAttemptPublic.model_validate(attempt, from_attributes=True)
    if answers:
        return shown
    return shown.model_copy(update={"response": None, "error": error_kind(attempt.error)})


def _public(
    delivery: WebhookDelivery, attempts: list[DeliveryAttempt], answers: bool
) -> DeliveryPublic:
    assert delivery.id is not None
    return DeliveryPublic(
        id=delivery.id, endpoint_id=delivery.endpoint_id, message_id=delivery.message_id,
        kind=delivery.kind,
        event_status=delivery.event_status,
        transition_id=delivery.transition_id, redelivery_of=delivery.redelivery_of,
        status=delivery.status,
        attempts=[_attempt(a, answers) for a in sorted(attempts, key=lambda a: a.number)],
        next_attempt_at=delivery.next_attempt_at, created_at=delivery.created_at,
        finished_at=delivery.finished_at, last_status_code=delivery.last_status_code,
        last_error=delivery.last_error if answers else error_kind(delivery.last_error),
        body=delivery.body,
    )  # fmt: skip


def _with_attempts(
    session: Session, rows: list[WebhookDelivery], answers: bool
) -> list[DeliveryPublic]:
    ids = [row.id for row in rows]
    attempts: dict[int, list[DeliveryAttempt]] = defaultdict(list)
    if ids:
        for attempt in session.exec(
            select(DeliveryAttempt).where(col(DeliveryAttempt.delivery_id).in_(ids))
        ):
            attempts[attempt.delivery_id].append(attempt)
    return [_public(row, attempts[row.id], answers) for row in rows if row.id is not None]


def list_deliveries(
    session: Session, endpoint_id: int, *, status: list[str] | None, limit: int, offset: int,
    answers: bool,
) -> DeliveriesPublic:  # fmt: skip
    """Newest first, every try of each; with ``answers`` (for operators), what the
    receiver answered and each error's detail."""
    endpoints.live(session, endpoint_id)
    query = select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint_id)
    if status:
        query = query.where(col(WebhookDelivery.status).in_(status))
    rows, count = page(session, query, [col(WebhookDelivery.id).desc()], limit=limit, offset=offset)
    return DeliveriesPublic(data=_with_attempts(session, rows, answers), count=count)


def get_delivery(
    session: Session, endpoint_id: int, delivery_id: int, *, answers: bool
) -> DeliveryPublic:
    row = session.get(WebhookDelivery, delivery_id)
    if row is None or row.endpoint_id != endpoint_id:
        raise NotFoundError(f"no delivery {delivery_id} to webhook endpoint {endpoint_id}")
    return _with_attempts(session, [row], answers)[0]
