"""``duplicate_job_id``: a job inserted under an id already taken is refused, not run again.

BigQuery keeps a job's id for good: "If the BigQuery REST API receives a jobs.insert
request for a job with the same ID, the REST API fails because the job already exists"
(Google's Python client, "Design of query retries"): HTTP 409, reason ``duplicate``,
"Already Exists: Job <project>:<location>.<id>". That is what makes a job asked for again
after a lost answer run at most once, and the overwrite's swap relies on it
(``onceover_jobs.sink.table.swap_job``). bqemulator ran the second request's statement
again and overwrote the first job's record. The patch refuses a query, load, extract or
copy job whose id the catalog already holds, before anything runs (a dry run, which keeps
no job, is left alone).

Pinned by ``tests/localbq/test_patches.py``:
``test_a_job_inserted_again_under_its_id_is_refused_and_not_run_twice``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap

HANDLERS = (
    "_handle_query_job",
    "_handle_load_job_with_async_envelope",
    "execute_extract_job",
    "execute_copy_job",
)
"""What ``jobs.insert`` calls for each kind of job, looked up in its module at each call."""


def apply() -> None:
    """Refuse each kind of job under an id the catalog holds."""
    from bqemulator.api.routes import jobs
    from bqemulator.domain.errors import ResourceRef, resource_already_exists

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        async def handle(
            project_id: str, job_id: str, config: dict[str, Any], *args: Any, **kwargs: Any
        ) -> Any:
            ctx = kwargs.get("ctx", args[0] if args else None)
            dry_run = bool(config.get("dryRun", kwargs.get("dry_run", False)))
            if ctx is not None and not dry_run and ctx.catalog.get_job(project_id, job_id):
                raise resource_already_exists(ResourceRef("job", project_id, None, job_id))
            return await original(project_id, job_id, config, *args, **kwargs)

        return handle

    for name in HANDLERS:
        wrap(jobs, name, make)
