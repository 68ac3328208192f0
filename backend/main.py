"""The FastAPI application: the API under ``/api`` and the built dashboard at ``/``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles

from backend.api.main import api_router
from backend.core.config import Settings, get_settings
from backend.core.db import build_engine
from backend.services.health import BigQueryProbe
from onceover import __version__
from onceover.bigquery import BigQueryConfig

logger = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, bigquery: BigQueryConfig | None = None) -> FastAPI:
    """Build the app; BigQuery comes from ``ONCEOVER_BIGQUERY_*`` unless given."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        app.state.engine.dispose()

    app = FastAPI(
        lifespan=lifespan,
        title="Onceover control plane",
        version=__version__,
        description="Events, state, reconciliation, alerts and resume for exactly-once "
        "Spark to BigQuery loads.",
    )
    app.state.settings = settings
    app.state.engine = build_engine(settings.database_url)
    app.state.bigquery_probe = BigQueryProbe(bigquery or BigQueryConfig.from_env())
    app.include_router(api_router)
    _serve_dashboard(app, settings)
    return app


def _serve_dashboard(app: FastAPI, settings: Settings) -> None:
    index = settings.frontend_dist / "index.html"
    if index.is_file():
        app.mount("/", StaticFiles(directory=settings.frontend_dist, html=True), name="dashboard")
        return
    logger.warning("dashboard not built (%s missing); run `make frontend`", index)

    @app.get("/", include_in_schema=False)
    def dashboard_not_built() -> PlainTextResponse:
        return PlainTextResponse(
            f"The dashboard is not built ({index} is missing): run `make frontend`.",
            status_code=503,
        )
