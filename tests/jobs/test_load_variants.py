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
from tests.receiver import TOKEN, Receiver

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


def test_continuous_mode_keeps_loading_new_files_until_stopped(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    receiver: Receiver,
) -> None:
    """Also: a second driver started on the same checkpoint while the first is alive
    (frozen, as a run that only looked stalled) is refused before it writes a row, and
    reports itself as refused, not as the run failing; the first then goes on."""
    import signal

    from tests.waiting import wait_until

    source = tmp_path / "src"
    write_files(source, ROWS, 1, "json")
    table = f"{dataset}.orders"
    job = subprocess.Popen(
        [sys.executable, "-m", "onceover_jobs.load_files",
         *job_args(source, "json", table, tmp_path / "ckpt"), "--continuous", "--interval", "1"],
        env=job_environment(bq_config), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    jvm = None
    try:
        wait_until("the first file loaded", lambda: _rows(rest, table) == ROWS or None, 240)
        jvm = _java_child(job.pid)
        os.kill(jvm, signal.SIGSTOP)  # alive, but it plans nothing: the file below waits
        write_files(source, ROWS, 1, "json", start=ROWS)  # a file arriving later
        second = subprocess.run(
            [sys.executable, "-m", "onceover_jobs.load_files",
             *job_args(source, "json", table, tmp_path / "ckpt")],
            env={**job_environment(bq_config), MONITOR_URL_ENV: receiver.url,
                 MONITOR_TOKEN_ENV: TOKEN},
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert second.returncode == EXIT_REFUSED, second.stderr[-3000:]
        assert re.search(rf"refused: .*another driver that still runs \(\S+ pid {jvm} started",
                         second.stderr), second.stderr[-3000:]  # fmt: skip
        (failed,) = wait_until(
            "the refused driver's report", lambda: receiver.of_type("run_failed") or None, 30
        )
        assert failed["refused"] is True
        assert counted(rest, table) == (ROWS, ROWS)  # the second wrote nothing
        os.kill(jvm, signal.SIGCONT)
        wait_until("the later file loaded", lambda: _rows(rest, table) == 2 * ROWS or None, 120)
        job.send_signal(signal.SIGTERM)
        stdout, stderr = job.communicate(timeout=120)
    finally:
        if jvm is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(jvm, signal.SIGCONT)
        if job.poll() is None:  # failed before the end: stop it and close its pipes
            job.kill()
            job.communicate()
    assert job.returncode == 0, stderr[-3000:]
    assert f"Committed {2 * ROWS:,} rows" in stdout
    assert counted(rest, table) == (2 * ROWS, 2 * ROWS)


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
