"""Webhook endpoints, and the deliveries to them with every try."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, Field

from onceover_backend.models.alerts import NotificationStatus, Severity
from onceover_backend.models.params import Text

WebhookFormat = Literal["standard", "slack"]
DeliveryStatus = Literal["pending", "sending", "succeeded", "failed"]


class WebhookCreate(BaseModel):
    """A webhook endpoint. Its secret is generated (``whsec_...``) and shown once."""

    name: Annotated[Text, Field(min_length=1, max_length=200)]
    url: Annotated[Text, Field(min_length=1, max_length=2000)] = Field(
        description="http or https; link-local and cloud metadata addresses are refused"
    )
    format: WebhookFormat = Field(
        default="standard",
        description="standard: Alertmanager's body, signed (Standard Webhooks); slack: an "
        "incoming-webhook {text}, signed the same way",
    )
    enabled: bool = True
    rule_ids: list[int] = Field(default=[], description="rules delivered; empty: all")
    severities: list[Severity] = Field(default=[], description="severities delivered; empty: all")
    send_resolved: bool = Field(default=True, description="deliver resolved notifications too")


class WebhookUpdate(BaseModel):
    """``PATCH``: the fields given change. ``enabled: true`` re-enables an endpoint a 410
    disabled."""

    name: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    url: Annotated[Text, Field(min_length=1, max_length=2000)] | None = None
    format: WebhookFormat | None = None
    enabled: bool | None = None
    rule_ids: list[int] | None = None
    severities: list[Severity] | None = None
    send_resolved: bool | None = None


class WebhookPublic(BaseModel):
    id: int
    name: str
    url: str = Field(
        description="scheme, host and port; the path and query masked (https://host/…): "
        "the whole URL is in the answer that creates the endpoint only"
    )
    format: WebhookFormat
    enabled: bool
    disabled_reason: str | None = Field(description="why it was disabled (a 410 answer)")
    rule_ids: list[int]
    severities: list[Severity]
    send_resolved: bool
    secret_hint: str = Field(description="the secret's first characters, to tell it apart")
    created_at: AwareDatetime
    updated_at: AwareDatetime


class WebhookCreatedPublic(WebhookPublic):
    """The endpoint with its signing secret: shown this once, keep it."""

    url: str = Field(
        description="whole in the answer that creates the endpoint; masked, as reads show "
        "it, in the one that rotates its secret"
    )
    secret: str


class WebhooksPublic(BaseModel):
    data: list[WebhookPublic]
    count: int


class DeliveryAttemptPublic(BaseModel):
    number: int
    started_at: AwareDatetime
    status_code: int | None = Field(description="None: no answer (see error)")
    latency_ms: float
    error: str | None = Field(
        description="why the try failed: `kind: detail` for an operator; a viewer sees the "
        "kind only (refused, timed out, ConnectError, redirected, HTTP 500)"
    )
    retry_after_s: float | None = Field(description="the receiver's Retry-After, in seconds")
    response: str | None = Field(
        description="the answer's first 1,000 characters; for an operator only (null for a viewer)"
    )


class DeliveryPublic(BaseModel):
    """One message to the endpoint and every try at sending it."""

    id: int
    endpoint_id: int
    message_id: str = Field(description="its webhook-id (the same on every try)")
    kind: Literal["alert", "test", "redelivery"]
    event_status: NotificationStatus
    transition_id: int | None
    redelivery_of: int | None
    status: DeliveryStatus
    attempts: list[DeliveryAttemptPublic]
    next_attempt_at: AwareDatetime | None
    created_at: AwareDatetime
    finished_at: AwareDatetime | None
    last_status_code: int | None
    last_error: str | None = Field(description="the last try's error, shown as `error` is")
    body: str = Field(description="exactly what is sent")


class DeliveriesPublic(BaseModel):
    data: list[DeliveryPublic]
    count: int
