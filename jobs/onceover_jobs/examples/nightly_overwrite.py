"""A nightly batch job as a user writes it: the day's orders replace what the table held,
the whole table or (``--dynamic``) only the days the orders fall in, as a user of the
spark-bigquery-connector writes it with ``mode("overwrite")``. Run it again after any
failure with the same run id: a swap that happened is not done again, one that did not
is finished without staging the rows again.

    python -m onceover_jobs.examples.nightly_overwrite --source DIR --table P.D.ORDERS \\
        --run-id night-2026-11-24 --ledger /shared/ledger [--dynamic]
"""

from __future__ import annotations

import argparse
import sys

from onceover.modes import BATCH_DEFAULT_MODE
from onceover_jobs.examples.daily_tables import SOURCE_SCHEMA, session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onceover_jobs.examples.nightly_overwrite")
    parser.add_argument("--source", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument(
        "--dynamic", action="store_true", help="replace only the partitions the rows fall in"
    )
    parser.add_argument(
        "--mode", default=BATCH_DEFAULT_MODE, choices=(BATCH_DEFAULT_MODE,),
        help="an overwrite is staged in pending mode",
    )  # fmt: skip
    parser.add_argument("--request-max-bytes", type=int, default=8_000_000)
    parser.add_argument(
        "--master", default="local[2,4]", help="local[2,4]: tasks retried as on a cluster"
    )
    args = parser.parse_args(argv)
    spark = session("nightly-overwrite", args.master)
    # A shuffle before the sink: a retried task gets the same rows (the sink checks it).
    orders = spark.read.schema(SOURCE_SCHEMA).json(args.source).repartition(3)
    (
        orders.write.format("onceover")
        .mode("overwrite")
        .option("partitionOverwriteMode", "dynamic" if args.dynamic else "static")
        .option("run_id", args.run_id)
        .option("ledger", args.ledger)
        .option("request.max_bytes", str(args.request_max_bytes))
        .save(args.table)
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
