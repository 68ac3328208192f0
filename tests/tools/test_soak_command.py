"""``onceover soak`` end to end, as CI's smoke test of the command: a minute
of the rate-source query in writeStream's default mode, each fault kind once, then the
verdict counted in BigQuery (every key of the source once, rows read back as made, the
ledger adding up to the table), the samples and the chart; then against "real" BigQuery
(the local one behind TLS), its faults on CONNECT tunnels. The runs of record are long
and not here (docs/BENCHMARKS.md, "Soak")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from onceover_tools.soak.plan import FAULT_KINDS

from onceover.bigquery import BigQueryConfig
from tests.helpers.tls_front import TlsFront, make_authority

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
    assert report["bigquery"].startswith("the local BigQuery at http://127.0.0.1:")
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
def test_against_real_bigquery_the_faults_are_the_tunnels_and_the_baseline_duplicates(
    tmp_path: Path, subprocess_env: dict[str, str], bq_config: BigQueryConfig
) -> None:
    """``--bigquery real``: no local BigQuery started, the sink reached as its connection
    options say, over TLS (the local BigQuery behind TLS fronts: Google's endpoints as a
    client sees them, the one part mocked, with a token), each connection a CONNECT
    tunnel through the soak's proxy, where the kill and the drop happen without reading
    a byte. The verdict can fail, and does: in ``default`` mode an append whose answer
    was lost is sent again to ``_default``, and BigQuery holds its rows twice."""
    assert bq_config.rest_endpoint is not None
    assert bq_config.grpc_endpoint is not None
    authority = make_authority(tmp_path / "tls")
    rest_upstream = bq_config.rest_endpoint.split("://", 1)[1].rstrip("/")
    env = {
        k: v for k, v in subprocess_env.items() if k.lower() not in ("no_proxy", "no_grpc_proxy")
    }
    env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = env["REQUESTS_CA_BUNDLE"] = str(authority.ca_file)
    report_dir = tmp_path / "soak"
    with (
        TlsFront(rest_upstream, authority) as rest,
        TlsFront(bq_config.grpc_endpoint, authority) as grpc,
    ):
        done = subprocess.run(
            [
                sys.executable, "-m", "onceover_tools", "soak", "--minutes", "0.5",
                "--mode", "default", "--faults", "connection_drop,worker_kill",
                "--crash-every", "5", "--report", str(report_dir), "--bigquery", "real",
                "--option", f"parentProject={bq_config.resolved_project()}",
                "--option", "gcpAccessToken=ya29.test-token",
                "--option", f"bigQueryHttpEndpoint=https://{rest.endpoint}",
                "--option", f"bigQueryStorageGrpcEndpoint={grpc.endpoint}",
            ],
            env=env, capture_output=True, text=True, timeout=840, check=False,
        )  # fmt: skip
        tls_connections = rest.connections, grpc.connections
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((report_dir / "soak-report.json").read_text())
    verdict = report["verdict"]
    assert report["bigquery"].startswith(f"real BigQuery, project {bq_config.resolved_project()}")
    assert re.fullmatch(r"onceover-local\.onceover_soak\.rate_stream_\d{8}_\d{6}", report["table"])
    assert "ya29.test-token" not in json.dumps(report)
    assert "gcpAccessToken=***" in report["command"]
    assert all(n > 0 for n in tls_connections)  # both clients spoke TLS to the fronts
    # each kind fired on the Storage Write tunnel
    fired = {f["kind"]: f["detail"] for f in report["faults"] if f["fired_s"] is not None}
    assert set(fired) == {"connection_drop", "worker_kill"}
    assert "answer thrown away" in fired["connection_drop"]
    assert fired["worker_kill"].startswith("killed Spark worker")
    # the table, counted straight in BigQuery, holds every key, some twice
    assert report["ok"] is False
    assert verdict["missing_keys"] == 0
    assert verdict["extra_rows"] > 0
    assert verdict["distinct_keys"] == verdict["source_rows"] > 0
    assert any("rows extra" in problem for problem in verdict["problems"])
    assert "FAILED" in done.stdout
    # the streams as the sink reported them, and the tunnels held open
    samples = report["samples"]
    assert samples[-1]["rows_appended"] >= verdict["distinct_keys"]
    assert max(s["append_calls_open"] for s in samples) >= 1
