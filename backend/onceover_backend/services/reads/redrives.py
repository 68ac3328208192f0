"""A run's set-aside rows, accounted for by its re-drives' own events.

Each set-aside row either landed, once, by a re-drive (a committed row of a run
``<run>:redrive-<n>``) or is still set aside (under the run's id, or refused again under
a re-drive's): so still set aside = set aside - landed by re-drives.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from onceover.redrives import redrive_number, redrive_prefix
from onceover_backend.models import RedriveLaunchPublic, RedriveRunPublic, RunRedrivesPublic
from onceover_backend.services.redrive import rules
from onceover_backend.tables import RedriveLaunch, Run

SHOWN_LAUNCHES = 5


def redrive_runs(session: Session, run_id: str) -> list[RedriveRunPublic]:
    """The re-drive runs of ``run_id``, by number."""
    found = session.exec(
        select(Run).where(col(Run.run_id).startswith(redrive_prefix(run_id), autoescape=True))
    )
    runs = []
    for run in found:
        number = redrive_number(run_id, run.run_id)
        if number is None:  # e.g. <run>:redrive-1:redrive-1, not one of this run's
            continue
        runs.append(
            RedriveRunPublic(
                run_id=run.run_id,
                number=number,
                status=run.status,
                rows_landed=run.rows_committed,
                rows_set_aside_again=run.rows_dead_lettered,
                started_at=run.started_at,
                finished_at=run.finished_at,
            )
        )
    return sorted(runs, key=lambda r: r.number)


def rows_redriven(session: Session, run_id: str) -> int:
    return sum(r.rows_landed for r in redrive_runs(session, run_id))


def redrives_of(session: Session, run: Run) -> RunRedrivesPublic:
    runs = redrive_runs(session, run.run_id)
    landed = sum(r.rows_landed for r in runs)
    launches = session.exec(
        select(RedriveLaunch)
        .where(RedriveLaunch.run_id == run.run_id)
        .order_by(col(RedriveLaunch.number).desc())
        .limit(SHOWN_LAUNCHES)
    )
    return RunRedrivesPublic(
        rows_set_aside=run.rows_dead_lettered,
        rows_redriven=landed,
        rows_still_set_aside=max(0, run.rows_dead_lettered - landed),
        runs=runs,
        launches=[RedriveLaunchPublic.model_validate(launch.model_dump()) for launch in launches],
        unavailable=rules.why_not(run),
    )
