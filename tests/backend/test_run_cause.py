"""A failed run's cause, classified from its error and the batch it reported last: the
errors are the ones jobs report (the demo's crashed run, Spark's task failures, the sink's
refusals), and the batch is read from the stored batches and streams."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from onceover_backend.services.reads.run_cause import LastBatch, classify

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer

# What the demo's run crashed at commit.after reports: its Python driver, once the JVM
# had gone, could not reach it.
JVM_GONE = "ConnectionRefusedError: [Errno 111] Connection refused"
PY4J_GONE = (
    "py4j.protocol.Py4JNetworkError: Answer from Java side is empty\n"
    "During handling of the above exception, another exception occurred: ..."
)
TASK_FAILED = (
    "An error occurred while calling o92.awaitTermination.\n"
    ": org.apache.spark.sql.streaming.StreamingQueryException: Job aborted due to stage "
    "failure: Task 1 in stage 3.0 failed 4 times, most recent failure: Lost task 1.3 in "
    "stage 3.0 (TID 14) (10.0.0.7 executor 2): org.apache.spark.api.python.PythonException: "
    "Traceback (most recent call last):\n"
    '  File "/opt/job/sink.py", line 88, in write\n'
    "onceover_jobs.sink.errors.RowsRejectedError: BigQuery refused 3 rows of batch 2\n"
    "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(...)\n"
)
REFUSED = (
    "ConcurrentDriverError: another driver still runs query q-1 of run r-1 (its heartbeat "
    "is 4 s old); stop it or wait"
)
COMMIT = (
    "StreamsGoneError: BatchCommitWriteStreams refused batch 5 of p.d.t: NOT_FOUND "
    "(streams expired)"
)
OPTION = "SinkOptionError: option 'mode' must be one of pending, committed, buffered"


@pytest.mark.parametrize(
    ("error", "kind", "says"),
    [
        (JVM_GONE, "driver_died", "The Spark driver died (its JVM exited)"),
        (PY4J_GONE, "driver_died", "The Spark driver died (its JVM exited)"),
        (
            TASK_FAILED,
            "task_failed",
            "A Spark task failed 4 times at batch 2 (its streams written, its commit not "
            "reported): onceover_jobs.sink.errors.RowsRejectedError: BigQuery refused 3 rows",
        ),
        (COMMIT, "commit_refused", "BigQuery refused the commit at batch 2"),
        (OPTION, "bad_option", "A write option or setting is wrong at batch 2"),
        ("disk full", "error", "The job failed at batch 2 (its streams written"),
    ],
)
def test_each_error_is_classified_and_told_with_its_batch(error: str, kind: str, says: str) -> None:
    cause = classify(error, last=LastBatch("2", "writing"))
    assert cause.kind == kind
    assert says in cause.headline
    assert "batch 2" in cause.headline
    assert (cause.batch, cause.batch_stage) == ("2", "writing")
    assert cause.error == error  # the raw error, beside the headline


def test_a_driver_death_names_how_far_its_batch_got() -> None:
    said = {
        stage: classify(JVM_GONE, last=LastBatch("0", stage)).headline
        for stage in ("writing", "intent", "committed")
    }
    assert said["writing"] == (
        "The Spark driver died (its JVM exited) at batch 0 (its streams written, its commit "
        "not reported)"
    )
    assert said["intent"] == (
        "The Spark driver died (its JVM exited) during the commit of batch 0 (intended, "
        "not confirmed)"
    )
    assert said["committed"] == "The Spark driver died (its JVM exited) after batch 0 committed"
    assert "ConnectionRefusedError" not in "".join(said.values())  # the symptom is beneath
    write = classify(JVM_GONE, last=LastBatch("write", "intent")).headline
    assert "during the commit of its batch write" in write
    assert classify(JVM_GONE).headline.endswith("before reporting any batch")


def test_a_task_failure_names_its_error_not_the_spark_wrapper() -> None:
    cause = classify(TASK_FAILED.replace("4 times", "1 time"))
    assert cause.headline.startswith("A Spark task failed 1 time before reporting any batch: ")
    assert cause.headline.endswith("RowsRejectedError: BigQuery refused 3 rows of batch 2")


def test_a_refused_driver_is_refused_whatever_its_error_says() -> None:
    for cause in (classify(REFUSED), classify(JVM_GONE, refused=True)):
        assert cause.kind == "refused"
        assert cause.headline.startswith("Refused: another driver still runs")
        assert cause.batch is None  # it wrote nothing


def test_no_error_at_all_is_said_so() -> None:
    for error in (None, "", "  \n"):
        cause = classify(error)
        assert cause.kind == "error"
        assert cause.headline == "The job failed before reporting any batch: it reported no error"


def test_a_long_error_is_cut_in_the_headline_and_whole_beneath() -> None:
    error = "RuntimeError: " + "x" * 1000
    cause = classify(error)
    assert len(cause.headline) < 400
    assert cause.headline.endswith("…")
    assert cause.error == error


def _post(client: TestClient, events: list[ev.Event]) -> None:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.is_success, response.text


def test_the_run_and_the_overview_tell_the_same_cause_from_the_stored_batches(
    client: TestClient,
) -> None:
    # Batch 0 committed, batch 1 intended, then the JVM died: the Python side reports
    # what it saw.
    crash = f.failed("r1", "a1", 40, error=JVM_GONE)
    _post(client, [*f.full_run("r1")[:-1], f.intent("r1", 1, 30, ["r1/s3"], 10), crash])
    run = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()
    assert run["status"] == "failed"
    cause = run["cause"]
    assert (cause["kind"], cause["batch"], cause["batch_stage"]) == ("driver_died", "1", "intent")
    assert cause["headline"].startswith("The Spark driver died (its JVM exited) during the commit")
    assert cause["error"] == JVM_GONE

    overview = client.get("/api/overview", headers=bearer(VIEWER)).json()
    (shown,) = [r for r in overview["runs"] if r["run_id"] == "r1"]
    assert shown["cause"] == cause
    assert shown["reason"] == cause["headline"]


def test_a_run_that_did_not_fail_has_no_cause(client: TestClient) -> None:
    _post(client, f.full_run("ok"))
    assert client.get("/api/runs/ok", headers=bearer(VIEWER)).json()["cause"] is None


def test_streams_written_past_the_last_reported_batch_are_where_the_run_stopped(
    client: TestClient,
) -> None:
    # As the demo's crash at commit.after: batch 1's streams were written and finalized,
    # then the JVM died before the driver reported the batch's intent.
    later: list[ev.Event] = [
        f.created("r1", "r1/s3", 20).model_copy(update={"batch_id": 1}),
        f.finalized("r1", "r1/s3", 21, 10).model_copy(update={"batch_id": 1}),
    ]
    crash = f.failed("r1", "a1", 40, error=JVM_GONE)
    _post(client, [*f.full_run("r1")[:-1], *later, crash])
    cause = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()["cause"]
    assert (cause["kind"], cause["batch"], cause["batch_stage"]) == ("driver_died", "1", "writing")
    assert cause["headline"] == (
        "The Spark driver died (its JVM exited) at batch 1 (its streams written, its commit "
        "not reported)"
    )
