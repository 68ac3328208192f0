"""The load job as a user runs it: ``python -m jobs.load_files`` on generated order
files, posting to a control plane, with failpoints armed from the environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.backend.conftest import INGEST


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
        [sys.executable, "-m", "jobs.load_files", "--source", str(source), "--format", "json",
         "--table", table, "--key", "event_id", "--checkpoint", str(work / "ckpt"),
         "--create-table", "--max-files-per-trigger", "2", "--job", "orders",
         "--monitor-url", url, "--monitor-token", INGEST, *extra],
        env=env, capture_output=True, text=True, timeout=480, check=False,
    )  # fmt: skip
