"""OpenLineage run events of the sink's writes, with the receipts of what they committed.

Sent from the driver's commit and abort, beside the run events of
:mod:`onceover_jobs.sink.reporting.run_report`, to the receiver
:mod:`onceover_jobs.sink.job.lineage_config` finds, through the same outbox as the control
plane's events (bounded buffer, fsynced spool, backoff; :mod:`onceover_jobs.outbox`), one
event per POST:

- ``START`` once per run attempt (the driver): its ``eventTime`` is the driver's start,
  and a marker file makes the first commit of the attempt the one that sends it, in
  whichever of the driver's Python workers it runs (OpenLineage consumers do not dedupe);
- ``RUNNING`` after each committed micro-batch of a ``writeStream`` or ``foreachBatch``
  query, ``COMPLETE`` after a batch write commits, ``FAIL`` after an abort, with the
  standard ``errorMessage`` facet.

The run's ``runId`` is a UUID derived from the run id and the attempt, so every event of
one attempt names the same run. The job is ``OPENLINEAGE_NAMESPACE`` / the ``job``
option (else ``onceover.<table>``); the output dataset is the table as the naming spec
names BigQuery tables (namespace ``bigquery``, name ``project.dataset.table``), with its
``schema`` and, for what the event committed, ``outputStatistics``. The run facet
``onceover_receipts`` (schema: ``docs/openlineage/OnceoverReceiptsRunFacet.json``) carries
the run, the attempt and the receipt of each batch the event reports.

A job that reports its run itself (``run_events=false``, as ``onceover_jobs.load_files``)
sends START and COMPLETE or FAIL itself (:func:`run_event`) and gives the sink its
runId (``openlineage.run_id``); the sink then sends only RUNNING per committed batch.
Reporting never fails a write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from onceover import __version__
from onceover.ledger_files import BatchRecord
from onceover_jobs.outbox import (
    WRITE_PATH_PATIENCE_S,
    EventEmitterLike,
    Wire,
    default_spool_root,
    emitter_for,
)
from onceover_jobs.sink.job.lineage_config import LineageConfig
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import WriteIdentity

logger = logging.getLogger(__name__)

EventType = Literal["START", "RUNNING", "COMPLETE", "FAIL"]

SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
"""The version of the OpenLineage spec the events follow (the openlineage-python
client's, which the tests validate them with)."""
PRODUCER = f"https://github.com/onceover/onceover/tree/v{__version__}"
"""Names the producer: onceover and its version (a URI, as the spec asks)."""
RECEIPTS_FACET = "onceover_receipts"
RECEIPTS_SCHEMA = (
    f"https://github.com/onceover/onceover/blob/v{__version__}/docs/openlineage/"
    "OnceoverReceiptsRunFacet.json#/$defs/OnceoverReceiptsRunFacet"
)
BIGQUERY_NAMESPACE = "bigquery"
"""The naming spec's namespace of every BigQuery dataset (table name ``project.dataset.table``)."""
SPOOL_FOLDER = "openlineage"
MAX_ERROR_CHARS = 4000
FLUSH_S = 2.0
"""What a commit gives the receiver (as for the control plane's events); the rest is spooled."""
_STARTED_KEPT_S = 30 * 86_400
"""How long the marker of a START sent stays: longer than any driver lives."""
_RUN_NAMESPACE = uuid.UUID("5b1f0d0e-7c43-4c5e-9a55-0a3c6e4e0a11")

_FACETS = "https://openlineage.io/spec/facets"
_SCHEMA_URL = f"{_FACETS}/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
_STATISTICS_URL = (
    f"{_FACETS}/1-0-2/OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet"
)
_JOB_TYPE_URL = f"{_FACETS}/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
_ERROR_URL = f"{_FACETS}/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"


def wire(config: LineageConfig) -> Wire:
    """How events reach ``config``'s receiver: one a POST, to its endpoint."""
    return Wire(
        path=config.target,
        one_per_request=True,
        receiver="OpenLineage receiver",
        credential="API key (openlineage.api_key, OPENLINEAGE_API_KEY or the config file's apiKey)",
        spool_folder=SPOOL_FOLDER,
    )


def lineage_emitter(config: LineageConfig | None) -> EventEmitterLike:
    """The process's emitter for ``config`` (a do-nothing one without)."""
    if config is None:
        return emitter_for(None, None)
    return emitter_for(config.target, config.api_key, wire=wire(config))


def lineage_run_id(run_id: str, attempt_id: str) -> str:
    """The OpenLineage ``runId`` of one attempt of a run: the same on every call."""
    return str(uuid.uuid5(_RUN_NAMESPACE, f"{run_id}\0{attempt_id}"))


# -- the event --------------------------------------------------------------------------


def _facet(schema_url: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": schema_url, **fields}


def receipt(record: BatchRecord) -> dict[str, Any]:
    """One committed batch as the receipts facet lists it."""
    return {
        "query": record.query_id,
        "batch": record.batch_id,
        "write": record.write or None,
        "table": record.table,
        "mode": record.mode,
        "rows": record.expected_rows,
        "bytes": sum(s.bytes for s in record.streams),
        "streams": [
            {"stream": s.stream, "rows": s.rows, "bytes": s.bytes, "partition": s.partition}
            for s in record.streams
        ],
        # BigQuery's time where it gives one (pending), else the driver's.
        "commitTime": record.commit_time or record.committed_at,
        "sourceOffsets": None if record.offsets is None else list(record.offsets),
        "keyChecksum": record.key_checksum,
        "resolved": record.resolved,
        "deadLetteredRows": record.dead_lettered_rows,
    }


def schema_fields(table_fields: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's columns (BigQuery API dicts) as the ``schema`` facet's fields."""
    fields = []
    for column in table_fields:
        kind = str(column.get("type", "")).upper()
        field: dict[str, Any] = {
            "name": column["name"],
            "type": f"ARRAY<{kind}>" if column.get("mode") == "REPEATED" else kind,
        }
        if column.get("description"):
            field["description"] = column["description"]
        if column.get("fields"):
            field["fields"] = schema_fields(column["fields"])
        fields.append(field)
    return fields


def run_event(
    event_type: EventType,
    *,
    config: LineageConfig,
    run_uuid: str,
    job_name: str,
    streaming: bool,
    table: str,
    onceover_run_id: str,
    attempt_id: str,
    when: datetime | None = None,
    receipts: Sequence[BatchRecord] = (),
    rows: int | None = None,
    table_fields: Sequence[dict[str, Any]] = (),
    error: str | None = None,
) -> dict[str, Any]:
    """One OpenLineage RunEvent (a plain JSON object, as the spec draws it).

    ``rows``: the rows the event reports committed when no receipt says (a job's end).
    """
    dataset_facets: dict[str, Any] = {}
    if table_fields:
        dataset_facets["schema"] = _facet(_SCHEMA_URL, fields=schema_fields(table_fields))
    output: dict[str, Any] = {
        "namespace": BIGQUERY_NAMESPACE,
        "name": table,
        "facets": dataset_facets,
    }
    statistics: dict[str, int] | None = None
    if receipts:
        statistics = {
            "rowCount": sum(r.expected_rows for r in receipts),
            "size": sum(s.bytes for r in receipts for s in r.streams),
        }
    elif rows is not None:
        statistics = {"rowCount": rows}
    if statistics is not None:
        output["outputFacets"] = {"outputStatistics": _facet(_STATISTICS_URL, **statistics)}
    run_facets: dict[str, Any] = {
        RECEIPTS_FACET: _facet(
            RECEIPTS_SCHEMA,
            runId=onceover_run_id,
            attemptId=attempt_id,
            receipts=[receipt(r) for r in receipts],
        )
    }
    if error is not None:
        run_facets["errorMessage"] = _facet(
            _ERROR_URL, message=error[:MAX_ERROR_CHARS], programmingLanguage="PYTHON"
        )
    return {
        "eventType": event_type,
        "eventTime": (when or datetime.now(UTC)).isoformat(),
        "producer": PRODUCER,
        "schemaURL": f"{SPEC}#/$defs/RunEvent",
        "run": {"runId": run_uuid, "facets": run_facets},
        "job": {
            "namespace": config.namespace,
            "name": job_name,
            "facets": {
                "jobType": _facet(
                    _JOB_TYPE_URL,
                    processingType="STREAMING" if streaming else "BATCH",
                    integration="SPARK",
                    jobType="JOB",
                )
            },
        },
        "inputs": [],
        "outputs": [output],
    }


def job_name(job: str | None, table: str) -> str:
    """The OpenLineage job: the ``job`` option, else the one that writes ``table``."""
    return job or f"onceover.{table}"


# -- what the sink sends ----------------------------------------------------------------


class LineageReport:
    """The OpenLineage events of one write, sent after its driver commits or aborts a batch."""

    def __init__(self, job: SinkJob, batch_id: int | None) -> None:
        from onceover_jobs.sink.reporting.run_report import driver_attempt_id

        self.job = job
        self.batch_id = batch_id
        self.config = job.lineage
        self.attempt_id = driver_attempt_id()
        self.run_uuid = (
            self.config.run_id
            if self.config is not None and self.config.run_id is not None
            else lineage_run_id(job.run_id, self.attempt_id)
        )

    @property
    def _owns_the_run(self) -> bool:
        """Whether the sink says when the run starts and ends (else the job does)."""
        return self.job.options.run_events

    @property
    def _ends_with_the_write(self) -> bool:
        return not self.job.in_query

    def committed(self, record: BatchRecord | None) -> None:
        """After a commit: the run started; a batch write's run COMPLETE, a query's RUNNING.
        ``record``: the batch committed (None when no task ran: nothing was written)."""
        if self.config is None:
            return
        emitter = lineage_emitter(self.config)
        try:
            if self._owns_the_run:
                self._start(emitter)
            receipts = [] if record is None else [record]
            if self._owns_the_run and self._ends_with_the_write:
                emitter.emit(self._event("COMPLETE", receipts))
            elif receipts:
                emitter.emit(self._event("RUNNING", receipts))
        except Exception:
            logger.exception("could not report the lineage of %s", self.job.run_id)
        finally:
            _flush(emitter)

    def aborted(self, why: str) -> None:
        """After an abort: the run FAILed (a failed micro-batch stops its query), with
        the receipt of the batch if its commit took effect all the same."""
        if self.config is None or not self._owns_the_run:
            return
        emitter = lineage_emitter(self.config)
        try:
            self._start(emitter)
            emitter.emit(self._event("FAIL", self._committed_anyway(), error=why))
        except Exception:
            logger.exception("could not report the lineage of %s", self.job.run_id)
        finally:
            _flush(emitter)

    def _committed_anyway(self) -> list[BatchRecord]:
        write = self.job.write
        if not isinstance(write, WriteIdentity):  # no task ran: nothing was committed
            return []
        batch = self.batch_id if self.batch_id is not None else write.batch_id
        with contextlib.suppress(Exception):  # the abort's own cause may be the ledger
            record = self.job.ledger().batch(batch)
            if record is not None and record.committed:
                return [record]
        return []

    def _start(self, emitter: EventEmitterLike) -> None:
        from onceover_jobs.sink.reporting.run_report import driver_started_at

        if first_start(self.run_uuid):
            emitter.emit(self._event("START", [], when=driver_started_at()))

    def _event(
        self,
        event_type: EventType,
        receipts: Sequence[BatchRecord],
        *,
        when: datetime | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        assert self.config is not None
        options = self.job.options
        return run_event(
            event_type,
            config=self.config,
            run_uuid=self.run_uuid,
            job_name=job_name(options.job, options.table),
            streaming=self.job.in_query,
            table=options.table,
            onceover_run_id=self.job.run_id,
            attempt_id=self.attempt_id,
            when=when,
            receipts=receipts,
            table_fields=self.job.table_fields,
            error=error,
        )


def _flush(emitter: EventEmitterLike) -> None:
    try:
        emitter.flush(FLUSH_S, patience_s=WRITE_PATH_PATIENCE_S)
    except Exception:
        logger.exception("could not flush lineage events")


def first_start(run_uuid: str, root: Path | None = None) -> bool:
    """Whether this is the first call for ``run_uuid`` on this machine: a marker file
    made exclusively under the spool root, so of the driver's Python workers (a commit
    may run in any) exactly one sends the run's START. A marker that cannot be made
    answers True: a START twice is better than none."""
    try:
        folder = (root or default_spool_root()) / SPOOL_FOLDER / "started"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder / run_uuid, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except Exception:
        logger.warning("cannot record the START of run %s; sending it", run_uuid, exc_info=True)
        return True
    os.close(fd)
    _forget_old_starts(folder)
    return True


def _forget_old_starts(folder: Path) -> None:
    """Markers of attempts long over (one empty file each) go; never fails."""
    cutoff = time.time() - _STARTED_KEPT_S
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
