"""A streaming job as a user writes it with ``foreachBatch``: each micro-batch's orders
into a detail table in two writes, and one summary row per micro-batch into another
table, with no option but the table (the query id and micro-batch id identify each
write). Run it again on the same checkpoint after any failure.

    python -m onceover_jobs.examples.foreach_batch --source DIR --checkpoint DIR \\
        --table P.D.ORDERS --summary-table P.D.BATCHES [--mode pending|buffered|committed] \\
        [--max-files-per-trigger N]

The summary table has ``batch_id INT64, orders INT64``. The ledger is
``$ONCEOVER_LEDGER`` (else ``~/.onceover/ledger``), or ``--ledger``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from pyspark.sql import DataFrame

from onceover_jobs.examples.daily_tables import SOURCE_SCHEMA, parser_for, session


def writer(args: argparse.Namespace) -> Callable[[DataFrame, int], None]:
    def save(df: DataFrame, table: str) -> None:
        out = (
            df.write.format("onceover")
            .mode("append")
            .option("table", table)
            .option("mode", args.mode)
            .option("request.max_bytes", str(args.request_max_bytes))
        )
        if args.ledger:
            out = out.option("ledger", args.ledger)
        out.save()

    def each_batch(df: DataFrame, batch_id: int) -> None:
        save(df.where("event_id % 2 = 0"), args.table)
        save(df.where("event_id % 2 = 1"), args.table)
        summary = df.selectExpr(f"CAST({batch_id} AS BIGINT) AS batch_id").groupBy("batch_id")
        save(summary.count().withColumnRenamed("count", "orders").coalesce(1), args.summary_table)

    return each_batch


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("onceover_jobs.examples.foreach_batch")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--max-files-per-trigger", type=int, default=1)
    args = parser.parse_args(argv)
    spark = session("foreach-batch", args.master)
    query = (
        spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", args.max_files_per_trigger)
        .json(args.source)
        .writeStream.foreachBatch(writer(args))
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
