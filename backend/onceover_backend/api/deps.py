"""Dependencies the routes declare, as ``Annotated`` aliases (routes never call ``Depends``).

Every route under ``/api`` except ``/api/health`` declares one of ``IngestDep``,
``ViewerDep`` or ``OperatorDep``; tests walk the app's routes and fail on one that
declares none.

A dependency that only reads the app's state is ``async``: FastAPI runs a plain ``def``
one in its thread pool, a hand-off and back for each, and ``POST /api/events`` declares
five (docs/journal/profiling.md, "What a small POST costs, again"). What may wait on the
database (a session, a stored token's lookup) still runs on a worker thread.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from sqlmodel import Session

from onceover_backend.api.authentication import CSRF_HEADER, authenticate
from onceover_backend.core.config import Settings
from onceover_backend.core.security import Principal, hash_token
from onceover_backend.errors import NotAllowedError
from onceover_backend.services.ingest.changes import ChangeFeed
from onceover_backend.services.ingest.group_commit import GroupCommit
from onceover_backend.services.prometheus.exposition import MetricsExport
from onceover_backend.services.reconciliation.automatic import AutomaticChecks
from onceover_backend.services.reconciliation.runner import Reconciler
from onceover_backend.services.redrive.redriver import Redriver
from onceover_backend.services.resume.resumer import Resumer
from onceover_backend.services.webhooks.dispatch import Dispatcher


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine) as session:
        yield session


async def get_reconciler(request: Request) -> Reconciler:
    reconciler: Reconciler = request.app.state.reconciler
    return reconciler


async def get_automatic_checks(request: Request) -> AutomaticChecks:
    checks: AutomaticChecks = request.app.state.automatic_checks
    return checks


async def get_resumer(request: Request) -> Resumer:
    resumer: Resumer = request.app.state.resumer
    return resumer


async def get_redriver(request: Request) -> Redriver:
    redriver: Redriver = request.app.state.redriver
    return redriver


async def get_dispatcher(request: Request) -> Dispatcher:
    dispatcher: Dispatcher = request.app.state.dispatcher
    return dispatcher


async def get_change_feed(request: Request) -> ChangeFeed:
    feed: ChangeFeed = request.app.state.change_feed
    return feed


async def get_group_commit(request: Request) -> GroupCommit:
    group_commit: GroupCommit = request.app.state.group_commit
    return group_commit


ANY_ROLE = "any"
_bearer = HTTPBearer(auto_error=False, description="A token with the role the route names")


class RoleCheck:
    """Accepts a bearer token (or a signed-in session: api/authentication.py) whose role
    includes ``role``; 401 without one, 403 otherwise.

    ``ANY_ROLE`` accepts every valid token (for asking who one is)."""

    def __init__(self, role: str) -> None:
        self.role = role

    async def __call__(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        # A call with a body was authenticated before its body was read
        # (backend/onceover_backend/api/body_guard.py); the principal it found is the token's.
        principal: Principal | None = getattr(request.state, "principal", None)
        if principal is None:
            principal = await authenticate(
                request.app.state,
                method=request.method,
                authorization=request.headers.get("authorization", ""),
                cookies=request.cookies,
                csrf=request.headers.get(CSRF_HEADER),
            )
            request.state.principal = principal
        if self.role != ANY_ROLE and not principal.may(self.role):
            raise NotAllowedError(
                f"this needs the {self.role} role; the token has {principal.role}"
            )
        return principal


class MetricsCheck:
    """``GET /metrics``: the metrics token (``ONCEOVER_METRICS_TOKEN``), which reads
    nothing else, or any token a viewer's route takes."""

    def __init__(self) -> None:
        self._viewer = RoleCheck("viewer")

    async def __call__(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        settings: Settings = request.app.state.settings
        token = settings.metrics_token.get_secret_value().strip()
        if (
            token
            and credentials is not None
            and hmac.compare_digest(hash_token(credentials.credentials), hash_token(token))
        ):
            return Principal(name="env:metrics", role="metrics")
        return await self._viewer(request, credentials)


async def get_metrics_export(request: Request) -> MetricsExport:
    export: MetricsExport = request.app.state.metrics
    return export


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SessionDep = Annotated[Session, Depends(get_session)]
ReconcilerDep = Annotated[Reconciler, Depends(get_reconciler)]
AutomaticChecksDep = Annotated[AutomaticChecks, Depends(get_automatic_checks)]
ResumerDep = Annotated[Resumer, Depends(get_resumer)]
RedriverDep = Annotated[Redriver, Depends(get_redriver)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]
ChangeFeedDep = Annotated[ChangeFeed, Depends(get_change_feed)]
GroupCommitDep = Annotated[GroupCommit, Depends(get_group_commit)]
AnyRoleDep = Annotated[Principal, Depends(RoleCheck(ANY_ROLE))]
IngestDep = Annotated[Principal, Depends(RoleCheck("ingest"))]
ViewerDep = Annotated[Principal, Depends(RoleCheck("viewer"))]
OperatorDep = Annotated[Principal, Depends(RoleCheck("operator"))]
MetricsDep = Annotated[Principal, Depends(MetricsCheck())]
MetricsExportDep = Annotated[MetricsExport, Depends(get_metrics_export)]
