"""The load job's other ways in: spark-submit, CSV and Parquet sources, proto rows."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_jobs.sink.driver import parent_of

from onceover.bigquery import BigQueryConfig
from onceover.job_env import EXIT_REFUSED, MONITOR_TOKEN_ENV, MONITOR_URL_ENV
from onceover.processes import job_environment
from tests.helpers.receiver import TOKEN, Receiver

pytestmark = pytest.mark.spark

ROWS = 5_000
REPO_ROOT = Path(__file__).resolve().parents[2]


def counted(rest: bigquery.Client, table: str) -> tuple[int, int]:
    row = next(iter(rest.query_and_wait(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`"
    )))  # fmt: skip
    return int(row["n"]), int(row["ids"])


def job_args(source: Path, fmt: str, table: str, checkpoint: Path) -> list[str]:
    return ["--source", str(source), "--format", fmt, "--table", table, "--key", "event_id",
            "--checkpoint", str(checkpoint), "--create-table"]  # fmt: skip


@pytest.mark.parametrize(
    ("fmt", "row_format", "launcher"),
    [("csv", "arrow", "spark-submit"), ("parquet", "proto", "python")],
)
def test_csv_and_parquet_sources_proto_rows_and_spark_submit(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    fmt: str,
    row_format: str,
    launcher: str,
) -> None:
    write_files(tmp_path / "src", ROWS, 3, fmt)
    table = f"{dataset}.orders"
    args = [*job_args(tmp_path / "src", fmt, table, tmp_path / "ckpt"), "--row-format", row_format]
    if launcher == "spark-submit":  # the job file, as a cluster user submits it
        spark_submit = Path(sys.executable).parent / "spark-submit"
        command = [str(spark_submit), "--master", "local[2]",
                   str(REPO_ROOT / "jobs" / "onceover_jobs" / "load_files.py"), *args]  # fmt: skip
    else:
        command = [sys.executable, "-m", "onceover_jobs.load_files", *args]
    result = subprocess.run(
        command, env=job_environment(bq_config), capture_output=True, text=True, timeout=400,
        check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert counted(rest, table) == (ROWS, ROWS)
    # the timestamps survived the trip whatever the source format
    row = next(iter(rest.query_and_wait(
        f"SELECT MIN(event_time) AS first, COUNT(DISTINCT currency) AS currencies FROM `{table}`"
    )))  # fmt: skip
    assert row["first"].isoformat().startswith("2026-01-01T00:00")
    assert row["currencies"] == 4


USER_SCRIPT = """
import sys
from pyspark.sql import SparkSession
from onceover_jobs.sink.datasource import register

source, table, checkpoint = sys.argv[1:]
spark = SparkSession.builder.master("local[1]").getOrCreate()
register(spark)  # and no claim_checkpoint(spark, checkpoint) before start()
orders = "amount DOUBLE, currency STRING, customer_id BIGINT, event_id BIGINT, " \\
    "event_time TIMESTAMP, order_id STRING"
(spark.readStream.schema(orders).json(source)
    .writeStream.format("onceover").option("table", table).option("key", "event_id")
    .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    .awaitTermination())
"""


@pytest.mark.parametrize("second_driver", ["load_files", "unclaimed_script"])
def test_continuous_mode_keeps_loading_new_files_until_stopped(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    receiver: Receiver,
    second_driver: str,
) -> None:
    """Also: a second driver started on the same checkpoint while the first is alive
    (frozen between micro-batches, as a run that only looked stalled) is refused before
    Spark plans a micro-batch in the checkpoint, so before a row; the job reports itself
    as refused, not as the run failing. The first then goes on. A user's script that
    does not claim the checkpoint before start() is refused by the sink, after Spark
    planned its micro-batch: the first stops at its next one, and its next start commits
    that batch once."""
    import signal

    from tests.helpers.waiting import wait_until

    source, checkpoint = tmp_path / "src", tmp_path / "ckpt"
    write_files(source, ROWS, 1, "json")
    table = f"{dataset}.orders"
    args = job_args(source, "json", table, checkpoint)
    # Its output goes to files: read while it runs, and never a full pipe that stalls it.
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        job = subprocess.Popen(
            [sys.executable, "-m", "onceover_jobs.load_files", *args,
             "--continuous", "--interval", "1"],
            env=job_environment(bq_config), stdout=stdout, stderr=stderr, text=True,
        )  # fmt: skip

    def still_running() -> None:
        if job.poll() is not None:
            raise AssertionError(
                f"the first driver exited {job.returncode}: {err.read_text()[-3000:]}"
            )

    jvm = None
    try:
        # Spark has recorded the first micro-batch done: the first driver waits for files.
        committed = checkpoint / "commits" / "0"
        wait_until("the first file loaded", lambda: committed.is_file() or None, 240,
                   between=still_running)  # fmt: skip
        assert counted(rest, table) == (ROWS, ROWS)
        jvm = _java_child(job.pid)
        os.kill(jvm, signal.SIGSTOP)  # alive, but it plans nothing: the file below waits
        write_files(source, ROWS, 1, "json", start=ROWS)  # a file arriving later
        entries = _checkpoint_entries(checkpoint)
        second = _second_driver(second_driver, bq_config, receiver, args, tmp_path / "my.py")
        named = rf"another driver that still runs \(\S+ pid {jvm} started"
        if second_driver == "load_files":
            assert second.returncode == EXIT_REFUSED, second.stderr[-3000:]
            assert re.search(f"refused: .*{named}", second.stderr), second.stderr[-3000:]
            (failed,) = wait_until(
                "the refused driver's report", lambda: receiver.of_type("run_failed") or None, 30
            )
            assert failed["refused"] is True
        else:
            assert second.returncode != 0
            assert re.search(f"ConcurrentDriverError: .*{named}", second.stderr), (
                second.stderr[-3000:]
            )  # fmt: skip
        assert counted(rest, table) == (ROWS, ROWS)  # the second wrote nothing
        os.kill(jvm, signal.SIGCONT)
        if second_driver == "unclaimed_script":
            assert "Spark planned this driver's micro-batch" in second.stderr
            assert _checkpoint_entries(checkpoint) != entries  # it did: the first stops
            job.wait(timeout=120)
            assert job.returncode == 1
            assert "Concurrent update to the log" in err.read_text()
            again = subprocess.run(
                [sys.executable, "-m", "onceover_jobs.load_files", *args],
                env=job_environment(bq_config), capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
            assert again.returncode == 0, again.stderr[-3000:]
            assert counted(rest, table) == (2 * ROWS, 2 * ROWS)
            return
        assert _checkpoint_entries(checkpoint) == entries  # nor planned a micro-batch there
        wait_until("the later file loaded", lambda: _rows(rest, table) == 2 * ROWS or None, 120,
                   between=still_running, seen=lambda: err.read_text()[-3000:])  # fmt: skip
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=120)
    finally:
        if jvm is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(jvm, signal.SIGCONT)
        if job.poll() is None:  # failed before the end: stop it
            job.kill()
            job.wait()
    assert job.returncode == 0, err.read_text()[-3000:]
    assert f"Committed {2 * ROWS:,} rows" in out.read_text()
    assert counted(rest, table) == (2 * ROWS, 2 * ROWS)


def _second_driver(
    kind: str, bq_config: BigQueryConfig, receiver: Receiver, args: list[str], script: Path
) -> subprocess.CompletedProcess[str]:
    """Another driver on the first one's checkpoint: the load job again (it claims the
    checkpoint before start(), and reports to ``receiver``), or a user's own script that
    does not claim it."""
    env = job_environment(bq_config)
    if kind == "load_files":
        command = [sys.executable, "-m", "onceover_jobs.load_files", *args]
        env |= {MONITOR_URL_ENV: receiver.url, MONITOR_TOKEN_ENV: TOKEN}
    else:
        script.write_text(USER_SCRIPT)
        source, table, checkpoint = (
            args[args.index(name) + 1] for name in ("--source", "--table", "--checkpoint")
        )
        command = [sys.executable, str(script), source, table, checkpoint]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def _checkpoint_entries(checkpoint: Path) -> list[str]:
    """Spark's own entries in ``checkpoint``: its logs of offsets, commits and sources.

    Hidden files are left out: a log entry's ``.crc`` checksum is written under a
    temporary name and renamed after the entry itself, so a driver stopped between the
    two renames would otherwise look as if it had written something new when it resumes.
    """
    return sorted(
        str(path.relative_to(checkpoint))
        for path in checkpoint.rglob("*")
        if path.is_file()
        and path.relative_to(checkpoint).parts[0] != "onceover"
        and not path.name.startswith(".")
    )


def _java_child(pid: int) -> int:
    """The driver's JVM: the ``java`` process whose parent is ``pid`` (spark-submit execs it)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or parent_of(int(proc.name)) != pid:
            continue
        with contextlib.suppress(OSError):
            if (proc / "comm").read_text().strip() == "java":
                return int(proc.name)
    raise AssertionError(f"no JVM under driver pid {pid}")


def _rows(rest: bigquery.Client, table: str) -> int:
    from google.api_core.exceptions import BadRequest, NotFound

    try:
        return counted(rest, table)[0]
    except (NotFound, BadRequest, StopIteration):  # the job has not created the table yet
        return -1
