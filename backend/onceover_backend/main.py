"""The FastAPI application: the API under ``/api`` and the built dashboard at ``/``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from http import HTTPStatus

import anyio
from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from onceover import __version__
from onceover.bigquery import BigQueryConfig
from onceover_backend.api.body_guard import BodyGuardMiddleware
from onceover_backend.api.main import AUTH_RESPONSES, api_router
from onceover_backend.api.middleware import RequestContextMiddleware
from onceover_backend.api.routes import auth, prometheus
from onceover_backend.api.validation_answer import validation_error
from onceover_backend.core.config import Settings, get_settings
from onceover_backend.core.db import build_engine
from onceover_backend.core.interpreter import server_interpreter
from onceover_backend.core.security import TokenVerifier
from onceover_backend.errors import ControlPlaneError, NotAuthenticatedError
from onceover_backend.services.access.sso import SingleSignOn
from onceover_backend.services.alerts.evaluator import evaluate_forever
from onceover_backend.services.ingest.changes import ChangeFeed
from onceover_backend.services.ingest.group_commit import GroupCommit
from onceover_backend.services.launch.launcher import Launcher
from onceover_backend.services.prometheus.exposition import MetricsExport
from onceover_backend.services.reads.health import BigQueryProbe, HealthChecks
from onceover_backend.services.reconciliation.automatic import AutomaticChecks
from onceover_backend.services.reconciliation.runner import Reconciler
from onceover_backend.services.redrive.redriver import Redriver
from onceover_backend.services.resume.auto_resume import auto_resume_forever
from onceover_backend.services.resume.intent_check import IntentChecker
from onceover_backend.services.resume.resumer import Resumer
from onceover_backend.services.resume.stalled import sweep_forever
from onceover_backend.services.retention import retention_forever
from onceover_backend.services.webhooks.dispatch import Dispatcher, dispatch_forever

logger = logging.getLogger(__name__)


def create_app_from_environment() -> FastAPI:
    """The app as each worker of ``onceover serve --workers N`` builds it: settings and
    logging from the environment (a worker process inherits neither object)."""
    from onceover_backend.core.logging import configure_backend_logging

    settings = get_settings()
    configure_backend_logging(settings.log_format)
    return create_app(settings)


def create_app(settings: Settings | None = None, bigquery: BigQueryConfig | None = None) -> FastAPI:
    """Build the app; BigQuery comes from ``ONCEOVER_BIGQUERY_*`` unless given.

    The database must already be at the migrations' head (``onceover serve`` sees to it).
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with server_interpreter():
            async with _background_loops(app, settings):
                yield

    app = FastAPI(
        lifespan=lifespan,
        title="Onceover control plane",
        version=__version__,
        description="Events, state, reconciliation, alerts and resume for exactly-once "
        "Spark to BigQuery loads. Every route but /api/health needs a bearer token "
        "with a role: ingest (jobs), viewer, or operator (a viewer who may also act).",
    )
    app.state.settings = settings
    app.state.engine = build_engine(settings.database_url)
    app.state.token_verifier = TokenVerifier(app.state.engine, settings.token_pairs())
    app.state.sso = SingleSignOn(app.state.engine, settings)
    app.state.change_feed = ChangeFeed()
    app.state.metrics = MetricsExport(
        app.state.engine, lambda: timedelta(seconds=settings.stale_after_s)
    )
    instruments = app.state.metrics.instruments
    app.state.ingest_limiter = anyio.CapacityLimiter(settings.ingest_concurrency)
    app.state.group_commit = GroupCommit(
        app.state.engine,
        max_events=settings.max_events_per_request,
        depth=instruments.ingest_waiting,
    )
    bigquery = bigquery or BigQueryConfig.from_env()
    app.state.bigquery_probe = BigQueryProbe(bigquery)
    app.state.health = HealthChecks(
        app.state.engine,
        app.state.bigquery_probe,
        settings.health_timeout_s,
        settings.health_cache_s,
        settings.health_client_interval_s,
    )
    app.state.reconciler = Reconciler(app.state.engine, bigquery, settings.reconcile_timeout_s)
    app.state.automatic_checks = AutomaticChecks(
        app.state.reconciler,
        settings.reconcile_workers,
        settings.reconcile_queue,
        depth=instruments.reconcile_waiting,
    )
    app.state.launcher = Launcher(settings, bigquery)
    app.state.resumer = Resumer(
        app.state.engine,
        settings,
        app.state.launcher,
        IntentChecker(bigquery),
        app.state.change_feed.notify,
    )
    app.state.redriver = Redriver(
        app.state.engine, settings, app.state.launcher, app.state.change_feed.notify
    )
    app.state.dispatcher = Dispatcher(app.state.engine, settings)
    # Added first, so it runs inside: the request id and audit see its refusals.
    app.add_middleware(BodyGuardMiddleware)
    app.add_middleware(RequestContextMiddleware)
    app.add_exception_handler(ControlPlaneError, _control_plane_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.include_router(api_router)
    app.include_router(prometheus.router, responses=AUTH_RESPONSES)
    app.include_router(auth.router)
    _serve_dashboard(app, settings)
    return app


async def _control_plane_error(_request: Request, exc: ControlPlaneError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, NotAuthenticatedError) else None
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI's answer, except that a 405's ``Allow`` names the methods of every route
    on the path: Starlette names only those of the first route it found there."""
    if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
        methods: set[str] = set()
        for route in request.app.router.routes:
            if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
                methods |= route.methods
        exc = StarletteHTTPException(
            exc.status_code, exc.detail, headers={"Allow": ", ".join(sorted(methods))}
        )
    return await http_exception_handler(request, exc)


class DashboardFiles(StaticFiles):
    """The built dashboard. A page's own path (``/runs/ID``, ``/tables/p.ds.t``, as links
    in alerts and bookmarks have them) answers index.html, and the app routes it; unknown
    ``/api/...`` paths and missing ``/assets/...`` files stay 404s."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            return await super().get_response(path, scope)
        except StarletteHTTPException as exc:
            if exc.status_code != 404 or path.split("/", 1)[0] in ("api", "assets"):
                raise
            return await super().get_response("index.html", scope)


@asynccontextmanager
async def _background_loops(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """The server's periodic work (stalled runs, auto-resume, alerts, webhooks,
    retention) while the app runs; then its clients closed and its engine disposed."""
    if settings.metrics_port is not None:
        app.state.metrics.listen(settings.metrics_host, settings.metrics_port)
    stop = asyncio.Event()
    sweeper = asyncio.create_task(
        sweep_forever(
            app.state.engine,
            timedelta(seconds=settings.stalled_after_s),
            settings.stall_check_interval_s,
            stop,
            app.state.change_feed.notify,
        )
    )
    resumer = asyncio.create_task(
        auto_resume_forever(app.state.resumer, settings.auto_resume_interval_s, stop)
    )
    evaluator = asyncio.create_task(evaluate_forever(app.state.engine, settings, stop))
    dispatch = asyncio.create_task(dispatch_forever(app.state.dispatcher, stop))
    retention = asyncio.create_task(retention_forever(app.state.engine, settings, stop))
    yield
    stop.set()
    for task in (sweeper, resumer, evaluator, dispatch, retention):
        await task  # each loop's own thread ends with it (services/periodic.py)
    app.state.health.close()
    app.state.automatic_checks.close()  # waits for checks under way: their deadline
    app.state.dispatcher.close()
    app.state.metrics.close()
    app.state.sso.close()
    app.state.engine.dispose()


def _serve_dashboard(app: FastAPI, settings: Settings) -> None:
    index = settings.frontend_dist / "index.html"
    if index.is_file():
        dashboard = DashboardFiles(directory=settings.frontend_dist, html=True)
        app.mount("/", dashboard, name="dashboard")
        return
    # A wheel carries no built dashboard; a checkout builds one with `make frontend`.
    advice = (
        "point ONCEOVER_FRONTEND_DIST at a built dashboard (`make frontend` in a checkout "
        "builds frontend/dist) or use the Docker image; the API works without it"
    )
    logger.warning("dashboard not found (%s missing): %s", index, advice)

    @app.get("/", include_in_schema=False)
    def dashboard_not_built() -> PlainTextResponse:
        return PlainTextResponse(
            f"The dashboard is not here ({index} is missing): {advice}.",
            status_code=503,
        )
