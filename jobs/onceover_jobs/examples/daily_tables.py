"""A daily batch job as a user writes it: one run id for the day, the day's orders into
a detail table in two writes (a shuffle before the sink), then a per-currency summary
into another table. Run it again after any failure with the same run id: what it
committed is not written again.

    python -m onceover_jobs.examples.daily_tables --source DIR --table P.D.ORDERS \\
        --summary-table P.D.DAILY --run-id day-2026-11-24 --ledger /shared/ledger \\
        [--mode pending|buffered|committed]

The summary table has ``currency STRING, orders INT64``.
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import DataFrame, SparkSession

from onceover.modes import BATCH_DEFAULT_MODE, EXACTLY_ONCE_MODES
from onceover_jobs.sink.datasource import register

SOURCE_SCHEMA = (
    "event_id BIGINT, order_id STRING, customer_id BIGINT, amount DOUBLE, currency STRING, "
    "event_time TIMESTAMP"
)


def save(df: DataFrame, table: str, args: argparse.Namespace) -> None:
    (
        df.write.format("onceover")
        .mode("append")
        .option("table", table)
        .option("mode", args.mode)
        .option("run_id", args.run_id)
        .option("ledger", args.ledger)
        .option("request.max_bytes", str(args.request_max_bytes))
        .save()
    )


def parser_for(module: str) -> argparse.ArgumentParser:
    """The options both examples take: where from, where to, how."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--source", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--summary-table", required=True)
    parser.add_argument("--mode", default=BATCH_DEFAULT_MODE, choices=EXACTLY_ONCE_MODES)
    parser.add_argument("--request-max-bytes", type=int, default=8_000_000)
    parser.add_argument(
        "--master", default="local[2,4]", help="local[2,4]: tasks retried as on a cluster"
    )
    return parser


def session(app_name: str, master: str) -> SparkSession:
    """A small session with ``format("onceover")`` registered."""
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(spark)
    return spark


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("onceover_jobs.examples.daily_tables")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--ledger", required=True)
    args = parser.parse_args(argv)
    spark = session("daily-tables", args.master)
    # A shuffle before the sink: Spark sorts before a round-robin repartition, so a
    # retried task gets the same rows (the sink checks that it does).
    orders = spark.read.schema(SOURCE_SCHEMA).json(args.source).repartition(3)
    save(orders.where("event_id % 2 = 0"), args.table, args)
    save(orders.where("event_id % 2 = 1"), args.table, args)
    totals = orders.groupBy("currency").count().withColumnRenamed("count", "orders")
    save(totals.coalesce(1), args.summary_table, args)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
