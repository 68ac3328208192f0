"""The bench's set-up: one Spark session and one local BigQuery, and on them the user's
query, its fresh table and its source files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from onceover_tools.bench.stream_economy.plan import (
    DATASET,
    KEY,
    PARTITIONS,
    SINK,
    SOURCE_SCHEMA,
    TRIGGER,
)
from onceover_tools.bench.stream_economy.process_tree import ProcessTree
from onceover_tools.bench.stream_economy.progress import Progress

if TYPE_CHECKING:
    from google.cloud import bigquery
    from pyspark.sql import SparkSession


class Bench:
    """One Spark session, one local BigQuery; every phase's queries run on them (the
    modes' interleaved, :mod:`~onceover_tools.bench.stream_economy.interleaved`; the
    soak's after them, :mod:`~onceover_tools.bench.stream_economy.soak`)."""

    def __init__(
        self,
        spark: SparkSession,
        *,
        client: bigquery.Client,
        project: str,
        rest_url: str,
        tree: ProcessTree,
        tmp: Path,
        rows_per_batch: int,
    ) -> None:
        self.spark = spark
        self.client = client
        self.project = project
        self.rest_url = rest_url
        self.tree = tree
        self.tmp = tmp
        self.rows_per_batch = rows_per_batch

    def fresh_table(self, name: str) -> str:
        from google.cloud import bigquery

        table_id = f"{self.project}.{DATASET}.{name}"
        self.client.delete_table(table_id, not_found_ok=True)
        from onceover_tools.chaos.runner import ORDER_SCHEMA

        self.client.create_table(bigquery.Table(table_id, schema=ORDER_SCHEMA))
        return table_id

    def counted_path(self, name: str) -> Path:
        """Where the floor's commits count the rows its writers were handed."""
        return self.tmp / name / "counted.jsonl"

    def start(self, name: str, table_id: str, mode: str | None, sink: str = SINK) -> Progress:
        """The user's query on ``<tmp>/<name>/source``, started: into the sink (table
        ``table_id``, ``mode``), or into Spark's hand-off (the floor, ``sink`` its format)."""
        source = self.tmp / name / "source"
        source.mkdir(parents=True, exist_ok=True)
        frame = (
            self.spark.readStream.schema(SOURCE_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
        )
        writer = (
            frame.repartition(PARTITIONS, KEY)
            .writeStream.format(sink)
            .option("checkpointLocation", str(self.tmp / name / "checkpoint"))
            .trigger(processingTime=TRIGGER)
        )
        if sink != SINK:
            writer = writer.option("out", str(self.counted_path(name)))
        else:
            writer = writer.option("table", table_id)
        if mode is not None:
            writer = writer.option("mode", mode)
        started = os.getloadavg()[0]
        progress = Progress(writer.start())
        progress.loads = (round(started, 2), round(started, 2))
        return progress

    @staticmethod
    def stop(progress: Progress) -> None:
        """Stop the query; raises if it had failed."""
        progress.query.stop()
        assert progress.loads is not None
        progress.loads = (progress.loads[0], round(os.getloadavg()[0], 2))
        if progress.query.exception() is not None:
            raise RuntimeError(f"the query failed: {progress.query.exception()}")

    @contextmanager
    def query(self, name: str, table_id: str, mode: str | None) -> Iterator[Progress]:
        """The user's query on ``<tmp>/<name>/source``, stopped when the block ends."""
        progress = self.start(name, table_id, mode)
        try:
            yield progress
        except BaseException:
            with suppress(Exception):  # the block's own exception is the one to see
                self.stop(progress)
            raise
        self.stop(progress)

    def files(self, name: str, first_file: int, count: int) -> list[Path]:
        """``count`` files of the batch size, staged outside the query's directory."""
        from onceover_jobs.generate import write_files

        staged = self.tmp / name / "staged"
        start = first_file * self.rows_per_batch
        return write_files(staged, count * self.rows_per_batch, count, "json", start=start)

    def put(self, name: str, files: list[Path]) -> Path:
        """Move ``files`` into the query's directory (a rename: never half a file)."""
        source = self.tmp / name / "source"
        source.mkdir(parents=True, exist_ok=True)
        for path in files:
            path.replace(source / path.name)
        return source
