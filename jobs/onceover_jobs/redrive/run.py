"""A re-drive, top to bottom: the rows to send, recorded; each table's rows written with
the sink under the re-drive's run id; what landed and what was set aside again."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceover.ledger_store import open_store
from onceover.redrives import redrive_prefix, redriven_run
from onceover_jobs.redrive.rows import read_row, spark_schema
from onceover_jobs.redrive.selection import (
    WRITE_ID,
    Redrive,
    Redrives,
    SetAsideRow,
    describe,
)
from onceover_jobs.sink.errors import RedriveRefusedError
from onceover_jobs.sink.rows.change_capture import CHANGE_TYPE

if TYPE_CHECKING:
    from google.cloud import bigquery
    from pyspark.sql import SparkSession

    from onceover.bigquery import BigQueryConfig

logger = logging.getLogger(__name__)

COLUMNS = ("run_id", "query_id", "batch_id", "write", "table", "partition", "offset", "key",
           "column", "reason", "row")  # fmt: skip


@dataclass(frozen=True)
class RedriveOutcome:
    """What a re-drive did: which one, the rows it sent and those set aside again."""

    run_id: str
    redrive: Redrive | None
    """None: nothing was left to send."""
    sent: int = 0
    set_aside_again: int = 0
    resumed: bool = False
    """It finished an earlier re-drive that had not committed."""

    @property
    def landed(self) -> int:
        return self.sent - self.set_aside_again

    def describe(self) -> str:
        if self.redrive is None:
            return f"run {self.run_id}: no set-aside rows left to re-drive"
        how = "finished" if self.resumed else "done"
        again = (
            f"; {self.set_aside_again} refused again, set aside under {self.redrive.run_id} "
            f"(re-drive {self.run_id} again once fixed)"
            if self.set_aside_again else ""
        )  # fmt: skip
        return (
            f"run {self.run_id}: re-drive {self.redrive.number} {how} as run "
            f"{self.redrive.run_id}: {self.landed} of {self.sent} rows landed{again}"
        )


def redrive(
    spark: SparkSession,
    config: BigQueryConfig,
    *,
    run_id: str,
    dead_letter: str,
    ledger: str,
    key: str | None = None,
    options: dict[str, str] | None = None,
) -> RedriveOutcome:
    """Re-drive ``run_id``'s set-aside rows in ``dead_letter``; ``key``: the column the
    run's writes named rows by (their ``key`` option), so rows set aside again are named
    by it too; ``options`` go to every write (``monitor.url``, ``monitor.token``, ``job``,
    connection options)."""
    from onceover.bigquery import bigquery_client

    if (original := redriven_run(run_id)) is not None:
        # Its rows set aside again are the run's, which a re-drive of the run takes: a
        # re-drive of this one (records of its own) would send them a second time.
        raise RedriveRefusedError(
            f"run {run_id!r} is a re-drive of run {original!r}: re-drive {original!r}, which "
            "sends the rows its re-drives set aside again too"
        )
    client = bigquery_client(config)
    redrives = Redrives(open_store(ledger, config.connection), run_id)
    found = set_aside_rows(client, dead_letter, run_id)
    earlier = redrives.all()
    unfinished = earlier[-1] if earlier and not redrives.committed(earlier[-1]) else None
    if unfinished is not None:  # its rows, as recorded; the same run id: once
        if unfinished.dead_letter not in (None, dead_letter):
            # Its rows are in that table; read from this one, some would be missing, and
            # the record would still mark them taken.
            raise RedriveRefusedError(
                f"re-drive {unfinished.number} of run {run_id} did not finish; it takes its "
                f"rows from {unfinished.dead_letter}, not {dead_letter}: give that table to "
                "finish it first"
            )
        chosen = set(unfinished.rows)
        rows = [r for r in found if r.name in chosen]
        todo = unfinished
    else:
        taken = redrives.taken(earlier)
        rows = [r for r in found if r.name not in taken]
        if not rows:
            return RedriveOutcome(run_id, None)
        todo = redrives.record(len(earlier) + 1, rows, dead_letter)
    logger.info(
        "onceover: re-driving %d rows of run %s as %s: %s",
        len(rows), run_id, todo.run_id, describe(rows),
    )  # fmt: skip
    for table in todo.tables:
        more = {**(options or {}), **({"key": key} if key else {})}
        _write(spark, client, table, [r for r in rows if r.table == table], todo, dead_letter,
               ledger, more)  # fmt: skip
    again = sum(1 for r in set_aside_rows(client, dead_letter, todo.run_id, exact=True))
    return RedriveOutcome(run_id, todo, len(rows), again, resumed=unfinished is not None)


def set_aside_rows(
    client: bigquery.Client, dead_letter: str, run_id: str, *, exact: bool = False
) -> list[SetAsideRow]:
    """The rows ``run_id`` set aside in ``dead_letter``, and (unless ``exact``) those its
    re-drives set aside again, in the order they were written."""
    from google.cloud import bigquery

    which = "`run_id` = @run" if exact else "(`run_id` = @run OR STARTS_WITH(`run_id`, @prefix))"
    query = (
        f"SELECT {', '.join(f'`{c}`' for c in COLUMNS)} FROM `{dead_letter}` WHERE {which} "
        "ORDER BY `run_id`, `batch_id`, `write`, `table`, `partition`, `offset`"
    )
    parameters = [
        bigquery.ScalarQueryParameter("run", "STRING", run_id),
        bigquery.ScalarQueryParameter("prefix", "STRING", redrive_prefix(run_id)),
    ]
    config = bigquery.QueryJobConfig(query_parameters=parameters)
    return [SetAsideRow.of(row) for row in client.query_and_wait(query, job_config=config)]


def _write(  # noqa: PLR0917 - one call site, every argument named there
    spark: SparkSession,
    client: bigquery.Client,
    table: str,
    rows: Sequence[SetAsideRow],
    todo: Redrive,
    dead_letter: str,
    ledger: str,
    options: dict[str, str],
) -> None:
    """``rows`` into ``table`` with the sink, as re-drive ``todo``'s write to it: pending
    mode (committed at once), rows refused again set aside; a change data capture row
    sent again as the change it was (``writeAtLeastOnce``, its own sequence number)."""
    fields = list(client.get_table(table).schema)
    values = [read_row(r.row, fields, f"set-aside row {r.name}") for r in rows]
    names = sorted({name for value in values for name in value})
    schema = spark_schema(fields, names)
    df = spark.createDataFrame([[v.get(f.name) for f in schema.fields] for v in values], schema)
    writer = (
        df.write.format("onceover")
        .option("table", table)
        .option("run_id", todo.run_id)
        .option("write_id", WRITE_ID)
        .option("ledger", ledger)
        .option("dead_letter", dead_letter)
    )
    if CHANGE_TYPE in names:
        writer = writer.option("writeAtLeastOnce", "true")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()
