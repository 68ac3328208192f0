"""``GET /metrics``: the control plane in Prometheus's text format, for a scraper that
shows the metrics token (or a viewer's); docs/guides/production.md, "Monitoring"."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Response

from onceover_backend.api.deps import MetricsDep, MetricsExportDep
from onceover_backend.services.prometheus.exposition import CONTENT_TYPE

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    operation_id="getPrometheusMetrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text format"}},
)
async def prometheus_metrics(*, export: MetricsExportDep, _principal: MetricsDep) -> Response:
    """Per table: rows committed, rows set aside, append requests by retry code, the
    overview's figures (rows today, the 24 hours' requests, freshness, the newest
    reconciliation); runs by status; alerts firing by rule; webhook deliveries by status;
    events ingested and the ingest lag; request latency and queue depths."""
    body = await anyio.to_thread.run_sync(export.render)  # a few queries
    return Response(content=body, media_type=CONTENT_TYPE)
