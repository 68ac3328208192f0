"""``/api/health``: is the control plane up, and can it reach its database and BigQuery?"""

from fastapi import APIRouter, Request, Response, status

from backend.api.deps import BigQueryProbeDep, EngineDep, SettingsDep
from backend.models import HealthPublic
from backend.services.health import check_health

router = APIRouter(prefix="/health", tags=["health"])


@router.get(
    "",
    operation_id="getHealth",
    response_model=HealthPublic,
    responses={503: {"model": HealthPublic, "description": "A dependency is unreachable"}},
)
async def get_health(
    *,
    request: Request,
    response: Response,
    settings: SettingsDep,
    engine: EngineDep,
    probe: BigQueryProbeDep,
) -> HealthPublic:
    """Check the database and BigQuery; 503 when either fails, with the reason."""
    unauthenticated = getattr(request.app.state, "unauthenticated", 0)
    health = await check_health(engine, probe, settings.health_timeout_s, unauthenticated)
    if health.status != "ok":
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return health
