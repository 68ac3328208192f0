"""What the driver decides once and ships to every task: a small picklable value."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from onceover.bigquery import BigQueryConfig
from onceover.ledger_store import LedgerStore, StoreLike, open_store
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.job.lineage_config import LineageConfig
from onceover_jobs.sink.job.options import SinkOptions
from onceover_jobs.sink.ledger.identity import UnresolvedWrite, WriteIdentity
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.table.date_partition import DatePartition
from onceover_jobs.sink.table.overwrite import Overwrite
from onceover_jobs.sink.wire.retry import RetryPolicy

if TYPE_CHECKING:
    from onceover_jobs.sink.rows.change_capture import ChangeCapture
    from onceover_jobs.sink.rows.plan import WritePlan


@dataclass(frozen=True)
class SinkJob:
    options: SinkOptions
    bigquery: BigQueryConfig
    plan: WritePlan
    table_fields: tuple[dict[str, Any], ...]
    """The table's schema as BigQuery API dicts (SchemaField.to_api_repr)."""
    write: WriteIdentity | UnresolvedWrite
    """Which write this is: known on the driver for the streaming sink; for any other
    write unresolved until a task works it out (onceover_jobs.sink.ledger.identity). The
    run and query ids follow from it, decided nowhere else."""
    probe: str | None = None
    """The file the driver left in the ledger for the tasks to find (ledger.leases.leave_probe)."""
    lineage: LineageConfig | None = None
    """Where OpenLineage events go (onceover_jobs.sink.job.lineage_config); None: nowhere."""
    overwrite: Overwrite | None = None
    """A ``mode("overwrite")`` write: its rows go to this staging table, then replace the
    table's (onceover_jobs.sink.protocol.overwrite); None: an append."""
    date_partition: DatePartition | None = None
    """``datePartition``: the one partition every row must fall in, and the one an
    overwrite replaces (onceover_jobs.sink.table.date_partition); None: any."""
    change_capture: ChangeCapture | None = None
    """A change data capture write (the DataFrame has ``_CHANGE_TYPE``): the table's
    primary key and the pseudo-columns (onceover_jobs.sink.rows.change_capture); None: rows
    are appended."""

    def resolved_as(self, write: WriteIdentity) -> SinkJob:
        """This job as the write ``write``, which its tasks worked out."""
        return replace(self, write=write)

    @property
    def identity(self) -> WriteIdentity:
        """The write's identity; only once it is resolved (a task's, or the streaming
        sink's own)."""
        assert isinstance(self.write, WriteIdentity), f"{self.write.describe()}: resolve it first"
        return self.write

    @property
    def run_id(self) -> str:
        """The run the write's events name: the ``run_id`` option, else the write's
        scope (the query's id for a query's write: a foreachBatch write is its query's;
        the id made on the driver for a batch write)."""
        if isinstance(self.write, UnresolvedWrite):
            return self.write.run_id
        return self.options.run_id or self.write.scope

    @property
    def query_id(self) -> str:
        """The streaming query's id (stable across restarts), or the run id of a batch write."""
        if isinstance(self.write, UnresolvedWrite):
            return self.write.run_id
        return self.write.scope

    @property
    def in_query(self) -> bool:
        """A streaming query's write (its own micro-batch, or a foreachBatch call's); not
        a batch write, nor a write no task has identified."""
        return isinstance(self.write, WriteIdentity) and self.write.in_query

    @property
    def table(self) -> str:
        return self.options.table

    @property
    def parent(self) -> str:
        """Where the tasks' streams write: the table, or an overwrite's staging table."""
        if self.overwrite is not None:
            return table_parent(self.overwrite.staging)
        return table_parent(self.options.table)

    @property
    def dead_letter_parent(self) -> str | None:
        """The dead-letter table as a Storage Write parent; None without one."""
        if self.options.dead_letter is None:
            return None
        return table_parent(self.options.dead_letter)

    @property
    def retry_policy(self) -> RetryPolicy:
        """How long BigQuery calls are retried (the ``retry.deadline_s`` option)."""
        return RetryPolicy(
            deadline_s=self.options.retry_deadline_s,
            throttle_deadline_s=self.options.retry_throttle_s,
        )

    @property
    def store(self) -> LedgerStore:
        """The ledger's store (a disk or a bucket), reached with the write's own
        credentials (for ``gs://``: the connection options, as for BigQuery). One per
        process: a task's executor opens its own from the same location."""
        assert self.options.ledger is not None  # parse_options always sets it
        return open_store(self.options.ledger, self.bigquery.connection)

    @property
    def checkpoint_store(self) -> LedgerStore | None:
        """Spark's checkpoint of a streaming write (its offsets log), wherever it is."""
        if self.options.checkpoint is None:
            return None
        return open_store(self.options.checkpoint, self.bigquery.connection)

    def ledger(self) -> Ledger:
        return Ledger.of(self.store, self.identity)

    def schema_fields(self) -> list[Any]:
        from google.cloud.bigquery import SchemaField

        return [SchemaField.from_api_repr(field) for field in self.table_fields]


def table_parent(table: str) -> str:
    """``project.dataset.table`` as the Storage Write API names it."""
    project, dataset, name = table.rsplit(".", 2)
    return f"projects/{project}/datasets/{dataset}/tables/{name}"


def streaming_query_id(checkpoint: StoreLike) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (the same after a restart),
    read wherever the checkpoint is (a disk or a bucket)."""
    store = open_store(checkpoint)
    where = store.where("metadata")
    found = store.read("metadata")
    if found is None:
        raise LedgerError(
            f"cannot read the streaming query id from {where}: Spark wrote no metadata there; "
            "is checkpointLocation the query's own?"
        )
    try:
        query_id = json.loads(found.data)["id"]
    except (ValueError, KeyError) as exc:
        raise LedgerError(f"cannot read the streaming query id from {where}: {exc}") from exc
    return str(query_id)
