"""A streaming job as a user writes it with ``writeStream``: orders from JSON files into
one table, a micro-batch per file, its checkpoint and its ledger wherever the user keeps
them (a bucket: ``--ledger gs://bucket/ledgers``, or the checkpoint itself in one). Run
it again on the same checkpoint after any failure: every order lands once.

    python -m onceover_jobs.examples.stream_orders --source DIR --checkpoint LOCATION \\
        --table P.D.ORDERS [--ledger URL] [--mode buffered|pending|committed] \\
        [--max-files-per-trigger N]

Without ``--ledger`` the ledger is ``<checkpoint>/onceover``, beside Spark's own logs.
"""

from __future__ import annotations

import argparse
import sys

from onceover.modes import EXACTLY_ONCE_MODES, STREAMING_DEFAULT_MODE
from onceover_jobs.examples.daily_tables import SOURCE_SCHEMA, session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onceover_jobs.examples.stream_orders")
    parser.add_argument("--source", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--mode", default=STREAMING_DEFAULT_MODE, choices=EXACTLY_ONCE_MODES)
    parser.add_argument("--max-files-per-trigger", type=int, default=1)
    parser.add_argument("--master", default="local[2,4]", help="tasks retried as on a cluster")
    args = parser.parse_args(argv)
    spark = session("stream-orders", args.master)
    writer = (
        spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", args.max_files_per_trigger)
        .json(args.source)
        .writeStream.format("onceover")
        .option("table", args.table)
        .option("mode", args.mode)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.ledger:
        writer = writer.option("ledger", args.ledger)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
