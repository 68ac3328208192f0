"""A streaming job as a user writes it, in the shape of Apache Beam's Storage Write load
test (``BigQueryStreamingLT``): rows made at a set rate, each of ``--fields`` string
fields of ``--bytes-per-field`` bytes, into one table every second, until told to stop.

    python -m onceover_jobs.examples.rate_stream --table P.D.T --checkpoint LOCATION \\
        [--rows-per-second 10000] [--fields 20] [--bytes-per-field 50] [--partitions 2] \\
        [--mode buffered|pending|committed|default] [--ledger URL] \\
        [--stop-file PATH | --drain] [--monitor-url URL --monitor-token T] \\
        [--option NAME=VALUE ...] [--options-file PATH]

The source is Spark's ``rate`` source: replayable from the checkpoint (a micro-batch's
rows are a function of its offsets, so a batch run again after a crash is the same
rows), and it keeps time while the job is down: the first batch after a restart holds
every second it missed. Row ``event_id`` is the source's ``value`` (0, 1, 2, ...);
field ``i`` is the hex SHA-256 of ``"<event_id>:<i>"``, repeated and cut to its size
(:func:`field_value`), so any row can be checked against its key.

The query runs until ``--stop-file`` appears, then stops (a batch under way is cut off,
as by any stop); ``--drain`` runs it once more on the same checkpoint with
``availableNow``, which the rate source meets as one micro-batch: the cut-off batch
again, from Spark's offset log (or, if none was cut off, one batch more), then it ends.
Without ``--mode`` the sink takes ``writeStream``'s default (``buffered``). The monitor
URL and token also come from ``ONCEOVER_MONITOR_URL`` / ``ONCEOVER_MONITOR_TOKEN``.
``--option`` passes any other sink option as it is (real BigQuery's connection options:
``credentialsFile``, ``parentProject``, ``proxyAddress``, ...); ``--options-file`` reads
more from a JSON object, for secrets (``gcpAccessToken``, ``proxyPassword``), which a
command line shows to anyone who lists the machine's processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from onceover.job_env import MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover.modes import MODES
from onceover_jobs.examples.daily_tables import session

KEY = "event_id"
HEX_DIGITS = 64
"""A SHA-256 in hex: a field longer than this repeats it."""
STOP_POLL_S = 1


def field_name(index: int) -> str:
    return f"field_{index}"


def field_value(key: int, index: int, size: int) -> str:
    """What field ``index`` of row ``key`` holds (the same as :func:`_field` computes)."""
    digest = hashlib.sha256(f"{key}:{index}".encode()).hexdigest()
    return (digest * (size // HEX_DIGITS + 1))[:size]


def _field(index: int, size: int) -> Column:
    digest = sf.sha2(sf.concat(sf.col("value").cast("string"), sf.lit(f":{index}")), 256)
    return sf.substring(sf.repeat(digest, size // HEX_DIGITS + 1), 1, size).alias(field_name(index))


def rows(
    spark: SparkSession, rows_per_second: int, fields: int, size: int, partitions: int
) -> DataFrame:
    """The rate source's rows in the load test's shape: the key, its time, the fields."""
    source = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .option("numPartitions", partitions)
        .load()
    )
    return source.select(
        sf.col("value").alias(KEY),
        sf.col("timestamp").alias("event_time"),
        *(_field(i, size) for i in range(fields)),
    )


def _option(value: str) -> tuple[str, str]:
    name, equals, given = value.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME=VALUE")
    return name.strip(), given


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m onceover_jobs.examples.rate_stream")
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--ledger")
    parser.add_argument("--mode", choices=MODES, default=None,
                        help="the sink's mode (default: writeStream's, buffered)")  # fmt: skip
    parser.add_argument("--rows-per-second", type=int, default=10_000)
    parser.add_argument("--fields", type=int, default=20)
    parser.add_argument("--bytes-per-field", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--trigger-seconds", type=float, default=1.0)
    parser.add_argument("--request-max-bytes", type=int, default=None)
    parser.add_argument("--monitor-url", default=os.environ.get(MONITOR_URL_ENV))
    parser.add_argument("--monitor-token", default=os.environ.get(MONITOR_TOKEN_ENV))
    parser.add_argument("--option", action="append", default=[], type=_option,
                        metavar="NAME=VALUE", help="another sink option, as it is")  # fmt: skip
    parser.add_argument("--options-file", type=Path, default=None,
                        help="more sink options: a JSON object of names to values")  # fmt: skip
    ending = parser.add_mutually_exclusive_group()
    ending.add_argument("--stop-file", type=Path, default=None)
    ending.add_argument("--drain", action="store_true")
    parser.add_argument(
        "--master", default="local[2,4]", help="local[2,4]: tasks retried as on a cluster"
    )
    args = parser.parse_args(argv)
    for name in ("rows_per_second", "fields", "bytes_per_field", "partitions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.options_file is not None:
        args.option += _options_file(parser, args.options_file)
    return args


def _options_file(parser: argparse.ArgumentParser, path: Path) -> list[tuple[str, str]]:
    try:
        given = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"--options-file {path}: {exc}")
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        parser.error(f"--options-file {path}: not a JSON object of option names to strings")
    return list(given.items())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = session("rate-stream", args.master)
    writer = (
        rows(spark, args.rows_per_second, args.fields, args.bytes_per_field, args.partitions)
        .writeStream.format("onceover")
        .option("table", args.table)
        .option("checkpointLocation", args.checkpoint)
    )
    for option, value in (
        ("mode", args.mode),
        ("ledger", args.ledger),
        ("request.max_bytes", args.request_max_bytes),
        ("monitor.url", args.monitor_url),
        ("monitor.token", args.monitor_url and args.monitor_token),
        *args.option,
    ):
        if value:
            writer = writer.option(option, str(value))
    if args.drain:
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        query = writer.trigger(processingTime=f"{args.trigger_seconds} seconds").start()
        while not query.awaitTermination(STOP_POLL_S):
            if args.stop_file is not None and args.stop_file.exists():
                query.stop()
                break  # a failed query raised from awaitTermination: the job fails
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
