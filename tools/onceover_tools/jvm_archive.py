"""An archive of the classes a Spark job's JVM loads, so later JVMs map them instead.

    python -m onceover_tools.jvm_archive PATH

A job's JVM loads and verifies some 10,000 of Spark's classes before its first batch, a
large share of a short job's CPU. Java's class-data sharing (CDS, JDK 13 and later)
writes the classes one JVM loaded to an archive when it exits
(``-XX:ArchiveClassesAtExit``); a JVM started with ``-XX:SharedArchiveFile`` maps them
from it. docs/journal/test-suite.md has what that saves a run of the load job.

This builds the archive by running a small job of the same shape as Onceover's (a JSON
read, a batch write and a streaming ``availableNow`` write into a Python data source,
:mod:`onceover_tools.bench.handoff`, which writes nothing), on the job's own session
settings. Only that job's JVM dumps (``--driver-java-options``): Spark's launcher JVM,
which runs first on another class path, does not. The archive is written beside
``PATH`` and renamed into place, so a JVM never maps half an archive.

A JVM uses the archive only where it matches: the same JDK (and its base archive) and a
class path that starts with the one it was built on. Any other JVM (``java -version``,
Spark's launcher, any JVM on another class path) runs as without it;
:data:`~onceover.processes.QUIET_CDS` keeps it from saying so on standard output,
which ``spark-class`` reads as the command to run. ``PATH`` is rebuilt when the
Python, PySpark or Java it was built with changed (``PATH.key``).

The tests use it (``make test`` builds it first, ``ONCEOVER_JVM_CLASS_ARCHIVE``), as do
chaos runs started from them. A failed build costs only the speed-up: the command says
why and exits 0.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onceover.errors import OnceoverError
from onceover.preflight import find_java
from onceover.processes import QUICK_JVM, QUIET_CDS

BUILD_TIMEOUT_S = 600.0


def train(work: Path) -> None:
    """The training job, in the builder's child process: what the JVM loads here is what
    the archive holds."""
    import json

    from onceover_jobs.spark import spark_session

    from onceover_tools.bench import handoff

    source = work / "source"
    source.mkdir()
    rows = (
        json.dumps({"event_id": i, "amount": i / 4, "when": "2026-01-01T00:00:00Z"})
        for i in range(1000)
    )
    (source / "part-0.json").write_text("".join(f"{row}\n" for row in rows))
    spark = spark_session("onceover-jvm-archive")
    handoff.register(spark)
    frame = spark.read.json(str(source))
    batch = frame.repartition(2).write.format(handoff.FORMAT).mode("append")
    batch.option("out", str(work / "batch.json")).save()
    query = (
        spark.readStream.schema(frame.schema)
        .json(str(source))
        .writeStream.format(handoff.FORMAT)
        .option("out", str(work / "stream.jsonl"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


def build_key() -> str:
    """What an archive is only good for: this Python, this PySpark, this Java."""
    from importlib.metadata import version

    java = find_java().resolve()
    said = subprocess.run(
        [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
    )  # fmt: skip
    return f"python {sys.executable}\npyspark {version('pyspark')}\n{java}\n{said.stderr}"


def is_current(path: Path) -> bool:
    key = path.with_name(path.name + ".key")
    return path.is_file() and key.is_file() and key.read_text() == build_key()


def build(path: Path) -> float:
    """Build the archive at ``path``; the seconds it took. Raises ``RuntimeError``
    naming what went wrong (the training job's output tail)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="onceover-jvm-archive-") as tmp:
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        options = f"{QUICK_JVM} -XX:ArchiveClassesAtExit={partial} {QUIET_CDS}"
        env = {
            **os.environ,
            "PYSPARK_SUBMIT_ARGS": f"--driver-java-options {shlex.quote(options)} pyspark-shell",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        env.pop("JDK_JAVA_OPTIONS", None)  # an archive already in use must not be built on
        done = subprocess.run(
            [sys.executable, "-m", "onceover_tools.jvm_archive", "--train", tmp],
            env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
        )  # fmt: skip
        try:
            if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
                tail = (done.stdout + done.stderr)[-2000:]
                raise RuntimeError(f"the training job exited {done.returncode}:\n{tail}")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
    path.with_name(path.name + ".key").write_text(build_key())
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="where the archive goes")
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.train:  # the builder's child: PATH is its work directory
        train(args.path)
        return 0
    path: Path = args.path.resolve()
    try:
        if is_current(path):
            print(f"JVM class archive: {path} is current")
            return 0
        seconds = build(path)
    except (RuntimeError, OSError, subprocess.SubprocessError, OnceoverError) as exc:
        print(f"JVM class archive: not built, JVMs start without it ({exc})", file=sys.stderr)
        return 0
    size = path.stat().st_size / 2**20
    print(f"JVM class archive: {path} built in {seconds:.0f} s ({size:.0f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
