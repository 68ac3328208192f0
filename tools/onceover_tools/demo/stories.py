"""What each load must have done, checked against the control plane and BigQuery.

Each function waits for its load, checks its outcome and returns the end of the
step's line; anything else raises, and the step fails naming it.
"""

from __future__ import annotations

import threading
from typing import Any

from onceover.errors import OnceoverError
from onceover_tools.demo.control_plane import ControlPlane
from onceover_tools.demo.loads import LoadJob
from onceover_tools.demo.tables import copy_row, counts

EVENTS_TIMEOUT_S = 60.0
"""From a job's exit to the control plane showing its end (events, then a sweep)."""


def _check(holds: bool, problem: str) -> None:
    if not holds:
        raise OnceoverError(problem)


def _finished(job: LoadJob, api: ControlPlane, stop: threading.Event) -> tuple[int, dict[str, Any]]:
    status = job.wait(stop)
    return status, api.finished_run(job.run_id(), EVENTS_TIMEOUT_S)


def _succeeded(job: LoadJob, api: ControlPlane, stop: threading.Event, rows: int) -> dict[str, Any]:
    """The run of a load that must succeed with exactly ``rows`` rows, in BigQuery too."""
    status, run = _finished(job, api, stop)
    _check(status == 0, f"the job exited with status {status}; see {job.log_path}")
    _check(run["status"] == "succeeded", f"run {run['run_id']} is {run['status']}")
    _check(
        run["rows_committed"] == rows,
        f"run {run['run_id']} committed {run['rows_committed']:,} rows, not {rows:,}",
    )
    total, distinct = counts(job.bigquery, job.table)
    _check(
        total == distinct == rows,
        f"BigQuery holds {total:,} rows ({distinct:,} distinct keys) in {job.table}, not {rows:,}",
    )
    return run


def _requests(run: dict[str, Any]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(run["write_requests"].items()))


def clean(job: LoadJob, api: ControlPlane, stop: threading.Event, rows: int) -> str:
    run = _succeeded(job, api, stop, rows)
    return (
        f"run {run['run_id']} succeeded: {rows:,} rows in {run['batches_committed']} batches, "
        f"{rows:,} in BigQuery; append requests: {_requests(run)}"
    )


def under_faults(job: LoadJob, api: ControlPlane, stop: threading.Event, rows: int) -> str:
    run = _succeeded(job, api, stop, rows)
    _check(
        run["already_exists"] > 0 and run["out_of_range"] > 0,
        f"run {run['run_id']} shows ALREADY_EXISTS {run['already_exists']} and OUT_OF_RANGE "
        f"{run['out_of_range']}; the proxy fired {', '.join(job.fired()) or 'nothing'}",
    )
    return (
        f"run {run['run_id']} succeeded: {rows:,} rows in BigQuery, none twice; "
        f"append requests: {_requests(run)}"
    )


def crashed(job: LoadJob, api: ControlPlane, stop: threading.Event) -> str:
    status, run = _finished(job, api, stop)
    fired = job.work / "failpoints" / "fired.log"
    _check(
        fired.exists() and "commit.after fired: crash" in fired.read_text(),
        f"the failpoint commit.after never fired (job exit status {status}); see {job.log_path}",
    )
    _check(run["status"] == "failed", f"run {run['run_id']} is {run['status']}, not failed")
    plan = api.resume_plan(run["run_id"])
    intents = len(plan["pending_intents"])
    _check(intents > 0, f"the resume plan of run {run['run_id']} has no batch to settle")
    return (
        f"run {run['run_id']} failed, waiting to be resumed "
        f"({intents} batch committed in BigQuery but not in its ledger)"
    )


def reconciled(
    clean_job: LoadJob,
    tampered_job: LoadJob,
    api: ControlPlane,
    stop: threading.Event,
    rows: int,
) -> str:
    """The clean run reconciles ``ok``; the tampered one, once a row is copied, ``mismatch``."""
    clean_id = clean_job.run_id()
    clean_result = api.reconcile(clean_id)
    _check(clean_result["status"] == "ok", f"run {clean_id} reconciled {clean_result['status']}")
    _succeeded(tampered_job, api, stop, rows)
    tampered_id = tampered_job.run_id()
    # Its own reconciliation (the backend checks each run that succeeds) first, so the
    # run's page shows ok, then mismatch, in that order.
    api.reconciled_run(tampered_id, EVENTS_TIMEOUT_S)
    key = rows // 2
    copy_row(tampered_job.bigquery, tampered_job.table, key)
    result = api.reconcile(tampered_id)
    _check(
        result["status"] == "mismatch" and result["duplicate_key_count"] == 1,
        f"run {tampered_id} reconciled {result['status']} with "
        f"{result['duplicate_key_count']} duplicated keys after a copy of event {key}",
    )
    return (
        f"run {clean_id} ok ({clean_result['actual_rows']:,} of "
        f"{clean_result['expected_rows']:,}); event {key} copied by an INSERT into "
        f"{tampered_job.table}: run {tampered_id} mismatch "
        f"({result['duplicate_rows']} duplicate row)"
    )
