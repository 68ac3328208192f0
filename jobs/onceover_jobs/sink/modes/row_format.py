"""Which row format a job's appends go in: its ``row_format``, unless BigQuery refused Arrow.

Arrow rows are the default. A project that refuses them (onceover_jobs.sink.wire.arrow_refusal)
refuses them on every stream, so the first refusal switches the job to proto rows in the
process that met it, once and loudly (one WARNING, an ``append_format_refused`` event): the
refused request applied nothing, and the task writes its partition again as proto
(onceover_jobs.sink.protocol.task). Every later stream of the process for that project,
the dead-letter table's too, goes as proto from the start. An executor learns it from its
own first refusal; no row is counted twice, since none of an Arrow request was applied.

Until BigQuery has acknowledged one Arrow append of the project in this process, a task
keeps the batches it has read (at most the requests in flight, ``append.max_inflight``) so
it can send them again; after that it keeps nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onceover_jobs.sink.job.options import RowFormat
    from onceover_jobs.sink.job.sink_job import SinkJob

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_refused: dict[str, str] = {}
"""Project → BigQuery's refusal of its Arrow rows, as first met in this process."""
_accepted: set[str] = set()
"""Projects whose Arrow appends BigQuery has acknowledged in this process."""


def row_format_of(job: SinkJob) -> RowFormat:
    """The format the job's appends go in, in this process."""
    if job.options.row_format == "arrow" and job.options.project in _refused:
        return "proto"
    return job.options.row_format


def arrow_settled(job: SinkJob) -> bool:
    """Whether this process knows BigQuery's answer to the job's Arrow rows (taken or
    refused): nothing then needs keeping to send again."""
    project = job.options.project
    return job.options.row_format != "arrow" or project in _accepted or project in _refused


def arrow_accepted(job: SinkJob) -> None:
    """BigQuery acknowledged an Arrow append of the job's project."""
    _accepted.add(job.options.project)


def arrow_refused(job: SinkJob, refusal: str) -> bool:
    """BigQuery refused the job's Arrow rows (``refusal``: its answer): the job goes on
    as proto rows in this process. True the first time (the caller reports it)."""
    project = job.options.project
    with _lock:
        if project in _refused:
            return False
        _refused[project] = refusal
    logger.warning(
        "onceover: BigQuery refused Arrow rows for project %s (%s): this job's rows go as "
        "proto rows from now on, in this process; nothing of the refused request was "
        "written. Give .option('row_format', 'proto') to start so",
        project, refusal,
    )  # fmt: skip
    return True


def forget() -> None:
    """Forget what this process learned (tests)."""
    with _lock:
        _refused.clear()
        _accepted.clear()
