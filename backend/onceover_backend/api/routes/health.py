"""``/api/health``: is the control plane up, and can it reach its database and BigQuery?"""

from fastapi import APIRouter, Request, Response, status

from onceover_backend.models import HealthPublic
from onceover_backend.services.reads.health import HealthChecks

router = APIRouter(prefix="/health", tags=["health"])


@router.get(
    "",
    operation_id="getHealth",
    response_model=HealthPublic,
    responses={503: {"model": HealthPublic, "description": "A dependency is unreachable"}},
)
async def get_health(*, request: Request, response: Response) -> HealthPublic:
    """Check the database and BigQuery; 503 when either fails, with the reason.

    Anyone may call it: concurrent calls share one check of each dependency, its answer
    is reused for ``ONCEOVER_HEALTH_CACHE_S`` (``age_s``), and one address gets an answer
    at most every ``ONCEOVER_HEALTH_CLIENT_INTERVAL_S`` (calls in between wait their turn).
    """
    checks: HealthChecks = request.app.state.health
    client = request.client.host if request.client else None
    health = await checks.health(client, getattr(request.app.state, "unauthenticated", 0))
    if health.status != "ok":
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return health
