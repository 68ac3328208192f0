"""The store dimension's plumbing (onceover_tools/chaos/stores.py, runner.py): a stand-in
started only for a schedule whose ledger is in a bucket, a bucket per schedule, the job
told where the ledger is, and the verdict reading it there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from onceover_jobs import load_files
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.retention import prune
from onceover_tools.chaos.on_cluster import submit_argv
from onceover_tools.chaos.runner import disk_ledger, job_argv
from onceover_tools.chaos.schedule import WORKLOAD_MODES, WORKLOADS, Schedule
from onceover_tools.chaos.stores import StandIns
from onceover_tools.chaos.verify import ledger_problems, ledger_view
from onceover_tools.localstores import LocalS3, StandInProcess
from onceover_tools.spark_cluster import SparkCluster

from onceover.ledger_files import BatchRecord, StreamCommit

TABLE = "p.onceover_chaos.seed4_0002"
ENDPOINT = "AWS_ENDPOINT_URL"


class _StandIn(StandInProcess):
    """A stand-in that starts no server: what StandIns asks of one, counted."""

    scheme = "s3"

    def __init__(self, log: Path) -> None:
        super().__init__("a fake stand-in", lambda host, port: ["true"], host="127.0.0.1",
                         port=1, log_path=log)  # fmt: skip
        self.buckets: list[str] = []
        self.starts = 0
        self.stopped = False

    def start(self, timeout_s: float = 0.0) -> _StandIn:
        self.starts += 1
        return self

    def stop(self) -> int | None:
        self.stopped = True
        return 0

    def environment(self) -> dict[str, str]:
        return {ENDPOINT: self.endpoint}

    def create_bucket(self, name: str) -> str:
        self.buckets.append(name)
        return self.url(name)


def _schedule(store: str, index: int = 2, workload: str = "load_files") -> Schedule:
    racer = 5.0 if workload == "racing_drivers" else None
    mode = WORKLOAD_MODES[workload][0]  # pending, but for cdc, whose only mode is default
    return Schedule(seed=4, index=index, mode=mode, faults=(), store=store,
                    workload=workload, racer_at_s=racer)  # fmt: skip


def test_a_stand_in_starts_for_the_first_schedule_in_a_bucket_and_serves_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENDPOINT, "http://what.the.user.had")
    made: list[_StandIn] = []

    def make(log: Path) -> _StandIn:
        made.append(_StandIn(log))
        return made[-1]

    stand_ins = StandIns(tmp_path, {"s3": make})
    assert stand_ins.ledger_for(_schedule("posix")) is None
    assert made == []  # a session on disk starts nothing

    first = stand_ins.ledger_for(_schedule("s3"))
    second = stand_ins.ledger_for(_schedule("s3"))  # the same name: a bucket of its own
    assert first is not None
    assert second is not None
    assert len(made) == made[0].starts == 1
    assert made[0].child.log_path == tmp_path / "local-s3.log"
    assert first.url.startswith("s3://seed4-0002-")
    assert first.url.endswith("/ledger")
    assert first.url != second.url
    assert len(set(made[0].buckets)) == 2
    assert first.environment == {ENDPOINT: made[0].endpoint}
    assert os.environ[ENDPOINT] == made[0].endpoint  # where the verdict reads the ledger

    stand_ins.stop()
    assert made[0].stopped
    assert os.environ[ENDPOINT] == "http://what.the.user.had"  # given back


@pytest.mark.parametrize("workload", WORKLOADS)
def test_each_job_is_told_its_ledger_is_in_the_bucket(tmp_path: Path, workload: str) -> None:
    (tmp_path / "source").mkdir()
    url = "s3://seed4-0002-0123abcd/ledger"
    schedule = _schedule("s3", workload=workload)
    argv = job_argv(schedule, TABLE, tmp_path, ledger=url)
    on_disk = job_argv(schedule, TABLE, tmp_path)
    if workload == "foreach_batch":
        # writes inside foreachBatch name no ledger: $ONCEOVER_LEDGER is the bucket's
        assert "--ledger" not in argv
        assert argv == on_disk
        assert disk_ledger(schedule, tmp_path) == str(tmp_path / "ledger")
    elif workload in ("two_tables", "overwrite", "overwrite_dynamic"):  # their --ledger
        assert argv[argv.index("--ledger") + 1] == url
        assert on_disk[on_disk.index("--ledger") + 1] == disk_ledger(schedule, tmp_path)
    elif workload == "cdc":  # the sink's ledger option, the checkpoint staying on disk
        from onceover_jobs.examples import cdc_mirror

        assert cdc_mirror.parse_args(argv[3:]).ledger == url
        assert cdc_mirror.parse_args(on_disk[3:]).ledger is None
        assert cdc_mirror.parse_args(argv[3:]).checkpoint == str(tmp_path / "checkpoint")
        assert disk_ledger(schedule, tmp_path) == str(tmp_path / "checkpoint" / "onceover")
    else:  # the load job: the sink's ledger option, the checkpoint staying on disk
        args = load_files.parse_args(argv[3:])
        assert args.ledger == load_files.ledger_of(args) == url
        assert args.checkpoint == tmp_path / "checkpoint"
        spec = load_files.spec_args(argv[3:], args)  # a resume launches with the URL
        assert spec[spec.index("--ledger") + 1] == url
        assert load_files.optional_options(args)["ledger"] == url
        plain = load_files.parse_args(on_disk[3:])
        assert "--ledger" not in on_disk
        assert "ledger" not in load_files.optional_options(plain)
        assert load_files.ledger_of(plain) == disk_ledger(schedule, tmp_path)
        assert disk_ledger(schedule, tmp_path) == str(tmp_path / "checkpoint" / "onceover")


def test_a_bad_ledger_location_is_refused_by_the_load_job(tmp_path: Path) -> None:
    (tmp_path / "source").mkdir()
    argv = job_argv(_schedule("posix"), TABLE, tmp_path, ledger="dbfs:/ledgers/q1")
    with pytest.raises(SystemExit):
        load_files.parse_args(argv[3:])
    relative = job_argv(_schedule("posix"), TABLE, tmp_path, ledger="ledgers/q1")
    assert load_files.parse_args(relative[3:]).ledger == os.path.abspath("ledgers/q1")


def test_the_cluster_ships_what_reaches_the_bucket_to_its_executors(tmp_path: Path) -> None:
    schedule = _schedule("s3", workload="cluster")
    reach = LocalS3().environment()  # not started: only its variables are asked for
    env = {**reach, "UNRELATED": "x"}
    argv = job_argv(schedule, TABLE, tmp_path, ledger="s3://b/ledger")
    submitted = submit_argv(SparkCluster(tmp_path / "cluster"), argv, env, tmp_path,
                            executor_env=tuple(reach))  # fmt: skip
    confs = dict(submitted[i + 1].split("=", 1) for i, a in enumerate(submitted) if a == "--conf")
    for name, value in reach.items():
        assert confs[f"spark.executorEnv.{name}"] == value
    assert "spark.executorEnv.UNRELATED" not in confs
    assert submitted[submitted.index("--ledger") + 1] == "s3://b/ledger"


def _commit(ledger: Ledger, batch_id: int | None, rows: int) -> None:
    record = BatchRecord(
        query_id="q", batch_id=batch_id, table=ledger.table, mode="pending", state="intent",
        streams=(StreamCommit(f"s{batch_id}", rows, 10, 0, 0),), expected_rows=rows,
        intent_at="2026-12-01T00:00:00Z",
    )  # fmt: skip
    assert ledger.write_intent(record)
    ledger.mark_committed(record, at="2026-12-01T00:00:01Z", commit_time=None)


def test_the_verdict_counts_the_tables_writes_where_the_ledger_is(tmp_path: Path) -> None:
    root = str(tmp_path / "ledger")
    stream = Ledger(root, "query-1", TABLE)
    for batch_id in range(15):
        _commit(stream, batch_id, 10)
    assert prune(stream, newest_batch=14, keep=5, every=1).pruned  # counted in a summary
    _commit(Ledger(root, "run-1", TABLE, write="1"), None, 7)  # a second write, another scope
    _commit(Ledger(root, "run-1", f"{TABLE}_summary"), None, 5)  # another table: not counted
    intent = BatchRecord(
        query_id="q", batch_id=15, table=TABLE, mode="pending", state="intent", streams=(),
        expected_rows=99, intent_at="2026-12-01T00:00:00Z",
    )  # fmt: skip
    assert stream.write_intent(intent)  # not committed: not counted

    view = ledger_view(root, TABLE)
    assert (view.scopes, view.writes, view.rows) == (2, 16, 157)
    assert ledger_problems(view, 157) == []
    assert ledger_problems(view, 150) == [
        f"the ledger at {root} holds 157 rows committed, expected 150"
    ]
    nowhere = ledger_view(str(tmp_path / "absent"), TABLE)
    assert ledger_problems(nowhere, 157) == [
        f"the ledger at {tmp_path / 'absent'} holds no committed write"
    ]
    # a schedule whose ledger is in a bucket, its job writing on this disk after all
    bucket = ledger_view(str(tmp_path / "bucket"), TABLE)  # a bucket's, here a directory
    _commit(Ledger(bucket.where, "query-1", TABLE), 0, 157)
    assert ledger_problems(ledger_view(bucket.where, TABLE), 157, not_at=root) == [
        f"the ledger was written on this disk ({root}: query-1, run-1), not only at {bucket.where}"
    ]
    assert ledger_problems(ledger_view(bucket.where, TABLE), 157, not_at=str(tmp_path / "x")) == []


def test_the_verdict_reads_a_ledger_in_a_bucket_by_its_url(
    s3_bucket: str, local_s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in local_s3.environment().items():  # as StandIns exports them
        monkeypatch.setenv(name, value)
    url = f"{s3_bucket}/ledger"
    for batch_id in range(3):
        _commit(Ledger(url, "query-1", TABLE), batch_id, 200)
    view = ledger_view(url, TABLE)
    assert (view.where, view.scopes, view.writes, view.rows) == (url, 1, 3, 600)
    assert ledger_problems(view, 600) == []
