"""Spark's own hand-off to Python, with nothing written: the floor under any Python sink.

``format("onceover-handoff")`` is a Python data source whose Arrow writer only counts
what Spark hands it (rows, and Arrow bytes as the batches arrive), the same way in as
the sink's own tasks, planning and commit workers included. Its commit writes the
totals to the file the ``out`` option names (on the driver's machine: the bench runs
Spark locally). Unlike ``mapInArrow`` it needs no pandas, which Onceover does not
install (google's client libraries import it whenever it is there, a second per worker).

As a streaming sink (``writeStream.format("onceover-handoff")``) it does the same per
micro-batch, its commit (in Spark's streaming sink worker, as the sink's) adding a line
``{"batch": <id>, "rows": <n>, "arrow_bytes": <n>}`` to the ``out`` file: the floor
under a streaming query's micro-batches (:mod:`onceover_tools.bench.stream_economy`).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

FORMAT = "onceover-handoff"


@dataclass(frozen=True)
class Counted(WriterCommitMessage):
    rows: int
    arrow_bytes: int


@dataclass(frozen=True)
class HandOff:
    seconds: float
    rows: int
    arrow_bytes: int


class _CountingWriter(DataSourceArrowWriter):
    def __init__(self, out: str) -> None:
        self.out = out

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return _count(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        counted = [m for m in messages if isinstance(m, Counted)]
        totals = {"rows": sum(m.rows for m in counted),
                  "arrow_bytes": sum(m.arrow_bytes for m in counted)}  # fmt: skip
        Path(self.out).write_text(json.dumps(totals))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # nothing was written anywhere


class _CountingStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, out: str) -> None:
        self.out = out

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return _count(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        counted = [m for m in messages if isinstance(m, Counted)]
        line = {"batch": batchId, "rows": sum(m.rows for m in counted),
                "arrow_bytes": sum(m.arrow_bytes for m in counted)}  # fmt: skip
        with Path(self.out).open("a") as totals:
            totals.write(json.dumps(line) + "\n")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass  # nothing was written anywhere


def _count(iterator: Iterator[pa.RecordBatch]) -> Counted:
    rows = size = 0
    for batch in iterator:
        rows += batch.num_rows
        size += batch.nbytes
    return Counted(rows, size)


def counted_batches(out: Path) -> dict[int, int]:
    """Rows by micro-batch, as a streaming hand-off's commits wrote them to ``out`` (a
    batch Spark committed twice, once)."""
    if not out.exists():
        return {}
    lines = (json.loads(line) for line in out.read_text().splitlines() if line.strip())
    return {int(line["batch"]): int(line["rows"]) for line in lines}


class HandOffDataSource(DataSource):
    """Counts what Spark hands its Python writers; writes nothing."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: StructType, overwrite: bool) -> _CountingWriter:
        return _CountingWriter(self.options["out"])

    def streamWriter(self, schema: StructType, overwrite: bool) -> _CountingStreamWriter:  # noqa: N802
        return _CountingStreamWriter(self.options["out"])


def register(spark: SparkSession) -> None:
    spark.dataSource.register(HandOffDataSource)


def hand_off(df: DataFrame) -> HandOff:
    """Seconds for Spark to hand ``df`` to Python writers as Arrow, and what they counted."""
    register(df.sparkSession)
    with tempfile.TemporaryDirectory(prefix="onceover-handoff-") as tmp:
        out = Path(tmp) / "counted.json"
        started = time.perf_counter()
        df.write.format(FORMAT).option("out", str(out)).mode("append").save()
        seconds = time.perf_counter() - started
        totals = json.loads(out.read_text())
    return HandOff(seconds, int(totals["rows"]), int(totals["arrow_bytes"]))
