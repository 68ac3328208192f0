"""What each kind of alert rule sees in the stored data right now.

:func:`observe` answers, for one rule, the things (runs, or tables for table-wide
reconciliations) for which its condition holds, each with a value and a sentence a
person woken at night can act on. Everything is read from the control plane's own
tables: rollups, runs, streams, reconciliations; nothing here asks BigQuery.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func
from sqlalchemy import select as select_rows
from sqlmodel import Session, and_, col, or_, select

from onceover_backend.services.alerts.rules import DEFAULT_ORPHAN_AGE_S, DEFAULT_WINDOW_S
from onceover_backend.tables import AlertRule, Batch, Reconciliation, Run, Stream, WriteRollup

# Codes that are not "other errors": success, deduplication, and the offset alarm.
NOT_ERRORS = frozenset({"OK", "ALREADY_EXISTS", "OUT_OF_RANGE"})


@dataclass(frozen=True)
class Observation:
    """The rule's condition holds for this run (or table)."""

    run_id: str | None
    job: str | None
    table: str
    value: float
    summary: str

    def subject(self) -> dict[str, str]:
        """The labels that tell this thing apart (part of the fingerprint)."""
        labels = {"table": self.table}
        if self.run_id is not None:
            labels["run_id"] = self.run_id
        if self.job is not None:
            labels["job"] = self.job
        return labels


def _in_scope(rule: AlertRule) -> list[Any]:
    if rule.scope == "job":
        return [Run.job == rule.scope_value]
    if rule.scope == "table":
        return [Run.table_id == rule.scope_value]
    return []


def _run_name(run_id: str, job: str | None, table: str) -> str:
    return f"run {run_id} ({'job ' + job + ', ' if job else ''}table {table})"


def observe(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    return _OBSERVERS[rule.kind](session, rule, now)


# -- append request rates --------------------------------------------------------------


def _window(rule: AlertRule) -> int:
    return int(rule.params.get("window_s") or DEFAULT_WINDOW_S) // 60 * 60


def _requests_by_run(
    session: Session, rule: AlertRule, now: datetime
) -> dict[tuple[str, str | None, str], dict[str, int]]:
    start = now - timedelta(seconds=_window(rule))
    start = start.replace(second=0, microsecond=0)
    rows = session.execute(
        select_rows(
            col(Run.run_id),
            col(Run.job),
            col(Run.table_id),
            col(WriteRollup.code),
            func.sum(WriteRollup.requests),
        )
        .select_from(WriteRollup)
        .join(Run, col(Run.run_id) == col(WriteRollup.run_id))
        .where(col(WriteRollup.minute) >= start, *_in_scope(rule))
        .group_by(col(Run.run_id), col(Run.job), col(Run.table_id), col(WriteRollup.code))
    )
    counts: dict[tuple[str, str | None, str], dict[str, int]] = defaultdict(dict)
    for run_id, job, table, code, requests in rows:
        counts[(run_id, job, table)][code] = int(requests)
    return counts


def _out_of_range(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    threshold = float(rule.params.get("threshold") or 0)
    minutes = _window(rule) // 60
    found = []
    for (run_id, job, table), codes in _requests_by_run(session, rule, now).items():
        gaps = codes.get("OUT_OF_RANGE", 0)
        if gaps > threshold:
            found.append(
                Observation(
                    run_id,
                    job,
                    table,
                    gaps,
                    (
                        f"{gaps} append request(s) answered OUT_OF_RANGE in the last {minutes} min "
                        f"on {_run_name(run_id, job, table)}: a gap in the client's offsets"
                    ),
                )
            )
    return found


def _rate(
    session: Session, rule: AlertRule, now: datetime, counted: frozenset[str] | None, what: str
) -> list[Observation]:
    threshold = float(rule.params["threshold"])
    per = rule.params.get("per", "minute")
    minutes = _window(rule) // 60
    found = []
    for (run_id, job, table), codes in _requests_by_run(session, rule, now).items():
        total = sum(codes.values())
        if counted is None:  # error_rate's default: every code but the three named
            hits = sum(n for code, n in codes.items() if code not in NOT_ERRORS)
        else:
            hits = sum(codes.get(code, 0) for code in counted)
        value = hits / total if per == "share" else hits / minutes
        if hits and value > threshold:
            rate = f"{value:.1%} of requests" if per == "share" else f"{value:.2f} per minute"
            found.append(
                Observation(
                    run_id,
                    job,
                    table,
                    value,
                    (
                        f"{what} at {rate} over the last {minutes} min ({hits} of {total} append "
                        f"requests) on {_run_name(run_id, job, table)}; threshold {threshold:g}"
                    ),
                )
            )
    return found


def _already_exists_rate(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    return _rate(
        session,
        rule,
        now,
        frozenset({"ALREADY_EXISTS"}),
        "ALREADY_EXISTS (retries deduplicated)",
    )


def _error_rate(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    codes = rule.params.get("codes")
    named = frozenset(codes) if codes else None
    what = f"Errors ({', '.join(sorted(named))})" if named else "Errors (other than OK, "
    if named is None:
        what += "ALREADY_EXISTS and OUT_OF_RANGE)"
    return _rate(session, rule, now, named, what)


# -- runs -----------------------------------------------------------------------------


def _run_failed(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    runs = session.exec(select(Run).where(Run.status == "failed", *_in_scope(rule)))
    return [
        Observation(
            run.run_id,
            run.job,
            run.table_id,
            1,
            (
                f"{_run_name(run.run_id, run.job, run.table_id)} failed"
                f"{': ' + run.error.splitlines()[0][:300] if run.error else ''}; "
                f"{run.rows_committed} rows committed. Resume it from its checkpoint."
            ),
        )
        for run in runs
    ]


def _run_stalled(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    condition: ColumnElement[bool] = col(Run.status) == "stalled"
    silent_s = rule.params.get("silent_s")
    if silent_s:
        heard = func.coalesce(Run.last_event_at, Run.started_at)
        condition = or_(
            condition,
            and_(
                col(Run.status).in_(["running", "resuming"]),
                heard < now - timedelta(seconds=float(silent_s)),
            ),
        )
    found = []
    for run in session.exec(select(Run).where(condition, *_in_scope(rule))):
        last = run.last_event_at or run.started_at
        silent = (now - last).total_seconds()
        found.append(
            Observation(
                run.run_id,
                run.job,
                run.table_id,
                silent,
                (
                    f"{_run_name(run.run_id, run.job, run.table_id)} is {run.status}: "
                    f"nothing heard for {silent:.0f} s "
                    f"(last at {last.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"
                ),
            )
        )
    return found


def _orphan_streams(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    older_than = float(rule.params.get("older_than_s") or DEFAULT_ORPHAN_AGE_S)
    conditions = [
        Stream.stream_type == "PENDING",
        Stream.state != "committed",
        col(Stream.updated_at) < now - timedelta(seconds=older_than),
        *_in_scope(rule),
    ]
    if not rule.params.get("include_succeeded"):
        conditions.append(Run.status != "succeeded")
    rows = session.execute(
        select_rows(
            col(Run.run_id), col(Run.job), col(Run.table_id), func.count(), func.sum(Stream.rows)
        )
        .select_from(Stream)
        .join(Run, col(Run.run_id) == col(Stream.run_id))
        .where(*conditions)
        .group_by(col(Run.run_id), col(Run.job), col(Run.table_id))
    )
    return [
        Observation(
            run_id,
            job,
            table,
            int(count),
            (
                f"{count} PENDING stream(s) of {_run_name(run_id, job, table)} uncommitted for "
                f"over {older_than:.0f} s, holding {int(rows or 0)} rows nobody can see"
            ),
        )
        for run_id, job, table, count, rows in rows
    ]


# -- dead letters ----------------------------------------------------------------------


def _rows_dead_lettered(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    """Rows set aside by the batches each run committed in the window (by the batch's
    first commit, each batch once, as the run's ``rows_dead_lettered`` counts them)."""
    threshold = float(rule.params.get("threshold") or 0)
    minutes = _window(rule) // 60
    start = (now - timedelta(seconds=_window(rule))).replace(second=0, microsecond=0)
    rows = session.execute(
        select_rows(
            col(Run.run_id), col(Run.job), col(Run.table_id), col(Run.dead_letter_table),
            func.sum(Batch.dead_lettered_rows), func.count(),
        )
        .select_from(Batch)
        .join(Run, col(Run.run_id) == col(Batch.run_id))
        .where(
            col(Batch.state) == "committed", col(Batch.dead_lettered_rows) > 0,
            col(Batch.committed_at) >= start, *_in_scope(rule),
        )
        .group_by(col(Run.run_id), col(Run.job), col(Run.table_id), col(Run.dead_letter_table))
    )  # fmt: skip
    found = []
    for run_id, job, table, dead_letter_table, summed, batches in rows:
        set_aside = int(summed or 0)
        if set_aside <= threshold:
            continue
        where = f" in {dead_letter_table}" if dead_letter_table else ""
        found.append(
            Observation(
                run_id,
                job,
                table,
                set_aside,
                (
                    f"{set_aside} row(s) BigQuery refused were set aside{where} by {batches} "
                    f"batch(es) of {_run_name(run_id, job, table)} committed in the last "
                    f"{minutes} min; the rest of each batch was loaded. Fix the rows and load "
                    "them again (their reasons are on the run's page)"
                ),
            )
        )
    return found


# -- reconciliation --------------------------------------------------------------------


def _reconciliation(session: Session, rule: AlertRule, now: datetime) -> list[Observation]:
    """The latest check of each run, and of each table, judged."""
    latest_of_runs = (
        select(func.max(Reconciliation.id))
        .where(Reconciliation.scope == "run")
        .group_by(col(Reconciliation.run_id))
    )
    latest_of_tables = (
        select(func.max(Reconciliation.id))
        .where(Reconciliation.scope == "table")
        .group_by(col(Reconciliation.table_id))
    )
    query = (
        select(Reconciliation, Run.job)
        .outerjoin(Run, col(Run.run_id) == col(Reconciliation.run_id))
        .where(
            or_(
                col(Reconciliation.id).in_(latest_of_runs),
                col(Reconciliation.id).in_(latest_of_tables),
            ),
            Reconciliation.status == "mismatch",
        )
    )
    if rule.scope == "job":
        query = query.where(Run.job == rule.scope_value)
    elif rule.scope == "table":
        query = query.where(Reconciliation.table_id == rule.scope_value)
    found = []
    for check, job in session.exec(query):
        duplicates = check.duplicate_key_count or 0
        if rule.params.get("duplicates_only") and not duplicates:
            continue
        what = (
            _run_name(check.run_id, job, check.table_id)
            if check.run_id
            else f"table {check.table_id}"
        )
        dead_letters = (
            ""
            if check.rows_in_dead_letter_table is None
            else (
                f"; {check.rows_set_aside} rows set aside, {check.rows_in_dead_letter_table} "
                f"in the dead-letter table {check.dead_letter_table}"
            )
        )
        found.append(
            Observation(
                check.run_id,
                job,
                check.table_id,
                duplicates,
                (
                    f"Reconciliation of {what} is a mismatch: expected {check.expected_rows} rows, "
                    f"BigQuery holds {check.actual_rows} ({check.distinct_keys} distinct keys, "
                    f"{duplicates} duplicated, {check.missing_rows} missing){dead_letters}"
                ),
            )
        )
    return found


_OBSERVERS = {
    "out_of_range": _out_of_range,
    "already_exists_rate": _already_exists_rate,
    "error_rate": _error_rate,
    "run_failed": _run_failed,
    "run_stalled": _run_stalled,
    "orphan_streams": _orphan_streams,
    "reconciliation": _reconciliation,
    "rows_dead_lettered": _rows_dead_lettered,
}
