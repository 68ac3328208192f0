"""``onceover soak`` end to end, as CI's smoke test of the command: a minute
of the rate-source query in writeStream's default mode, each fault kind once, then the
verdict counted in BigQuery (every key of the source once, rows read back as made, the
ledger adding up to the table), the samples and the chart. The runs of record are long
and not here (docs/BENCHMARKS.md, "Soak")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from onceover_tools.soak.plan import FAULT_KINDS

pytestmark = pytest.mark.spark

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(900)
def test_a_short_soak_fires_every_fault_kind_and_counts_every_key_once(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    report_dir = tmp_path / "soak"
    done = subprocess.run(
        [
            sys.executable, "-m", "onceover_tools", "soak", "--minutes", "1",
            "--crash-every", "11", "--sample-every", "3", "--report", str(report_dir),
        ],
        env=subprocess_env, capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "passed:" in done.stdout

    report = json.loads((report_dir / "soak-report.json").read_text())
    verdict = report["verdict"]
    assert report["ok"] is True
    assert report["mode"] == "buffered"
    assert report["mode_option"] is None
    # every key the rate source made (Spark's offset log says how many), once
    assert verdict["source_rows"] >= 1_000 * 30
    assert verdict["rows"] == verdict["distinct_keys"] == verdict["source_rows"]
    assert verdict["missing_keys"] == verdict["extra_rows"] == 0
    assert verdict["values_checked"] >= 100
    assert verdict["values_wrong"] == 0
    assert verdict["ledger_rows"] == verdict["rows"]
    assert report["control_plane"]["rows_committed"] == verdict["rows"]
    # each kind armed, seen to fire, and a micro-batch committed after it
    fired = [f for f in report["faults"] if f["fired_s"] is not None]
    assert {f["kind"] for f in fired} == set(FAULT_KINDS)
    assert all(f["recovery_s"] is not None for f in fired)
    assert not any(f["missed"] for f in report["faults"])
    assert any(run["ended_by"] == "killed" for run in report["runs"])
    assert report["runs"][-1]["ended_by"] == "drained"
    samples = report["samples"]
    assert len(samples) >= 10
    assert samples[-1]["rows_committed"] == verdict["rows"]
    assert max(s["jvm_threads"] for s in samples) > 0  # the tree was found and read
    assert (report_dir / "soak-chart.png").read_bytes().startswith(PNG_SIGNATURE)
    assert "## Verdict: **passed**" in (report_dir / "soak-report.md").read_text()


@pytest.mark.timeout(900)
def test_the_soak_catches_the_at_least_once_baseline_duplicating(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The verdict can fail: in ``default`` mode an append whose answer is lost is sent
    again to ``_default``, and BigQuery holds its rows twice."""
    report_dir = tmp_path / "soak"
    done = subprocess.run(
        [
            sys.executable, "-m", "onceover_tools", "soak", "--minutes", "0.5",
            "--mode", "default", "--faults", "connection_drop", "--crash-every", "5",
            "--report", str(report_dir),
        ],
        env=subprocess_env, capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((report_dir / "soak-report.json").read_text())
    verdict = report["verdict"]
    assert report["ok"] is False
    assert verdict["missing_keys"] == 0
    assert verdict["extra_rows"] > 0
    assert verdict["distinct_keys"] == verdict["source_rows"]
    assert any("rows extra" in problem for problem in verdict["problems"])
    assert "FAILED" in done.stdout
