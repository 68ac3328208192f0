"""What a Python data source is handed of options set for the session, measured on the
shared Spark session (docs/guides/from-connector.md, "Options set for the session").

The spark-bigquery-connector also reads its options from the session: ``spark.conf.set(
"parentProject", ...)``, or ``spark.datasource.bigquery.<option>`` (``--conf`` at launch).
A Python data source is handed only what the write names (``.option(...)``, ``save(path)``,
a stream's ``checkpointLocation``), lower-cased; its ``writer()`` runs in a Python worker
with no session to read the rest from. So a connector job's session options are given to
``format("onceover")`` as options, forwarded as the page shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

pytestmark = pytest.mark.spark

SESSION = {
    "parentProject": "billing-project",
    "temporaryGcsBucket": "some-bucket",
    "spark.datasource.bigquery.parentProject": "by-the-connectors-prefix",
    "spark.datasource.bigquery.credentialsFile": "/keys/loader.json",
    "spark.datasource.options_recorder.parentProject": "by-the-sources-own-prefix",
}
"""Session options as a connector job sets them, and by the source's own name (the
``spark.datasource.<name>.`` prefix Spark gives JVM sources that ask for it)."""


class OptionsRecorder(DataSource):
    """Writes down, from the writer's side, the options it was handed and whether a
    session is there to be asked."""

    @classmethod
    def name(cls) -> str:
        return "options_recorder"

    def _record(self) -> None:
        from pyspark.sql import SparkSession

        seen = {
            "options": dict(self.options),
            "session": SparkSession.getActiveSession() is not None,
        }
        with Path(self.options["record_to"]).open("a") as out:
            out.write(json.dumps(seen) + "\n")

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        self._record()
        return _Writer()

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        self._record()
        return _StreamWriter()


class _Writer(DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class _StreamWriter(DataSourceStreamWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass


@pytest.fixture
def session_options(spark: SparkSession) -> Iterator[SparkSession]:
    """The shared session with the options above set, unset afterwards."""
    spark.dataSource.register(OptionsRecorder)
    for key, value in SESSION.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key in SESSION:
            spark.conf.unset(key)


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_a_batch_writer_is_handed_only_the_writes_own_options(
    session_options: SparkSession, tmp_path: Path
) -> None:
    record = tmp_path / "seen.jsonl"
    (
        session_options.range(3)
        .write.format("options_recorder")
        .mode("append")
        .option("record_to", str(record))
        .option("writeMethod", "direct")
        .save("dataset.table")
    )
    [seen] = recorded(record)
    assert seen["options"] == {
        "path": "dataset.table",
        "record_to": str(record),
        "writemethod": "direct",  # lower-cased: the sink reads every name in any case
    }
    assert seen["session"] is False  # nothing to ask spark.conf of, either


def test_a_stream_writer_is_handed_only_the_queries_own_options(
    session_options: SparkSession, tmp_path: Path
) -> None:
    record = tmp_path / "seen.jsonl"
    query = (
        session_options.readStream.format("rate")
        .load()
        .writeStream.format("options_recorder")
        .option("record_to", str(record))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .option("table", "dataset.table")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert recorded(record)  # planned at least once
    for seen in recorded(record):
        assert seen["options"] == {
            "checkpointlocation": str(tmp_path / "checkpoint"),
            "record_to": str(record),
            "table": "dataset.table",
        }


def test_session_options_forwarded_as_the_page_shows_reach_the_writer(
    session_options: SparkSession, tmp_path: Path
) -> None:
    """The page's snippet, verbatim but for the format and the record's option."""
    spark = session_options
    record = tmp_path / "seen.jsonl"
    df = spark.range(3)

    prefix = "spark.datasource.bigquery."
    from_session = {
        key.removeprefix(prefix): value
        for key, value in spark.conf.getAll.items()
        if key.startswith(prefix)
    }
    (
        df.write.format("options_recorder")
        .options(**from_session)
        .option("record_to", str(record))
        .mode("append")
        .save("dataset.table")
    )
    [seen] = recorded(record)
    assert seen["options"] == {
        "path": "dataset.table",
        "record_to": str(record),
        "parentproject": "by-the-connectors-prefix",
        "credentialsfile": "/keys/loader.json",
    }
