"""Write-request rates from the per-minute rollups: OK, ALREADY_EXISTS, OUT_OF_RANGE, ..."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Integer, cast
from sqlmodel import Session, col, func, select

from onceover_backend.errors import InvalidParameterError
from onceover_backend.models import WriteErrorsPublic, WriteErrorsStep
from onceover_backend.tables import WriteRollup

MINUTE = 60
MAX_STEPS = 10_000
AUTO_STEPS = (60, 300, 900, 3600, 6 * 3600, 86_400)
"""The steps taken when none is asked for: a minute, 5 and 15 minutes, an hour, 6, a day."""
AUTO_MAX_STEPS = 1_440
"""At most this many steps when the step is taken: a day in minutes, a chart's width."""
DEFAULT_WINDOW = timedelta(hours=24)
# Present in every answer (0 when absent), so a chart has the same series every time.
ALWAYS_SHOWN = ("OK", "ALREADY_EXISTS", "OUT_OF_RANGE")


def parse_step(text: str) -> int:
    """``"60"``, ``"60s"``, ``"5m"``, ``"1h"``, ``"1d"`` -> seconds (whole minutes, >= 1m)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    raw = text.strip().lower()
    number, unit = (raw[:-1], raw[-1]) if raw and raw[-1] in units else (raw, "s")
    if not number.isdigit():
        raise InvalidParameterError("step", "a duration like 60s, 5m, 1h or 1d", text)
    seconds = int(number) * units[unit]
    if seconds < MINUTE or seconds % MINUTE:
        raise InvalidParameterError(
            "step", "whole minutes, at least 1m (rollups are per minute)", text
        )
    return seconds


def _default_since(until: datetime) -> datetime:
    # Times near year 1 had no day before them: OverflowError, a 500 (found by
    # tests/backend/test_schemathesis.py).
    try:
        return until - DEFAULT_WINDOW
    except OverflowError:
        raise InvalidParameterError("until", "too early: give since", until.isoformat()) from None


def _range(
    session: Session, run_id: str | None, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """The range asked for, with its defaults filled in: for a run, from its first minute
    with appends, and with no ``since`` given to the end of its last (a run's chart
    spans the run, however long ago it ran); else, or for a run with none, the 24 hours
    before now. A ``since`` given alone runs to now, as it always did."""
    first = last = None
    if run_id is not None and since is None:
        minute = col(WriteRollup.minute)
        first, last = session.exec(
            select(func.min(minute), func.max(minute)).where(WriteRollup.run_id == run_id)
        ).one()
    if until is None:
        until = last + timedelta(seconds=MINUTE) if last is not None else datetime.now(UTC)
    if since is None:
        since = first if first is not None else _default_since(until)
    return since, until


def _fitting_step(since: datetime, until: datetime) -> int:
    """The smallest of :data:`AUTO_STEPS` that puts ``since`` to ``until`` in at most
    :data:`AUTO_MAX_STEPS` steps (the largest if none does)."""
    seconds = (until - since).total_seconds()
    for step_s in AUTO_STEPS:
        if seconds // step_s + 1 <= AUTO_MAX_STEPS:
            return step_s
    return AUTO_STEPS[-1]


def _step_of(session: Session, origin: datetime, step_s: int) -> Any:
    """The step a rollup's minute falls in (0 for ``origin``'s), counted in SQL: the
    answer then holds a row per step and code, not per minute and code, each made a
    time here (a table's day in 5-minute steps: 864 rows where it read 4,069,
    docs/journal/profiling.md). Whole seconds since the epoch, divided as integers; no minute
    read is before ``origin``, so the division floors."""
    minute = col(WriteRollup.minute)
    if session.get_bind().dialect.name == "postgresql":
        seconds = cast(func.extract("epoch", minute), BigInteger)
    else:  # SQLite keeps UTC text
        seconds = cast(func.strftime("%s", minute), Integer)
    return (seconds - int(origin.timestamp())) // step_s


def write_errors(
    session: Session,
    *,
    run_id: str | None,
    table: str | None,
    since: datetime | None,
    until: datetime | None,
    step_s: int | None,
) -> WriteErrorsPublic:
    """Append requests by response code per step. Without ``since``, from the run's first
    minute with appends (for a table, 24 hours before ``until``); without either, to the
    end of the run's last minute with appends (else to now). Without
    ``step_s``, the smallest of :data:`AUTO_STEPS` that fits the range in
    :data:`AUTO_MAX_STEPS` steps."""
    if run_id is None and table is None:
        raise InvalidParameterError("run_id", "give run_id or table (or both)")
    scope = []
    if run_id is not None:
        scope.append(WriteRollup.run_id == run_id)
    if table is not None:
        scope.append(WriteRollup.table_id == table)

    since, until = _range(session, run_id, since, until)
    if since.tzinfo is None or until.tzinfo is None:
        raise InvalidParameterError("since", "give a time zone (e.g. 2026-01-01T00:00:00Z)")
    since = since.astimezone(UTC)
    until = until.astimezone(UTC)
    if since >= until:
        raise InvalidParameterError("since", "must be before until", since.isoformat())
    if step_s is None:
        step_s = _fitting_step(since, until)
    try:
        origin = datetime.fromtimestamp(since.timestamp() // step_s * step_s, UTC)
    except (OverflowError, ValueError):  # the step holding `since` starts before year 1
        raise InvalidParameterError("since", "too early for this step", since.isoformat()) from None
    steps = int((until - origin).total_seconds() // step_s) + 1
    if steps > MAX_STEPS:
        raise InvalidParameterError("step", f"the range holds {steps} steps; at most {MAX_STEPS}")

    step = _step_of(session, origin, step_s)
    rows = session.exec(
        select(step, WriteRollup.code, func.sum(WriteRollup.requests), func.sum(WriteRollup.rows))
        .where(*scope, col(WriteRollup.minute) >= origin, col(WriteRollup.minute) < until)
        .group_by(step, col(WriteRollup.code))
    )
    per_step: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows_ok: dict[int, int] = defaultdict(int)
    totals: dict[str, int] = dict.fromkeys(ALWAYS_SHOWN, 0)
    row_totals: dict[str, int] = dict.fromkeys(ALWAYS_SHOWN, 0)
    for index, code, requests, row_count in rows:
        per_step[index][code] += int(requests)
        if code == "OK":
            rows_ok[index] += int(row_count)
        totals[code] = totals.get(code, 0) + int(requests)
        row_totals[code] = row_totals.get(code, 0) + int(row_count)
    requests_total = sum(totals.values())
    series = [
        WriteErrorsStep(
            start=origin + timedelta(seconds=index * step_s),
            requests=sum(per_step[index].values()) if index in per_step else 0,
            rows_ok=rows_ok.get(index, 0),
            counts={code: per_step[index].get(code, 0) for code in totals}
            if index in per_step
            else dict.fromkeys(totals, 0),
        )
        for index in range(steps)
    ]
    return WriteErrorsPublic(
        run_id=run_id,
        table=table,
        since=since,
        until=until,
        step_s=step_s,
        series=series,
        totals=totals,
        requests=requests_total,
        rows=row_totals,
        rates={code: (n / requests_total if requests_total else 0.0) for code, n in totals.items()},
    )
