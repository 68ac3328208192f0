"""The bench's set-up: one Spark session and one local BigQuery, and on them the user's
query, its fresh table and its source files. :func:`bench_session` starts both (the
ledger-store bench, :mod:`onceover_tools.bench.ledger_stores`, runs its queries on one too)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover_tools.bench.stream_economy.plan import (
    DATASET,
    KEY,
    MASTER,
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
        dataset: str = DATASET,
    ) -> None:
        self.spark = spark
        self.client = client
        self.project = project
        self.rest_url = rest_url
        self.tree = tree
        self.tmp = tmp
        self.rows_per_batch = rows_per_batch
        self.dataset = dataset

    def fresh_table(self, name: str) -> str:
        from google.cloud import bigquery

        table_id = f"{self.project}.{self.dataset}.{name}"
        self.client.delete_table(table_id, not_found_ok=True)
        from onceover_tools.chaos.runner import ORDER_SCHEMA

        self.client.create_table(bigquery.Table(table_id, schema=ORDER_SCHEMA))
        return table_id

    def counted_path(self, name: str) -> Path:
        """Where the floor's commits count the rows its writers were handed."""
        return self.tmp / name / "counted.jsonl"

    def start(
        self,
        name: str,
        table_id: str,
        mode: str | None,
        sink: str = SINK,
        options: Mapping[str, str] | None = None,
    ) -> Progress:
        """The user's query on ``<tmp>/<name>/source``, started: into the sink (table
        ``table_id``, ``mode``, and any more of the sink's ``options``, such as where its
        ledger is), or into Spark's hand-off (the floor, ``sink`` its format)."""
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
        for option, value in (options or {}).items():
            writer = writer.option(option, value)
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
    def query(
        self,
        name: str,
        table_id: str,
        mode: str | None,
        options: Mapping[str, str] | None = None,
    ) -> Iterator[Progress]:
        """The user's query on ``<tmp>/<name>/source``, stopped when the block ends."""
        progress = self.start(name, table_id, mode, options=options)
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


def _quiet_falling_behind(spark: SparkSession) -> None:
    """Spark warns of every batch longer than the trigger; the trigger period is a figure
    here, not a warning to print a thousand times in a soak."""
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor", log4j.Level.ERROR
    )


@contextmanager
def bench_session(
    tmp: Path,
    app_name: str,
    *,
    rows_per_batch: int,
    dataset: str = DATASET,
    environment: Mapping[str, str] | None = None,
) -> Iterator[Bench]:
    """A local BigQuery in a child process and a Spark session on it (``local[2]``, the
    sink and Spark's hand-off registered), stopped when the block ends. ``environment``
    is set beside the local BigQuery's before the session starts: its Python workers
    inherit the driver's environment as the JVM started, never later changes. Call it in
    a process with no JVM yet, or one started with this environment."""
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.spark import spark_session

    from onceover.bigquery import bigquery_client
    from onceover_tools.bench import handoff
    from onceover_tools.localbq import LocalBigQueryProcess

    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    )
    with LocalBigQueryProcess(log_path=tmp / "local-bigquery.log") as server:
        config = server.config
        os.environ.update(config.env())
        os.environ.update(environment or {})
        client = bigquery_client(config)
        project = config.resolved_project()
        client.create_dataset(f"{project}.{dataset}", exists_ok=True)
        assert server.child.popen is not None
        assert config.grpc_endpoint is not None
        grpc_port = int(config.grpc_endpoint.rsplit(":", 1)[1])
        tree = ProcessTree(server.child.popen.pid, grpc_port)
        spark = spark_session(app_name, MASTER)
        try:
            register(spark)
            handoff.register(spark)
            _quiet_falling_behind(spark)
            yield Bench(
                spark, client=client, project=project, rest_url=str(config.rest_endpoint),
                tree=tree, tmp=tmp, rows_per_batch=rows_per_batch, dataset=dataset,
            )  # fmt: skip
        finally:
            spark.stop()
