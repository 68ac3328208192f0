"""Re-driving a run's set-aside rows: plan it, launch the job, record how it ended.

Top to bottom, a re-drive of run ``R``:

1. refuses an unknown run (404); a run the control plane cannot re-drive (422: no ledger
   it can name, a re-drive's own run, a dead-letter table it cannot pass on:
   :mod:`.rules`); a run that set nothing aside, or whose set-aside rows were all
   re-driven by the events so far (409);
2. plans the command: ``onceover_jobs.redrive R --dead-letter=T --ledger=L
   --monitor-url=U [--key=K]`` through the launcher (the module allowlist, ``python -P``
   or spark-submit, the backend's work directory, its BigQuery settings and ingest token
   in the environment, never in the arguments);
3. launches only on the operator's confirmation of that exact command, by the plan's
   digest (409 without it, or when the plan changed since), with no live re-drive of the
   run: in one write transaction a live ``RedriveLaunch`` row, which a partial unique
   index keeps to one per run across replicas (409 for the other);
4. starts the process, its output in one log per launch; its events arrive as the run
   ``R:redrive-<n>`` the job chose, and when it exits the launch is marked ended.

Which rows go, and that each goes once however often this runs, is the job's: it reads
the dead-letter table and the ledger itself (:mod:`onceover_jobs.redrive`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from onceover.events import JobSpec
from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.errors import NotFoundError, NotRedrivableError, RedriveConflictError
from onceover_backend.models import RedriveAcceptedPublic, RedrivePlanPublic
from onceover_backend.services.launch.launcher import HOST, Launcher, pid_alive
from onceover_backend.services.reads.redrives import redrive_runs
from onceover_backend.services.redrive import rules
from onceover_backend.tables import Batch, RedriveLaunch, Run, utcnow

logger = logging.getLogger(__name__)

LOG_KIND = "redrive"
STARTING_GRACE = timedelta(minutes=1)
"""A live launch with no pid yet is being started, unless it has been this long."""
ENDED_ELSEWHERE_AFTER = timedelta(minutes=2)
"""A live launch on another host is over once a re-drive run of the run reported its
end this long ago, after the launch (that replica stopped before it saw the exit)."""
TERMINAL = frozenset({"succeeded", "failed"})


def _run(session: Session, run_id: str, *, lock: bool = False) -> Run:
    query = select(Run).where(Run.run_id == run_id)
    run = session.exec(query.with_for_update() if lock else query).first()
    if run is None:
        raise NotFoundError(f"no run {run_id!r}")
    return run


def _key(launch: RedriveLaunch) -> str:
    """The launcher's name for the process (its running() lists it)."""
    return f"redrive {launch.run_id} {launch.number}"


def dead_letter_tables(session: Session, run_id: str, redrives: list[str]) -> list[str]:
    """The dead-letter tables the committed batches of the run and its re-drives set
    rows aside in (a re-drive sets the rows refused again aside where it read them)."""
    named = session.exec(
        select(Batch.dead_letter_table)
        .where(
            col(Batch.run_id).in_([run_id, *redrives]),
            Batch.state == "committed",
            col(Batch.dead_lettered_rows) > 0,
            col(Batch.dead_letter_table).is_not(None),
        )
        .distinct()
    )
    return sorted(t for t in named if t)


@dataclass
class Redriver:
    engine: Engine
    settings: Settings
    launcher: Launcher
    on_change: Callable[[], None] = lambda: None

    # -- the plan ---------------------------------------------------------------------

    def plan(self, run_id: str) -> RedrivePlanPublic:
        """What a re-drive of ``run_id`` would launch now (changes nothing)."""
        with Session(self.engine) as session:
            run = _run(session, run_id)
            plan, _ = self._plan(session, run)
            live = self._live(session, run, release_stale=False)
        if live is not None:
            plan.warnings.append(f"a launch now would be refused: {self._busy(live)}")
        return plan

    def _plan(self, session: Session, run: Run) -> tuple[RedrivePlanPublic, list[str]]:
        """The plan and the real command (the plan shows it redacted)."""
        ledger = rules.ledger_of_run(run)
        runs = redrive_runs(session, run.run_id)
        landed = sum(r.rows_landed for r in runs)
        if run.rows_dead_lettered == 0:
            raise RedriveConflictError(
                f"run {run.run_id!r} set no rows aside: there is nothing to re-drive"
            )
        still = run.rows_dead_lettered - landed
        if still <= 0:
            raise RedriveConflictError(
                f"all {run.rows_dead_lettered:,} rows run {run.run_id!r} set aside have been "
                "re-driven and landed: there is nothing left to send"
            )
        tables = dead_letter_tables(session, run.run_id, [r.run_id for r in runs])
        if len(tables) != 1:
            raise NotRedrivableError(
                f"run {run.run_id!r}'s batches set rows aside in {len(tables)} dead-letter "
                f"tables ({', '.join(tables) or 'none named'}): the control plane re-drives "
                "a run whose rows are in one"
            )
        url, _token = self.launcher.monitor()  # 503 when this backend cannot launch
        args = rules.arguments(run.run_id, tables[0], ledger, run.key_column, url)
        argv = self.launcher.command(JobSpec(module=rules.MODULE, args=args))
        number = self._next_number(session, run.run_id)
        warnings = []
        if any(r.status not in TERMINAL for r in runs):
            warnings.append(
                "an earlier re-drive has not reported its end: the job finishes it first "
                "(with its own rows), then the next launch sends the rest"
            )
        plan = RedrivePlanPublic(
            run_id=run.run_id,
            dead_letter_tables=tables,
            dead_letter_table=tables[0],
            rows_set_aside=run.rows_dead_lettered,
            rows_redriven=landed,
            rows_to_send=still,
            ledger=ledger,
            key=run.key_column,
            module=rules.MODULE,
            command=self.launcher.shown(argv),
            cwd=str(self.launcher.work_dir(run.run_id)),
            log_path=str(self.launcher.log_path(run.run_id, number, LOG_KIND)),
            launch=number,
            digest=rules.digest(argv),
            warnings=warnings,
        )
        return plan, argv

    @staticmethod
    def _next_number(session: Session, run_id: str) -> int:
        highest = session.exec(
            select(func.max(RedriveLaunch.number)).where(RedriveLaunch.run_id == run_id)
        ).one()
        return int(highest or 0) + 1

    # -- one at a time ----------------------------------------------------------------

    def _live(self, session: Session, run: Run, *, release_stale: bool) -> RedriveLaunch | None:
        launch = session.exec(
            select(RedriveLaunch).where(RedriveLaunch.run_id == run.run_id, col(RedriveLaunch.live))
        ).first()
        if launch is None or not self._is_stale(session, launch):
            return launch
        if release_stale:
            logger.warning(
                "run %s: re-drive launch %d (pid %s on %s) is gone without its exit being "
                "seen; releasing it", run.run_id, launch.number, launch.pid, launch.host,
            )  # fmt: skip
            launch.live = False
            launch.ended_at = utcnow()
            session.add(launch)
            session.flush()
        return None

    def _is_stale(self, session: Session, launch: RedriveLaunch) -> bool:
        if launch.host == HOST:
            if _key(launch) in self.launcher.running():
                return False
            if launch.pid is None:  # committed, and its process is being started
                return utcnow() - launch.requested_at > STARTING_GRACE
            return not pid_alive(launch.pid)
        ended = [
            r.finished_at
            for r in redrive_runs(session, launch.run_id)
            if r.status in TERMINAL and r.finished_at is not None
            and r.started_at >= launch.requested_at
        ]  # fmt: skip
        return any(utcnow() - when > ENDED_ELSEWHERE_AFTER for when in ended)

    @staticmethod
    def _busy(live: RedriveLaunch) -> str:
        return (
            f"re-drive launch {live.number} of run {live.run_id!r} (pid {live.pid} on "
            f"{live.host}, by {live.actor} at {live.requested_at.isoformat()}) has not "
            "exited; one re-drive at a time"
        )

    # -- the launch -------------------------------------------------------------------

    def redrive(
        self, run_id: str, *, actor: str, approve_plan: str | None
    ) -> RedriveAcceptedPublic:
        """Launch a re-drive of ``run_id``; ``approve_plan``: the digest of the plan the
        caller saw (the command comes partly from the run's events: an operator's
        confirmation of it is what the launch rests on)."""
        with Session(self.engine) as session:
            plan, argv = self._plan(session, _run(session, run_id))
        if approve_plan is None:
            raise RedriveConflictError(
                f"run {run_id!r}: a re-drive launches on the confirmation of its plan: ask "
                "with dry_run=true, then launch with approve_plan set to the plan's digest"
            )
        if approve_plan != plan.digest:
            raise RedriveConflictError(
                f"run {run_id!r}: the plan you confirmed ({approve_plan[:12]}) is not the one "
                f"a re-drive would launch now ({plan.digest[:12]}); look at the plan again"
            )
        now = utcnow()
        try:
            with write_transaction(self.engine) as session:
                run = _run(session, run_id, lock=True)
                if (live := self._live(session, run, release_stale=True)) is not None:
                    raise RedriveConflictError(self._busy(live))
                number = self._next_number(session, run_id)
                log_path = self.launcher.log_path(run_id, number, LOG_KIND)
                plan = plan.model_copy(update={"launch": number, "log_path": str(log_path)})
                launch = RedriveLaunch(
                    run_id=run_id, number=number, actor=actor, requested_at=now,
                    plan_digest=plan.digest, dead_letter_table=plan.dead_letter_table,
                    ledger=plan.ledger, command=plan.command, log_path=str(log_path), host=HOST,
                )  # fmt: skip
                session.add(launch)
                run.updated_at = now  # the run page shows its launches
                session.add(run)
                session.flush()
                launch_id = launch.id
                key = _key(launch)
        except IntegrityError:
            raise RedriveConflictError(
                f"run {run_id!r} was re-driven by another request at the same moment; one "
                "re-drive at a time"
            ) from None
        assert launch_id is not None
        header = (
            f"# onceover: re-drive launch {number} of run {run_id}, by {actor} at "
            f"{now.isoformat()} on {HOST} (plan {plan.digest[:12]} confirmed): "
            + " ".join(plan.command)
        )
        try:
            pid = self.launcher.start(
                key=key, argv=argv, cwd=self.launcher.work_dir(run_id),
                attempt_id=uuid.uuid4().hex, log_path=log_path, header=header,
                on_exit=lambda status: self.record_exit(launch_id, status),
            )  # fmt: skip
        except Exception:
            self.record_exit(launch_id, None)
            raise
        with write_transaction(self.engine) as session:
            stored = session.get(RedriveLaunch, launch_id)
            if stored is not None and stored.live:
                stored.pid = pid
                session.add(stored)
        logger.info(
            "run %s: re-drive launch %d started (pid %d): %s", run_id, number, pid, plan.command
        )
        self.on_change()
        return RedriveAcceptedPublic(
            run_id=run_id, launch=number, status="launched", requested_at=now, actor=actor,
            pid=pid, log_path=str(log_path), plan=plan,
        )  # fmt: skip

    def record_exit(self, launch_id: int, status: int | None) -> None:
        """The launched process ended with ``status`` (None: it never started)."""
        with write_transaction(self.engine) as session:
            launch = session.get(RedriveLaunch, launch_id)
            if launch is None:
                return
            launch.live = False
            launch.exit_code = status
            launch.ended_at = utcnow()
            session.add(launch)
            run = session.get(Run, launch.run_id)
            if run is not None:
                run.updated_at = launch.ended_at
                session.add(run)
        logger.info("re-drive launch %d ended with status %s", launch_id, status)
        self.on_change()
