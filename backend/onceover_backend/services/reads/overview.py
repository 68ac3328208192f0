"""The dashboard's home in one answer: runs that failed or stalled, alerts firing, and
every table's freshness, rows committed today, retry codes per hour over the last 24
hours, rows set aside and newest reconciliation.

It reads the stored state in a fixed number of queries, however many tables and runs
there are: each figure is aggregated in SQL over every table at once (grouped by
table), never by a query per table or per run.

"Today" is the UTC day. The 24 hours are 24 whole UTC hours, the last of which holds
``now``. A table is stale when its last commit is older than ``stale_after``
(``ONCEOVER_STALE_AFTER_S``): no alert rule kind watches freshness, so the threshold is
the control plane's setting, the same for every table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import case, func
from sqlalchemy import select as select_rows
from sqlmodel import Session, col, select

from onceover_backend.models import (
    AttentionRunPublic,
    FiringAlertPublic,
    OverviewHourPublic,
    OverviewPublic,
    OverviewTablePublic,
    OverviewTotalsPublic,
    OverviewVerdictPublic,
    RunCausePublic,
)
from onceover_backend.services.reads.run_cause import causes_of
from onceover_backend.services.webhooks.payloads import page_path
from onceover_backend.tables import (
    Alert,
    AlertRule,
    CommitHour,
    HourRollup,
    Reconciliation,
    Run,
)

HOURS = 24
MAX_RUNS = 20
MAX_ALERTS = 20
MAX_TABLES = 200
ATTENTION = ("failed", "stalled")


@dataclass
class _Codes:
    """Append requests of one hour: every code, and the two retry codes."""

    requests: int = 0
    already_exists: int = 0
    out_of_range: int = 0

    def add(self, code: str, requests: int) -> None:
        self.requests += requests
        if code == "ALREADY_EXISTS":
            self.already_exists += requests
        elif code == "OUT_OF_RANGE":
            self.out_of_range += requests


@dataclass
class _Hours:
    by_hour: dict[datetime, _Codes] = field(default_factory=lambda: defaultdict(_Codes))

    def public(self, starts: list[datetime]) -> list[OverviewHourPublic]:
        return [
            OverviewHourPublic(start=start, **vars(self.by_hour.get(start, _Codes())))
            for start in starts
        ]

    def total(self) -> _Codes:
        summed = _Codes()
        for codes in self.by_hour.values():
            summed.requests += codes.requests
            summed.already_exists += codes.already_exists
            summed.out_of_range += codes.out_of_range
        return summed


@dataclass(frozen=True)
class Window:
    """The overview's times: the UTC day and the 24 whole UTC hours holding ``now``."""

    now: datetime
    today: datetime
    since: datetime
    starts: list[datetime]

    @classmethod
    def at(cls, now: datetime | None = None) -> Window:
        now = (now or datetime.now(UTC)).astimezone(UTC)
        current_hour = now.replace(minute=0, second=0, microsecond=0)
        since = current_hour - timedelta(hours=HOURS - 1)
        return cls(
            now=now,
            today=now.replace(hour=0, minute=0, second=0, microsecond=0),
            since=since,
            starts=[since + timedelta(hours=h) for h in range(HOURS)],
        )


@dataclass(frozen=True)
class TableFigures:
    """Every table's row of the overview, with the 24 hours' codes summed across tables."""

    tables: list[OverviewTablePublic]
    everything: _Hours
    rows_committed_today: int
    rows_dead_lettered: int
    verdicts: dict[str, OverviewVerdictPublic]


def table_figures(
    session: Session,
    *,
    stale_after: timedelta,
    window: Window,
    only: list[str] | None = None,
) -> TableFigures:
    """Each table's freshness, rows today, codes of the 24 hours, rows set aside and newest
    reconciliation of any scope (4 queries), stale tables first: of every table, or of
    ``only``. The one definition of these figures: the overview and the Tables pages show
    them and ``GET /metrics`` exports them."""
    tables = _known_tables(session) if only is None else list(dict.fromkeys(only))
    commits = _commits_by_table(session, today=window.today, since=window.since, only=only)
    hours = _hours_by_table(session, window.since, only=only)
    verdicts = _newest_verdicts(session, only=only)

    rows: list[OverviewTablePublic] = []
    for table in tables:
        last_commit, rows_today, dead_lettered = commits.get(table, (None, 0, 0))
        table_hours = hours.get(table, _Hours())
        summed = table_hours.total()
        fresh = last_commit is not None and window.now - last_commit <= stale_after
        rows.append(
            OverviewTablePublic(
                table=table,
                last_commit_at=last_commit,
                freshness="fresh" if fresh else "stale",
                rows_committed_today=rows_today,
                requests=summed.requests,
                already_exists=summed.already_exists,
                out_of_range=summed.out_of_range,
                hours=table_hours.public(window.starts),
                rows_dead_lettered=dead_lettered,
                reconciliation=verdicts.get(table),
                link=page_path(None, table),
            )
        )
    # Stale first (what needs a look), then the most recently committed.
    rows.sort(
        key=lambda t: (
            t.freshness == "fresh",
            -(t.last_commit_at.timestamp() if t.last_commit_at else 0.0),
            t.table,
        )
    )
    everything = _Hours()
    for table_hours in hours.values():
        for start, codes in table_hours.by_hour.items():
            merged = everything.by_hour[start]
            merged.requests += codes.requests
            merged.already_exists += codes.already_exists
            merged.out_of_range += codes.out_of_range
    return TableFigures(
        tables=rows,
        everything=everything,
        rows_committed_today=sum(c[1] for c in commits.values()),
        rows_dead_lettered=sum(c[2] for c in commits.values()),
        verdicts=verdicts,
    )


def overview(
    session: Session, *, stale_after: timedelta, now: datetime | None = None
) -> OverviewPublic:
    window = Window.at(now)
    runs, runs_count = _attention_runs(session)
    alerts, alerts_count = _firing_alerts(session)
    figures = table_figures(session, stale_after=stale_after, window=window)
    summed = figures.everything.total()
    newest = max(figures.verdicts.values(), key=lambda v: v.id, default=None)
    return OverviewPublic(
        generated_at=window.now,
        today_since=window.today,
        window_since=window.since,
        stale_after_s=stale_after.total_seconds(),
        runs=runs,
        runs_count=runs_count,
        alerts=alerts,
        alerts_count=alerts_count,
        tables=figures.tables[:MAX_TABLES],
        tables_count=len(figures.tables),
        totals=OverviewTotalsPublic(
            rows_committed_today=figures.rows_committed_today,
            requests=summed.requests,
            already_exists=summed.already_exists,
            out_of_range=summed.out_of_range,
            hours=figures.everything.public(window.starts),
            rows_dead_lettered=figures.rows_dead_lettered,
        ),
        reconciliation=newest,
    )


def _attention_runs(session: Session) -> tuple[list[AttentionRunPublic], int]:
    """Failed and stalled runs, the most recent first (5 queries): by when they ended,
    or (stalled) when they were last heard from; a failed one with its cause."""
    needing = col(Run.status).in_(ATTENTION)
    when = func.coalesce(Run.finished_at, Run.last_event_at, Run.started_at)
    runs = session.exec(
        select(Run).where(needing).order_by(when.desc(), col(Run.run_id)).limit(MAX_RUNS)
    ).all()
    count = session.exec(select(func.count()).select_from(Run).where(needing)).one()
    causes = causes_of(session, runs)
    return [_attention(run, causes.get(run.run_id)) for run in runs], int(count)


def _attention(run: Run, cause: RunCausePublic | None) -> AttentionRunPublic:
    if cause is not None:
        since = run.finished_at or run.updated_at
        reason = cause.headline
    else:
        since = run.last_event_at or run.started_at
        reason = f"nothing heard from it since {since.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    return AttentionRunPublic(
        run_id=run.run_id, job=run.job, table=run.table_id, status=run.status,
        since=since, reason=reason, cause=cause, link=page_path(run.run_id, None),
    )  # fmt: skip


def _firing_alerts(session: Session) -> tuple[list[FiringAlertPublic], int]:
    """Firing alerts with their rule's name and severity, newest first (2 queries)."""
    firing = col(Alert.state) == "firing"
    rows = session.exec(
        select(Alert, AlertRule.name, AlertRule.severity)
        .join(AlertRule, col(AlertRule.id) == col(Alert.rule_id))
        .where(firing)
        .order_by(col(Alert.started_at).desc(), col(Alert.id).desc())
        .limit(MAX_ALERTS)
    ).all()
    count = session.exec(select(func.count()).select_from(Alert).where(firing)).one()
    alerts = []
    for alert, rule, severity in rows:
        assert alert.id is not None
        alerts.append(
            FiringAlertPublic(
                id=alert.id, rule_id=alert.rule_id, rule=rule, severity=severity,
                run_id=alert.run_id, table=alert.table_id, summary=alert.summary,
                since=alert.started_at,
                link=f"/alerts?state=firing&rule={alert.rule_id}",
                subject_link=page_path(alert.run_id, alert.table_id),
            )
        )  # fmt: skip
    return alerts, int(count)


def _of(table_column: Any, only: list[str] | None) -> list[Any]:
    """The condition keeping ``only``'s tables (none: every table)."""
    return [] if only is None else [table_column.in_(only)]


def _known_tables(session: Session) -> list[str]:
    """Every table a run has loaded, as the Tables page lists them (1 query)."""
    return [str(t) for t in session.exec(select(Run.table_id).distinct())]


def _commits_by_table(
    session: Session, *, today: datetime, since: datetime, only: list[str] | None
) -> dict[str, tuple[datetime | None, int, int]]:
    """Per table: the last commit, rows committed today, rows set aside by batches
    committed since ``since`` (1 query), summed from the commits by the hour (both
    times are whole hours). A batch counts once, at its first commit
    (:mod:`onceover_backend.services.ingest.commit_hours`)."""
    hour = col(CommitHour.hour)
    rows = session.execute(
        select_rows(
            col(CommitHour.table_id),
            func.max(CommitHour.last_commit_at),
            func.sum(case((hour >= today, col(CommitHour.rows)), else_=0)),
            func.sum(case((hour >= since, col(CommitHour.dead_lettered_rows)), else_=0)),
        )
        .where(*_of(col(CommitHour.table_id), only))
        .group_by(col(CommitHour.table_id))
    )
    return {
        str(table): (last, int(today_rows or 0), int(dead or 0))
        for table, last, today_rows, dead in rows
    }


def _hours_by_table(
    session: Session, since: datetime, *, only: list[str] | None
) -> dict[str, _Hours]:
    """Append requests per table, UTC hour and response code since ``since``, summed
    in SQL from the hourly rollups (1 query). The per-minute ones held sixty times the
    rows to read, most of the overview's time with many events stored
    (docs/journal/profiling.md, "Ingest and reads at 10,000,000 stored")."""
    rows = session.execute(
        select_rows(col(HourRollup.table_id), col(HourRollup.hour), col(HourRollup.code),
                    func.sum(HourRollup.requests))
        .where(col(HourRollup.hour) >= since, *_of(col(HourRollup.table_id), only))
        .group_by(col(HourRollup.table_id), col(HourRollup.hour), col(HourRollup.code))
    )  # fmt: skip
    by_table: dict[str, _Hours] = defaultdict(_Hours)
    for table, hour, code, requests in rows:  # hour: aware, in UTC (UTCDateTime)
        by_table[str(table)].by_hour[hour].add(str(code), int(requests or 0))
    return by_table


def _newest_verdicts(
    session: Session, *, only: list[str] | None
) -> dict[str, OverviewVerdictPublic]:
    """The newest reconciliation touching each table: of a run into it or of it whole
    (1 query)."""
    newest = (
        select(Reconciliation.table_id, func.max(Reconciliation.id).label("id"))
        .where(*_of(col(Reconciliation.table_id), only))
        .group_by(col(Reconciliation.table_id))
        .subquery()
    )
    rows = session.execute(
        select_rows(
            col(Reconciliation.id),
            col(Reconciliation.scope),
            col(Reconciliation.run_id),
            col(Reconciliation.table_id),
            col(Reconciliation.status),
            col(Reconciliation.checked_at),
        ).join(newest, col(Reconciliation.id) == newest.c.id)
    )
    verdicts = {}
    for check_id, scope, run_id, table, status, checked_at in rows:
        verdicts[str(table)] = OverviewVerdictPublic.model_validate(
            {
                "id": check_id, "scope": scope, "run_id": run_id, "table": table,
                "status": status, "checked_at": checked_at,
                "link": page_path(run_id if scope == "run" else None, table),
            }
        )  # fmt: skip
    return verdicts
