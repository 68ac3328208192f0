"""A user's own daily batch job, as they would write it: one run id, the day's orders
into a detail table in two writes, then a per-currency summary into another table.

    python tests/jobs/daily_two_tables.py SOURCE DETAIL SUMMARY LEDGER RUN_ID
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame, SparkSession

from jobs.sink.datasource import register

SOURCE_SCHEMA = (
    "event_id BIGINT, order_id STRING, customer_id BIGINT, amount DOUBLE, currency STRING, "
    "event_time TIMESTAMP"
)


def save(df: DataFrame, table: str, run_id: str, ledger: str) -> None:
    (
        df.write.format("onceover")
        .mode("append")
        .option("table", table)
        .option("run_id", run_id)
        .option("ledger", ledger)
        .save()
    )


def main(source: str, detail: str, summary: str, ledger: str, run_id: str) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(spark)
    orders = spark.read.schema(SOURCE_SCHEMA).json(source)
    save(orders.where("event_id % 2 = 0"), detail, run_id, ledger)
    save(orders.where("event_id % 2 = 1"), detail, run_id, ledger)
    totals = orders.groupBy("currency").count().withColumnRenamed("count", "orders")
    save(totals, summary, run_id, ledger)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
