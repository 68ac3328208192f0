"""Write throughput of the ``onceover`` sink in its three modes on the same data.

    .venv/bin/python -m onceover_tools.bench.sink_modes [--rows 1000000] [--files 4] [--repeat 1]

Generated order events (Parquet, read by Spark ``local[2]``, two partitions, cached) are
batch-written with ``mode`` ``pending``, ``committed`` and ``default`` into a fresh
table of a local BigQuery started in this process, after one small untimed write per
mode (its seconds are printed: they show each mode's one-time start-up). Each timed
write is counted in BigQuery; the table gives rows/s, MB/s (Arrow bytes) and the ratio
to ``default``. Exits 1 only when a write failed or the rows in BigQuery are not exact.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from onceover_jobs.generate import write_files
from onceover_jobs.sink.datasource import register
from onceover_jobs.spark import spark_session

from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover.modes import traits_of
from onceover_tools.bench.handoff import hand_off
from onceover_tools.localbq import LocalBigQuery

if TYPE_CHECKING:
    from google.cloud import bigquery
    from pyspark.sql import DataFrame, SparkSession

MODES = ("pending", "committed", "default")
MASTER = "local[2]"
PARTITIONS = 2
DATASET = "bench_sink_modes"
KEY = "event_id"
WARMUP_ROWS = 2_000
WARMUP_ORDER = ("default", "committed", "pending")


@dataclass
class ModeRuns:
    """The timed runs of one mode; ``None`` for a run that failed."""

    mode: str
    seconds: list[float | None] = field(default_factory=list)

    @property
    def ok(self) -> list[float]:
        return [s for s in self.seconds if s is not None]

    @property
    def median(self) -> float | None:
        return statistics.median(self.ok) if self.ok else None


def arrow_bytes(df: DataFrame) -> int:
    """The Arrow size of ``df`` as the sink's tasks receive it (summed on the executors)."""
    return hand_off(df).arrow_bytes


def create_table(client: bigquery.Client, table_id: str, fields: list[bigquery.SchemaField]) -> str:
    from google.cloud import bigquery

    client.delete_table(table_id, not_found_ok=True)
    client.create_table(bigquery.Table(table_id, schema=fields))
    return table_id


def write(
    df: DataFrame, table_id: str, mode: str, ledger: Path, options: dict[str, str] | None = None
) -> float:
    """Batch-write ``df`` into ``table_id`` (with any further sink ``options``); returns
    the seconds ``save()`` took."""
    started = time.perf_counter()
    writer = (
        df.write.format("onceover")
        .mode("append")
        .option("table", table_id)
        .option("mode", mode)
        .option("ledger", str(ledger))
        .option("run_id", f"bench-{uuid.uuid4().hex}")  # each timed write is a run of its own
    )
    for name, value in (options or {}).items():
        writer = writer.option(name, value)
    writer.save()
    return time.perf_counter() - started


def count(client: bigquery.Client, table_id: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT event_id)`` of ``table_id``."""
    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT {KEY}) AS d FROM `{table_id}`"
    row = next(iter(client.query_and_wait(query)))
    return int(row["n"]), int(row["d"])


def _error_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else "")
    return f"{type(exc).__name__}: {detail[:400]}"


@dataclass(frozen=True)
class Bench:
    """What every timed write shares: the cached data, the local BigQuery, the ledger."""

    df: DataFrame
    rows: int
    client: bigquery.Client
    config: BigQueryConfig
    fields: list[bigquery.SchemaField]
    ledger_root: Path

    def table_id(self, name: str) -> str:
        return f"{self.config.resolved_project()}.{DATASET}.{name}"

    def run(self, mode: str, attempt: int) -> float | None:
        """One timed write in ``mode`` into a fresh table; ``None`` if it failed."""
        table_id = create_table(self.client, self.table_id(f"{mode}_{attempt}"), self.fields)
        try:
            seconds = write(self.df, table_id, mode, self.ledger_root / f"{mode}-{attempt}")
        except Exception as exc:
            print(f"FAILED: {mode} run {attempt}: the write raised {_error_line(exc)}", flush=True)
            traceback.print_exc()
            return None
        counted, distinct = count(self.client, table_id)
        self.client.delete_table(table_id)  # the local BigQuery keeps every table in memory
        if counted != self.rows or distinct != self.rows:
            print(
                f"FAILED: {mode} run {attempt}: BigQuery holds {counted:,} rows "
                f"({distinct:,} distinct {KEY}), expected {self.rows:,}",
                flush=True,
            )
            return None
        print(
            f"  {mode:<9} run {attempt}: {seconds:7.2f} s, {self.rows:,} rows verified", flush=True
        )
        return seconds

    def warm_up(self, spark: SparkSession) -> dict[str, float]:
        """Untimed in the table: one small write per mode, returning the seconds each took.

        The first write of a session pays the workers' imports, and the first ``pending``
        write also the start of the Python process that runs its commit.
        """
        from onceover_jobs.sink.rows.schema import bigquery_schema_from_arrow
        from pyspark.sql.pandas.types import to_arrow_schema

        warmup = spark.range(WARMUP_ROWS, numPartitions=PARTITIONS).selectExpr(
            f"id AS {KEY}", "CAST(id AS STRING) AS order_id"
        )
        fields = bigquery_schema_from_arrow(to_arrow_schema(warmup.schema, timezone="UTC"))
        seconds = {}
        for mode in WARMUP_ORDER:
            table_id = create_table(self.client, self.table_id(f"warmup_{mode}"), fields)
            seconds[mode] = write(warmup, table_id, mode, self.ledger_root / f"warmup-{mode}")
            self.client.delete_table(table_id)
        return seconds


def _cell(value: float | None, fmt: str) -> str:
    return "FAILED" if value is None else format(value, fmt)


def report(results: list[ModeRuns], rows: int, size: int, repeat: int) -> None:
    # The at-least-once mode is the baseline the others' throughput is set against.
    baseline = next(r.median for r in results if not traits_of(r.mode).exactly_once)
    heading = "| mode | seconds | rows/s | MB/s | throughput / default |"
    rule = "|---|---:|---:|---:|---:|"
    if repeat > 1:
        heading += " runs, s |"
        rule += "---|"
    print(f"\n{rows:,} rows, {size / 1e6:,.1f} MB of Arrow; median of {repeat} run(s) per mode\n")
    print(heading)
    print(rule)
    ratios: dict[str, float | None] = {}
    for result in results:
        seconds = result.median
        ratio = baseline / seconds if seconds and baseline else None
        ratios[result.mode] = ratio
        line = (
            f"| {result.mode} | {_cell(seconds, '.2f')} "
            f"| {_cell(rows / seconds if seconds else None, ',.0f')} "
            f"| {_cell(size / 1e6 / seconds if seconds else None, '.1f')} "
            f"| {_cell(ratio, '.2f')} |"
        )
        if repeat > 1:
            line += " " + ", ".join(_cell(s, ".2f") for s in result.seconds) + " |"
        print(line)
    print(
        f"\nratios (rows/s vs default): pending/default = {_cell(ratios['pending'], '.2f')} "
        f"(promised >= 0.9), committed/default = {_cell(ratios['committed'], '.2f')}"
    )


def prepare(
    spark: SparkSession, source: Path, rows: int, config: BigQueryConfig, ledger_root: Path
) -> Bench:
    """Read the Parquet files into a cached DataFrame of two partitions; make the dataset."""
    from onceover_jobs.sink.rows.schema import bigquery_schema_from_arrow
    from pyspark.sql.pandas.types import to_arrow_schema

    df = spark.read.parquet(str(source))
    if df.rdd.getNumPartitions() != PARTITIONS:
        df = df.repartition(PARTITIONS)
    df = df.cache()
    cached = df.count()
    if cached != rows:
        raise RuntimeError(f"Spark read {cached:,} rows, {rows:,} were generated")
    client = bigquery_client(config)
    client.create_dataset(f"{config.resolved_project()}.{DATASET}", exists_ok=True)
    fields = bigquery_schema_from_arrow(to_arrow_schema(df.schema, timezone="UTC"))
    return Bench(df, rows, client, config, fields, ledger_root)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4, help="Parquet files to generate")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per mode")
    args = parser.parse_args()
    if args.rows < 1 or args.files < 1 or args.repeat < 1:
        parser.error("--rows, --files and --repeat must be at least 1")

    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; Spark {MASTER}",
        flush=True,
    )
    # Stage progress bars would interleave with the figures on a terminal.
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    )
    with tempfile.TemporaryDirectory(prefix="onceover-bench-") as tmp, LocalBigQuery() as server:
        os.environ.update(server.config.env())  # before the session: Python workers inherit it
        started = time.perf_counter()
        source = Path(tmp) / "orders"
        write_files(source, args.rows, args.files, "parquet")
        spark = spark_session("onceover-bench-sink-modes", MASTER)
        try:
            register(spark)
            bench = prepare(spark, source, args.rows, server.config, Path(tmp) / "ledger")
            size = arrow_bytes(bench.df)
            print(
                f"data: {args.rows:,} rows in {args.files} Parquet file(s), "
                f"{bench.df.rdd.getNumPartitions()} partitions, {size / 1e6:,.1f} MB of Arrow, "
                f"cached (setup {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
            warm = bench.warm_up(spark)
            print(
                f"warm-up, untimed ({WARMUP_ROWS:,}-row writes, in this order): "
                + ", ".join(f"{mode} {seconds:.2f} s" for mode, seconds in warm.items()),
                flush=True,
            )
            results = [ModeRuns(mode) for mode in MODES]
            for attempt in range(1, args.repeat + 1):
                shift = (attempt - 1) % len(results)  # no mode always runs first
                for result in results[shift:] + results[:shift]:
                    result.seconds.append(bench.run(result.mode, attempt))
        finally:
            spark.stop()
    report(results, args.rows, size, args.repeat)
    return 0 if all(s is not None for r in results for s in r.seconds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
