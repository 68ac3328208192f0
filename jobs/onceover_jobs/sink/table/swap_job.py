"""One BigQuery query job under an id the caller fixes, run at most once.

"If the BigQuery REST API receives a jobs.insert request for a job with the same ID, the
REST API fails because the job already exists" (Google's Python client, "Design of query
retries"). So a driver that died while its swap ran asks for the same job again and is
told it exists: it waits for that job's outcome, and never runs a second transaction
beside the first. A job that failed rolled its transaction back; the caller may try again
under the next id (:func:`job_id_of` takes an attempt).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onceover.bigquery import BigQueryConfig

logger = logging.getLogger(__name__)

POLL_S = 0.5
RETRYABLE_REASONS = frozenset(
    {"backendError", "internalError", "rateLimitExceeded", "jobBackendError", "jobInternalError"}
)
"""A failed job's reasons that say nothing about the statement: the next attempt may pass.
A transaction that lost to a concurrent one says so in its message (below)."""
_CONCURRENT = ("concurrent update", "aborted due to concurrent")


@dataclass(frozen=True)
class JobOutcome:
    job_id: str
    error: dict[str, Any] | None = None
    """The job's errorResult when it failed (its transaction rolled back)."""
    inserted_rows: int | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None

    @property
    def retryable(self) -> bool:
        if self.error is None:
            return False
        message = str(self.error.get("message", "")).lower()
        return self.error.get("reason") in RETRYABLE_REASONS or any(
            phrase in message for phrase in _CONCURRENT
        )


def job_id_of(*parts: str, attempt: int) -> str:
    """A job id fixed by ``parts`` (the write) and the attempt: letters, digits, ``_``."""
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]
    return f"onceover_overwrite_{digest}_{attempt}"


def run_once(config: BigQueryConfig, job_id: str, sql: str, *, deadline_s: float) -> JobOutcome:
    """Run ``sql`` as job ``job_id``, or wait for the job of that id already asked for;
    its outcome once it is done. Raises TimeoutError past ``deadline_s`` (the job may
    still finish: asking again under the same id finds it)."""
    from google.api_core.exceptions import Conflict
    from google.cloud.bigquery import QueryJobConfig

    from onceover_jobs.sink.rows.schema import rest_client

    client = rest_client(config)
    job: Any
    try:
        job = client.query(sql, job_id=job_id, job_config=QueryJobConfig(), job_retry=None)
    except Conflict:
        logger.info("onceover: job %s was asked for before; waiting for its outcome", job_id)
        job = client.get_job(job_id)
    deadline = time.monotonic() + deadline_s
    while True:
        job.reload()
        if job.state == "DONE":
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {job.state} after {deadline_s:.0f} s")
        time.sleep(POLL_S)  # polling BigQuery's job, not synchronising threads
    return JobOutcome(job_id, error=job.error_result)
