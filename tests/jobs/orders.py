"""The load job as a user runs it: ``python -m onceover_jobs.load_files`` on generated order
files, posting to a control plane, with failpoints armed from the environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_jobs.generate import write_files

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.backend.conftest import INGEST, TOKENS, VIEWER
from tests.backend.live import serving, wait_for_status


def load_orders(
    bq_config: BigQueryConfig,
    url: str,
    source: Path,
    table: str,
    work: Path,
    failpoints: str = "",
    extra: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """One run of the job on checkpoint ``work/ckpt``; hits counted across runs."""
    env = job_environment(bq_config)
    env["ONCEOVER_SPOOL_DIR"] = str(work / "spool")
    env["ONCEOVER_FAILPOINTS_STATE"] = str(work / "failpoints")
    env["ONCEOVER_HEARTBEAT_S"] = "2"
    if failpoints:
        env["ONCEOVER_FAILPOINTS"] = failpoints
    return subprocess.run(
        [sys.executable, "-m", "onceover_jobs.load_files", "--source", str(source),
         "--format", "json",
         "--table", table, "--key", "event_id", "--checkpoint", str(work / "ckpt"),
         "--create-table", "--max-files-per-trigger", "2", "--job", "orders",
         "--monitor-url", url, "--monitor-token", INGEST, *extra],
        env=env, capture_output=True, text=True, timeout=480, check=False,
    )  # fmt: skip


def control_plane(bq_config: BigQueryConfig, tmp_path: Path, **settings: Any) -> FastAPI:
    """A backend on a fresh SQLite database of the test's, asking the local BigQuery
    (without the dashboard unless ``frontend_dist`` says where it is built)."""
    database = f"sqlite:///{tmp_path / 'onceover.db'}"
    upgrade_to_head(database)
    defaults: dict[str, Any] = {
        "database_url": database,
        "tokens": TOKENS,
        "frontend_dist": tmp_path / "none",
        "launch_log_dir": tmp_path / "attempt-logs",
    }
    return create_app(Settings(**{**defaults, **settings}), bigquery=bq_config)


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """The app on a socket; jobs it launched are stopped, and their exits recorded,
    before the server's shutdown disposes of its database engine."""
    with serving(app) as url:
        try:
            yield url
        finally:
            app.state.launcher.stop_all()


def crashed_run(
    app: FastAPI, url: str, bq_config: BigQueryConfig, tmp_path: Path, table: str, where: str,
    rows: int,
) -> str:  # fmt: skip
    """Run the job with ``where=crash@1`` armed until it crashes; the run id, once the
    control plane shows the run failed."""
    source = tmp_path / "orders"
    write_files(source, rows, 4, "json")
    app.state.settings.launch_monitor_url = url  # what `onceover serve` sets to its address
    crashed = load_orders(bq_config, url, source, table, tmp_path, f"{where}=crash@1", ["--stamp"])
    assert crashed.returncode != 0, crashed.stdout[-2000:]
    assert f"{where} fired: crash" in (tmp_path / "failpoints" / "fired.log").read_text()
    run_id = (tmp_path / "ckpt" / "onceover" / "run_id").read_text().strip()
    assert wait_for_status(url, VIEWER, run_id, "failed")["status"] == "failed"
    return run_id


def counted_keys(rest: bigquery.Client, table: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT event_id)`` of the table, asked of BigQuery."""
    row = next(iter(rest.query(f"SELECT COUNT(*), COUNT(DISTINCT event_id) FROM `{table}`")))
    return int(row[0]), int(row[1])
