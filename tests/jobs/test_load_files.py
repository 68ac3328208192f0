"""The load job end to end: real Spark (local[2,4]), real local BigQuery, injected faults.

Exactly-once is judged by BigQuery itself: COUNT(*) and COUNT(DISTINCT event_id) of
the table after the job (and, after a crash, after the same command run again). The
events the job sends go to a stand-in for the control plane (tests/helpers/receiver.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.helpers.lineage_receiver import API_KEY, LineageReceiver, receipts_of
from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.spark

# Spark reads the 4 files as 2 partitions; 25,000 rows reach a task as 3 Arrow batches,
# so a stream gets 3 appends, enough for the faults armed at the 3rd append.
ROWS = 50_000


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("orders")
    write_files(directory, ROWS, 4, "json")
    return directory


@dataclass
class Load:
    """One table, one checkpoint, one event receiver: the same command, run as often as needed."""

    bq_config: BigQueryConfig
    rest: bigquery.Client
    receiver: Receiver
    source: Path
    table: str
    checkpoint: Path

    def run(
        self, *extra: str, failpoints: str | None = None, more_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**job_environment(self.bq_config), **(more_env or {})}
        env["ONCEOVER_SPOOL_DIR"] = str(self.checkpoint.parent / "spool")
        # hits counted across the job's processes: a crashed worker's successor must
        # not fire the same failpoint again
        env["ONCEOVER_FAILPOINTS_STATE"] = str(self.checkpoint.parent / "failpoints")
        if failpoints:
            env["ONCEOVER_FAILPOINTS"] = failpoints
        return subprocess.run(
            [sys.executable, "-m", "onceover_jobs.load_files", "--source", str(self.source),
             "--format", "json", "--table", self.table, "--key", "event_id",
             "--checkpoint", str(self.checkpoint), "--create-table",
             "--monitor-url", self.receiver.url, "--monitor-token", TOKEN, *extra],
            env=env, capture_output=True, text=True, timeout=480, check=False,
        )  # fmt: skip

    def fired(self) -> str:
        """What the failpoints recorded as fired, across every process of the job."""
        log = self.checkpoint.parent / "failpoints" / "fired.log"
        return log.read_text() if log.exists() else ""

    def counted(self) -> tuple[int, int]:
        row = next(iter(self.rest.query_and_wait(
            f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{self.table}`"
        )))  # fmt: skip
        return int(row["n"]), int(row["ids"])

    def ledger(self) -> list[dict[str, object]]:
        paths = (self.checkpoint / "onceover").rglob("batch-*.json")
        return [json.loads(path.read_text()) for path in paths]


@pytest.fixture
def load(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    receiver: Receiver,
    source: Path,
    dataset: str,
    tmp_path: Path,
) -> Load:
    return Load(bq_config, rest, receiver, source, f"{dataset}.orders", tmp_path / "ckpt")


@pytest.mark.parametrize("mode", ["pending", "committed", "default"])
def test_each_mode_lands_every_row(load: Load, mode: str) -> None:
    # One of the runs also sends its OpenLineage events (configured as the clients are).
    lineage = LineageReceiver()
    lineage.up()
    to_lineage = {"OPENLINEAGE_URL": lineage.url, "OPENLINEAGE_API_KEY": API_KEY}
    try:
        result = load.run("--mode", mode, more_env=to_lineage if mode == "pending" else None)
        if mode == "pending":
            wait_until("the run's COMPLETE", lambda: lineage.of_type("COMPLETE") or None, 30)
    finally:
        lineage.down()
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Committed {ROWS:,} rows" in result.stdout
    # default mode is at-least-once in general; with no faults it lands each row once
    assert load.counted() == (ROWS, ROWS)

    started = load.receiver.of_type("run_started")
    assert len(started) == 1
    assert started[0]["spec"]["module"] == "onceover_jobs.load_files"
    assert TOKEN not in started[0]["spec"]["args"]  # secrets never enter the stored spec
    assert "--monitor-token" not in started[0]["spec"]["args"]
    finished = load.receiver.of_type("run_finished")
    assert [e["rows_committed"] for e in finished] == [ROWS]
    assert sum(e["rows"] for e in load.receiver.of_type("batch_committed")) == ROWS
    assert sum(e["rows"] for e in load.receiver.of_type("append_acknowledged")) == ROWS
    if mode == "pending":
        assert sum(e["row_count"] for e in load.receiver.of_type("stream_finalized")) == ROWS
        # One START and one COMPLETE from the job, a RUNNING per batch from the sink, one run.
        kinds = [e["eventType"] for e in lineage.received()]
        assert kinds == ["START", *["RUNNING"] * len(load.ledger()), "COMPLETE"], kinds
        assert len({e["run"]["runId"] for e in lineage.received()}) == 1
        assert sum(r["rows"] for e in lineage.of_type("RUNNING") for r in receipts_of(e)) == ROWS
        assert lineage.refused == []
    # the job's own logs are Cloud Logging JSON lines
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert any(entry.get("severity") == "INFO" for entry in logged)


def test_a_driver_crash_at_each_point_then_the_same_command_commits_exactly_once(
    load: Load,
) -> None:
    # One file per micro-batch, hits counted across runs (a resolution's commit counts
    # as a commit): a crash after an intent is written, one just before a commit, one
    # just after BigQuery committed (the ledger never heard); the fourth run is clean.
    args = ("--max-files-per-trigger", "1")
    spec = "ledger.after_intent=crash@1;commit.before=crash@2;commit.after=crash@3"
    for point in ("ledger.after_intent", "commit.before", "commit.after"):
        crashed = load.run(*args, failpoints=spec)
        assert crashed.returncode != 0, crashed.stderr[-3000:]
        assert f"failpoint {point} fired: crash" in load.fired(), load.fired()

    again = load.run(*args, failpoints=spec)  # every armed hit has passed
    assert again.returncode == 0, again.stderr[-3000:]
    assert load.counted() == (ROWS, ROWS)
    records = sorted(load.ledger(), key=lambda r: int(str(r["batch_id"])))
    assert [int(str(r["batch_id"])) for r in records] == [0, 1, 2, 3]
    assert all(r["state"] == "committed" for r in records)
    # Run 1 died after batch 0's intent: run 2 committed the intent's own streams
    # (resolved) and skipped the replay, then committed batch 1 and died before batch 2's
    # commit; run 3 committed batch 2's intent, and died as that commit answered. Run 4
    # found batch 2 committed in BigQuery (resolved), skipped its replay, wrote batch 3.
    assert [r["resolved"] for r in records] == [True, False, True, False]
    skipped = load.receiver.of_type("batch_skipped_duplicate")
    assert sorted({e["batch_id"] for e in skipped}) == [0, 2]
    orphaned = load.receiver.of_type("stream_orphaned")
    replays = {e["stream"] for e in orphaned if "replay of a committed batch" in e["reason"]}
    assert replays == {s for e in skipped for s in e["orphaned_streams"]}
    assert not [e for e in orphaned if "uncommittable" in e["reason"]]


def test_a_failed_task_is_retried_by_spark_and_its_stream_reported_orphaned(load: Load) -> None:
    result = load.run(failpoints="append.before=error@2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failpoint append.before fired: error" in load.fired()
    assert load.counted() == (ROWS, ROWS)
    orphaned = load.receiver.of_type("stream_orphaned")
    assert orphaned
    assert all("task attempt failed" in e["reason"] for e in orphaned)
    committed = {s["stream"] for e in load.receiver.of_type("batch_committed")
                 for s in e["streams"]}  # fmt: skip
    assert not committed & {e["stream"] for e in orphaned}


def test_lost_append_responses_are_deduplicated(load: Load) -> None:
    # (pending mode's handling of the same is covered by tests/sink/test_appender.py)
    result = load.run("--mode", "committed", failpoints="append.response=drop%0.2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failpoint append.response fired: drop" in load.fired()
    assert load.counted() == (ROWS, ROWS)
    assert load.receiver.of_type("append_already_exists")
    assert not load.receiver.of_type("append_out_of_range")


def test_committed_mode_continues_a_crashed_partition_from_the_ledger(load: Load) -> None:
    # The executor dies after BigQuery applied its 3rd append (rows visible already);
    # Spark retries the task, which finds its stream and offset in the ledger.
    result = load.run("--mode", "committed", failpoints="append.response=crash@3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failpoint append.response fired: crash" in load.fired()
    assert load.counted() == (ROWS, ROWS)
    resumed = [e for e in load.receiver.of_type("stream_created") if e["resumed"]]
    assert resumed
    assert load.receiver.of_type("append_already_exists")


def test_a_missing_table_without_create_table_is_one_clear_line(load: Load) -> None:
    env = job_environment(load.bq_config)
    result = subprocess.run(
        [sys.executable, "-m", "onceover_jobs.load_files", "--source", str(load.source),
         "--format", "json", "--table", f"{load.table}_absent", "--key", "event_id",
         "--checkpoint", str(load.checkpoint)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"table {load.table}_absent does not exist" in result.stderr
    assert "--create-table" in result.stderr


@pytest.mark.parametrize("value", ["5", "19500001"])
def test_a_request_cap_outside_the_sinks_range_is_refused_naming_it(
    value: str, source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onceover_jobs.load_files import parse_args

    argv = ["--source", str(source), "--format", "json", "--table", "p.d.t", "--key", "k",
            "--checkpoint", str(tmp_path), "--request-max-bytes", value]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "--request-max-bytes must be between 10,000 and 19,500,000" in capsys.readouterr().err
    assert parse_args([*argv[:-1], "10000"]).request_max_bytes == 10_000
