"""A streaming change data capture job as a user writes it: a table mirrored from change
files (a key's upserts and deletes, ``_CHANGE_TYPE``), as the spark-bigquery-connector's
README writes CDC (``writeAtLeastOnce=true``, BigQuery's ``_default`` stream), into a
table whose primary key is declared. Run it again on the same checkpoint after any
failure: the table ends as the changes say, key by key.

    python -m onceover_jobs.examples.cdc_mirror --source DIR --checkpoint LOCATION \\
        --table P.D.CUSTOMERS [--format parquet|json] [--ledger URL] \\
        [--max-files-per-trigger N] [--monitor-url URL --monitor-token T]

The files have ``customer_id BIGINT, version BIGINT, name STRING, balance BIGINT,
_CHANGE_TYPE STRING`` (``python -m onceover_jobs.generate_changes`` writes some), the
table ``customer_id INT64, version INT64, name STRING, balance INT64`` with ``PRIMARY KEY
(customer_id) NOT ENFORCED``. The job gives no ``_CHANGE_SEQUENCE_NUMBER``: the sink
numbers the rows, by micro-batch, partition and row (docs/guides/write.md). So a key is
changed at most once in the files of one micro-batch (``--max-files-per-trigger``), or its
changes could land in two partitions in the wrong order. The monitor URL and token also
come from ``ONCEOVER_MONITOR_URL`` / ``ONCEOVER_MONITOR_TOKEN``.
"""

from __future__ import annotations

import argparse
import os
import sys

from onceover.job_env import MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover_jobs.examples.daily_tables import session
from onceover_jobs.generate_changes import CHANGE_SCHEMA, FORMATS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m onceover_jobs.examples.cdc_mirror")
    parser.add_argument("--source", required=True)
    parser.add_argument("--format", choices=FORMATS, default="parquet")
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--max-files-per-trigger", type=int, default=1)
    parser.add_argument("--request-max-bytes", type=int, default=8_000_000)
    parser.add_argument("--monitor-url", default=os.environ.get(MONITOR_URL_ENV))
    parser.add_argument("--monitor-token", default=os.environ.get(MONITOR_TOKEN_ENV))
    parser.add_argument(
        "--master", default="local[2,4]", help="local[2,4]: tasks retried as on a cluster"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = session("cdc-mirror", args.master)
    changes = (
        spark.readStream.schema(CHANGE_SCHEMA)
        .option("maxFilesPerTrigger", args.max_files_per_trigger)
        .format(args.format)
        .load(args.source)
    )
    writer = (
        changes.writeStream.format("onceover")
        .option("writeAtLeastOnce", "true")
        .option("table", args.table)
        .option("checkpointLocation", args.checkpoint)
        .option("request.max_bytes", str(args.request_max_bytes))
    )
    if args.ledger:
        writer = writer.option("ledger", args.ledger)
    if args.monitor_url:
        writer = writer.option("monitor.url", args.monitor_url)
        if args.monitor_token:
            writer = writer.option("monitor.token", args.monitor_token)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
