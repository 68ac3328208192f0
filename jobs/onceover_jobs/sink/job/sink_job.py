"""What the driver decides once and ships to every task: a small picklable value."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover.bigquery import BigQueryConfig
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.job.lineage_config import LineageConfig
from onceover_jobs.sink.job.options import SinkOptions
from onceover_jobs.sink.ledger.identity import WriteIdentity
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.wire.retry import RetryPolicy

if TYPE_CHECKING:
    from onceover_jobs.sink.rows.plan import WritePlan


@dataclass(frozen=True)
class SinkJob:
    options: SinkOptions
    bigquery: BigQueryConfig
    plan: WritePlan
    table_fields: tuple[dict[str, Any], ...]
    """The table's schema as BigQuery API dicts (SchemaField.to_api_repr)."""
    query_id: str
    """The streaming query's id (stable across restarts), or the run id of a batch write."""
    run_id: str
    streaming: bool
    probe: str | None = None
    """The file the driver left in the ledger for the tasks to find (ledger.leave_probe)."""
    write: WriteIdentity | None = None
    """Which write this is: known on the driver for the streaming sink, worked out by
    the tasks otherwise (onceover_jobs.sink.ledger.identity); see :meth:`for_write`."""
    lineage: LineageConfig | None = None
    """Where OpenLineage events go (onceover_jobs.sink.job.lineage_config); None: nowhere."""

    def for_write(self, write: WriteIdentity) -> SinkJob:
        """This job as the write ``write``: its ledger, and the run and query events name.
        A foreachBatch write is its query's: events carry the query id as run id unless
        the user named the run."""
        if write.kind == "foreachBatch":
            return replace(
                self, write=write, query_id=write.scope, run_id=self.options.run_id or write.scope
            )
        return replace(self, write=write)

    @property
    def table(self) -> str:
        return self.options.table

    @property
    def parent(self) -> str:
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
        return RetryPolicy(deadline_s=self.options.retry_deadline_s)

    def ledger(self) -> Ledger:
        assert self.options.ledger is not None  # parse_options always sets it
        assert self.write is not None, "the write's identity is worked out first"
        return Ledger.of(self.options.ledger, self.write)

    def schema_fields(self) -> list[Any]:
        from google.cloud.bigquery import SchemaField

        return [SchemaField.from_api_repr(field) for field in self.table_fields]


def table_parent(table: str) -> str:
    """``project.dataset.table`` as the Storage Write API names it."""
    project, dataset, name = table.rsplit(".", 2)
    return f"projects/{project}/datasets/{dataset}/tables/{name}"


def streaming_query_id(checkpoint: str) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (the same after a restart)."""
    path = Path(checkpoint) / "metadata"
    try:
        query_id = json.loads(path.read_text())["id"]
    except (OSError, ValueError, KeyError) as exc:
        raise LedgerError(
            f"cannot read the streaming query id from {path}: {exc}; is "
            "checkpointLocation a local or mounted path this process can read?"
        ) from exc
    return str(query_id)
