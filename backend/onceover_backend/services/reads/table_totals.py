"""Per-table totals over every run the control plane has heard of, for the Tables view."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from sqlalchemy import select as select_rows
from sqlmodel import Session, col, func, select

from onceover_backend.models import TablePublic, TablesPublic
from onceover_backend.services.paging import MAX_OFFSET
from onceover_backend.services.reads.overview import Window, table_figures
from onceover_backend.tables import Run


def list_tables(
    session: Session,
    *,
    stale_after: timedelta,
    table: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> TablesPublic:
    """Tables, the most recently loaded first (only ``table`` when given), each with its
    totals over every run and the overview's figures of it (freshness, rows today, the
    24 hours' retry codes, its newest check of any scope) from :func:`table_figures`."""
    last_started = func.max(Run.started_at)
    only = [col(Run.table_id) == table] if table is not None else []
    totals = session.execute(  # ten columns: more than sqlmodel's select is typed for
        select_rows(
            col(Run.table_id),
            func.count(),
            func.sum(Run.rows_committed),
            func.sum(Run.batches_committed),
            func.sum(Run.rows_dead_lettered),
            func.sum(Run.rejected_requests),
            func.sum(Run.already_exists_requests),
            func.sum(Run.out_of_range_requests),
            func.min(Run.started_at),
            last_started,
        )
        .where(*only)
        .group_by(col(Run.table_id))
        .order_by(last_started.desc(), col(Run.table_id))
        .offset(min(offset, MAX_OFFSET))
        .limit(limit)
    ).all()
    count = session.exec(select(func.count(func.distinct(Run.table_id))).where(*only)).one()
    tables = [row[0] for row in totals]
    by_status = runs_by_status(session, tables)
    keys = _latest_keys(session, tables)
    figures = {
        row.table: row
        for row in table_figures(
            session, stale_after=stale_after, window=Window.at(), only=tables
        ).tables
    }
    return TablesPublic(
        data=[
            TablePublic(
                table=table_id,
                runs=int(runs),
                runs_by_status=by_status[table_id],
                rows_committed=int(rows or 0),
                batches_committed=int(batches or 0),
                already_exists=int(already_exists or 0),
                out_of_range=int(out_of_range or 0),
                rows_dead_lettered=int(dead_lettered or 0),
                rejected_requests=int(rejected or 0),
                first_started_at=first,
                last_started_at=last,
                key_column=keys.get(table_id),
                figures=figures[table_id],
            )
            for (
                table_id,
                runs,
                rows,
                batches,
                dead_lettered,
                rejected,
                already_exists,
                out_of_range,
                first,
                last,
            ) in totals
        ],
        count=int(count),
    )


def runs_by_status(session: Session, tables: list[str] | None = None) -> dict[str, dict[str, int]]:
    """Runs by table and status (1 query): of ``tables``, or of every table."""
    only = [col(Run.table_id).in_(tables)] if tables is not None else []
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for table, status, runs in session.exec(
        select(Run.table_id, Run.status, func.count())
        .where(*only)
        .group_by(col(Run.table_id), col(Run.status))
    ):
        counts[table][status] = int(runs)
    return counts


def _latest_keys(session: Session, tables: list[str]) -> dict[str, str]:
    """The key column the newest run naming one used (what a table check would use)."""
    keys: dict[str, str] = {}
    for table, key in session.exec(
        select(Run.table_id, Run.key_column)
        .where(col(Run.table_id).in_(tables), col(Run.key_column).is_not(None))
        .order_by(col(Run.started_at).desc())
    ):
        keys.setdefault(table, str(key))
    return keys
