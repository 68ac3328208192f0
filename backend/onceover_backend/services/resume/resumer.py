"""Resuming a failed or stalled run: plan it, launch one attempt, record how it ended.

Top to bottom, a resume:

1. refuses a run that is not ``failed`` or ``stalled``, or has a live launch (409);
2. reads the run's stored spec and its checkpoint where the spec says it is: the
   ledger's committed batches and pending intents, Spark's offset and commit logs
   (422 if the spec or checkpoint cannot be used; nothing is launched);
3. in one write transaction, with the run locked: checks 1 again, finds the operator's
   approval of the spec, given with this call or before (409 without one:
   :mod:`onceover_backend.services.launch.specs`), gives the attempt
   the next number, inserts it (``resuming``) and a live ``Launch`` row, and moves the
   run to ``resuming``. A partial unique index allows one live launch per run, so of
   two replicas racing, one commits and the other gets 409;
4. starts the job (:mod:`onceover_backend.services.launch.launcher`); its events move the attempt to
   ``running`` and then ``succeeded`` or ``failed`` like any run's (the projection),
   and a run that succeeds is reconciled automatically;
5. when the process exits, marks the launch ended; an attempt that exited without
   reporting its end is ``failed`` with its exit status and the way to its log.

An ``Idempotency-Key`` is stored with the launch: the same key again answers with the
stored 202 body, whatever has happened since.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import ValidationError
from sqlalchemy import Engine, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from onceover.events import JobSpec
from onceover.ledger_files import BatchRecord
from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.errors import NotFoundError, ResumeConflictError, UnresumableError
from onceover_backend.models import (
    AttemptLogPublic,
    PendingIntentPublic,
    ResumeAcceptedPublic,
    ResumePlanPublic,
    RunIntentsPublic,
    RunStatus,
)
from onceover_backend.services.ingest.projection import TERMINAL_ATTEMPT, Projector
from onceover_backend.services.launch import specs
from onceover_backend.services.launch.launcher import HOST, Launcher, log_header, pid_alive
from onceover_backend.services.resume.checkpoint import read_checkpoint
from onceover_backend.services.resume.intent_check import IntentChecker, IntentFinding
from onceover_backend.services.resume.swaps import pending_swap
from onceover_backend.tables import Attempt, Launch, Run, utcnow

logger = logging.getLogger(__name__)

RESUMABLE = frozenset({"failed", "stalled"})
ENDED_ELSEWHERE_AFTER = timedelta(minutes=2)
"""A live launch on another host whose attempt reported its end this long ago is over
(that replica stopped before it saw the process exit)."""
STARTING_GRACE = timedelta(minutes=1)
"""A live launch with no pid yet is being started, unless it has been this long."""
MAX_LOG_LINES = 10_000
_LOG_READ_LIMIT = 4 * 1024 * 1024


def _run(session: Session, run_id: str, *, lock: bool = False) -> Run:
    query = select(Run).where(Run.run_id == run_id)
    run = session.exec(query.with_for_update() if lock else query).first()
    if run is None:
        raise NotFoundError(f"no run {run_id!r}")
    return run


def _spec(run: Run) -> JobSpec:
    if run.spec is None:
        raise UnresumableError(
            f"run {run.run_id!r} has no launch spec: its job sent none in run_started, so "
            "the control plane does not know how to start it again"
        )
    try:
        return JobSpec.model_validate(run.spec)
    except ValidationError as exc:
        raise UnresumableError(f"run {run.run_id!r} has an unusable launch spec: {exc}") from exc


def _next_number(session: Session, run_id: str) -> int:
    highest = session.exec(select(func.max(Attempt.number)).where(Attempt.run_id == run_id)).one()
    return int(highest or 0) + 1


def _attempt_number(session: Session, run: Run) -> int | None:
    if run.current_attempt_id is None:
        return None
    attempt = session.exec(
        select(Attempt).where(
            Attempt.run_id == run.run_id, Attempt.attempt_id == run.current_attempt_id
        )
    ).first()
    return None if attempt is None else attempt.number


def log_url(run_id: str, number: int) -> str:
    return f"/api/runs/{run_id}/attempts/{number}/log"


@dataclass
class Resumer:
    engine: Engine
    settings: Settings
    launcher: Launcher
    intents: IntentChecker
    on_change: Callable[[], None] = lambda: None

    # -- 1. may it be resumed now? ----------------------------------------------------

    def _live_launch(self, session: Session, run: Run, *, release_stale: bool) -> Launch | None:
        launch = session.exec(
            select(Launch).where(Launch.run_id == run.run_id, col(Launch.live))
        ).first()
        if launch is None or not self._is_stale(session, launch):
            return launch
        if release_stale:
            logger.warning(
                "run %s: attempt %d (pid %s on %s) is gone without its exit being seen; "
                "releasing it",
                run.run_id,
                launch.attempt_number,
                launch.pid,
                launch.host,
            )
            launch.live = False
            launch.ended_at = utcnow()
            session.add(launch)
            session.flush()
        return None

    def _is_stale(self, session: Session, launch: Launch) -> bool:
        if launch.host == HOST:
            if launch.attempt_id in self.launcher.running():
                return False
            if launch.pid is None:  # committed, and its process is being started
                return utcnow() - launch.requested_at > STARTING_GRACE
            return not pid_alive(launch.pid)
        attempt = session.exec(
            select(Attempt).where(
                Attempt.run_id == launch.run_id, Attempt.attempt_id == launch.attempt_id
            )
        ).first()
        return (
            attempt is not None
            and attempt.status in TERMINAL_ATTEMPT
            and attempt.finished_at is not None
            and utcnow() - attempt.finished_at > ENDED_ELSEWHERE_AFTER
        )

    def _check_resumable(self, session: Session, run: Run, *, release_stale: bool) -> None:
        if run.status not in RESUMABLE:
            number = _attempt_number(session, run)
            which = f" (attempt {number})" if number is not None else ""
            raise ResumeConflictError(
                f"run {run.run_id!r} is {run.status}{which}; only failed or stalled runs "
                "can be resumed"
            )
        # Failed by its events, its process may still be stopping (or hung): wait for it.
        live = self._live_launch(session, run, release_stale=release_stale)
        if live is not None:
            raise ResumeConflictError(
                f"run {run.run_id!r} has a live attempt: attempt {live.attempt_number} "
                f"(pid {live.pid} on {live.host}, launched {live.requested_at.isoformat()}) "
                "has not exited; one attempt at a time"
            )

    # -- 2. the plan ------------------------------------------------------------------

    def plan(self, run_id: str) -> ResumePlanPublic:
        """What a resume of ``run_id`` would do now (reads the checkpoint; changes nothing)."""
        with Session(self.engine) as session:
            run = _run(session, run_id)
            number = _next_number(session, run_id)
            try:
                self._check_resumable(session, run, release_stale=False)
                refusal = None
            except ResumeConflictError as exc:
                refusal = f"a resume now would be refused: {exc.detail}"
        plan = self._plan(run, number)
        if refusal:
            plan.warnings.append(refusal)
        return plan

    def pending(self, run_id: str) -> RunIntentsPublic:
        """The run's intended, unconfirmed batches and what BigQuery holds of each: the
        plan's question, asked for anyone who may read the run (changes nothing)."""
        with Session(self.engine) as session:
            run = _run(session, run_id)
        try:
            state = read_checkpoint(_spec(run), run.run_id)
        except UnresumableError as exc:
            return RunIntentsPublic(run_id=run_id, pending_intents=[], unavailable=str(exc.detail))
        return RunIntentsPublic(
            run_id=run_id,
            pending_intents=[_pending(b, self.intents.check(b)) for b in state.intents],
            overwrites=[pending_swap(o) for o in state.overwrites],
            unavailable=None,
        )

    def _plan(self, run: Run, number: int) -> ResumePlanPublic:
        spec = _spec(run)
        command = self.launcher.shown(self.launcher.command(spec))
        state = read_checkpoint(spec, run.run_id)
        warnings = list(state.warnings)
        if spec.checkpoint is None:
            warnings.append("the spec names a ledger but no Spark checkpoint")
        spec_state = specs.state(run)  # unapproved: spec.approved_by is null
        if spec_state.proposed is not None:
            warnings.append(
                f"attempt {spec_state.proposed_by_attempt} reported a different spec "
                f"({spec_state.proposed_digest}); a resume launches the pinned one unless "
                "an operator approves the other (POST /api/runs/{run_id}/spec)"
            )
        if relative := self.launcher.relative_paths(spec):
            warnings.append(
                f"arguments {', '.join(map(repr, relative))} are relative to {spec.cwd}, "
                "where the job was started; launches run in a directory of the backend's "
                "own, so they will not be found there: start the job with absolute paths"
            )
        status: RunStatus = run.status  # type: ignore[assignment]
        return ResumePlanPublic(
            run_id=run.run_id,
            status=status,
            attempt=number,
            checkpoint=state.checkpoint,
            ledger=state.ledger,
            queries=state.queries,
            last_committed_batch=state.last_committed_batch,
            committed_batches=state.totals.batches,  # with those the ledger pruned
            committed_rows=state.totals.rows,
            pending_intents=[_pending(b, self.intents.check(b)) for b in state.intents],
            overwrites=[pending_swap(o) for o in state.overwrites],
            spark_last_planned_batch=state.spark_last_planned_batch,
            spark_last_finished_batch=state.spark_last_finished_batch,
            module=spec.module,
            command=command,
            cwd=str(self.launcher.work_dir(run.run_id)),
            spec=spec_state,
            log_path=str(self.launcher.log_path(run.run_id, number)),
            warnings=warnings,
        )

    # -- 3 and 4. launch --------------------------------------------------------------

    def _replay(
        self, session: Session, run_id: str, key: str | None
    ) -> ResumeAcceptedPublic | None:
        if key is None:
            return None
        launch = session.exec(select(Launch).where(Launch.idempotency_key == key)).first()
        if launch is None:
            return None
        if launch.run_id != run_id:
            raise ResumeConflictError(
                f"Idempotency-Key {key!r} was used to resume run {launch.run_id!r}; a key "
                "answers for one request only"
            )
        return ResumeAcceptedPublic.model_validate(launch.answer)

    def resume(
        self,
        run_id: str,
        *,
        actor: str,
        idempotency_key: str | None = None,
        trigger: Literal["api", "auto"] = "api",
        approve_spec: str | None = None,
    ) -> ResumeAcceptedPublic:
        """Launch the next attempt of ``run_id``; the answer the same key always gets.

        ``approve_spec``: the digest of the spec the caller saw in the plan, approved by
        this call; without it the spec must have been approved before."""
        with Session(self.engine) as session:
            if replayed := self._replay(session, run_id, idempotency_key):
                return replayed
            run = _run(session, run_id)
            self._check_resumable(session, run, release_stale=False)
            number = _next_number(session, run_id)
        plan = self._plan(run, number)  # file reads, outside any transaction
        argv = self.launcher.command(_spec(run))
        self.launcher.monitor()  # a backend that cannot launch says so before any change
        attempt_id = uuid.uuid4().hex
        now = utcnow()
        try:
            with write_transaction(self.engine) as session:
                run = _run(session, run_id, lock=True)
                if replayed := self._replay(session, run_id, idempotency_key):
                    return replayed
                self._check_resumable(session, run, release_stale=True)
                if run.spec is None or specs.spec_digest(run.spec) != plan.spec.digest:
                    raise ResumeConflictError(
                        f"run {run_id!r}: its spec changed while the resume was planned; "
                        "look at the plan again"
                    )
                approval = specs.approve_for_launch(run, approve_spec, actor, now)
                number = _next_number(session, run_id)
                log_path = self.launcher.log_path(run_id, number)
                plan = plan.model_copy(update={"attempt": number, "log_path": str(log_path)})
                answer = ResumeAcceptedPublic(
                    run_id=run_id,
                    attempt=number,
                    attempt_id=attempt_id,
                    status="resuming",
                    requested_at=now,
                    idempotency_key=idempotency_key,
                    approved_by=approval.by,
                    log_url=log_url(run_id, number),
                    plan=plan,
                )
                session.add(
                    Attempt(
                        run_id=run_id,
                        attempt_id=attempt_id,
                        number=number,
                        status="resuming",
                        started_at=now,
                        last_event_at=now,
                        spec=run.spec,
                    )
                )
                launch = Launch(
                    run_id=run_id,
                    attempt_id=attempt_id,
                    attempt_number=number,
                    idempotency_key=idempotency_key,
                    trigger=trigger,
                    actor=actor,
                    approved_by=approval.by,
                    spec_digest=approval.digest,
                    requested_at=now,
                    command=plan.command,
                    cwd=plan.cwd,
                    log_path=str(log_path),
                    host=HOST,
                    plan=plan.model_dump(mode="json"),
                    answer=answer.model_dump(mode="json"),
                )
                session.add(launch)
                run.status = "resuming"
                run.current_attempt_id = attempt_id
                run.finished_at = None
                run.error = None
                run.updated_at = now
                session.add(run)
                session.flush()
                launch_id = launch.id
        except IntegrityError:
            # Another replica's launch of this run (or with this key) committed first.
            with Session(self.engine) as session:
                if replayed := self._replay(session, run_id, idempotency_key):
                    return replayed
            raise ResumeConflictError(
                f"run {run_id!r} was resumed by another request at the same moment; "
                "one attempt at a time"
            ) from None
        assert launch_id is not None
        self._start(
            launch_id=launch_id,
            run_id=run_id,
            number=number,
            attempt_id=attempt_id,
            actor=actor,
            approval=approval.describe(),
            now=now,
            argv=argv,
            plan=plan,
            log_path=log_path,
        )
        self.on_change()
        return answer

    def _start(
        self,
        *,
        launch_id: int,
        run_id: str,
        number: int,
        attempt_id: str,
        actor: str,
        approval: str,
        now: datetime,
        argv: list[str],
        plan: ResumePlanPublic,
        log_path: Path,
    ) -> None:
        try:
            pid = self.launcher.start(
                key=attempt_id,
                argv=argv,
                cwd=self.launcher.work_dir(run_id),
                attempt_id=attempt_id,
                log_path=log_path,
                header=log_header(
                    run_id, number, actor=actor, approval=approval, when=now, shown=plan.command
                ),
                on_exit=lambda status: self.record_exit(launch_id, status),
            )
        except Exception as exc:
            self.record_exit(launch_id, None, f"the job could not be started: {exc}")
            raise
        with write_transaction(self.engine) as session:
            launch = session.get(Launch, launch_id)
            if launch is not None and launch.live:
                launch.pid = pid
                session.add(launch)
        logger.info(
            "run %s: attempt %d launched (pid %d, %s): %s",
            run_id,
            number,
            pid,
            approval,
            plan.command,
        )

    # -- 5. the end of the process ----------------------------------------------------

    def record_exit(self, launch_id: int, status: int | None, reason: str | None = None) -> None:
        """The launched process ended with ``status`` (None: it never started)."""
        with write_transaction(self.engine) as session:
            launch = session.get(Launch, launch_id)
            if launch is None:
                return
            projector = Projector(session, utcnow())
            projector.lock_runs([launch.run_id])
            launch.live = False
            launch.exit_code = status
            launch.ended_at = utcnow()
            session.add(launch)
            attempt = session.exec(
                select(Attempt).where(
                    Attempt.run_id == launch.run_id, Attempt.attempt_id == launch.attempt_id
                )
            ).first()
            unreported = attempt is not None and (
                attempt.status == "resuming"
                or (attempt.status not in TERMINAL_ATTEMPT and status != 0)
            )
            if attempt is not None and unreported:
                where = log_url(launch.run_id, launch.attempt_number)
                attempt.status = "failed"
                attempt.finished_at = utcnow()
                attempt.error = reason or (
                    f"attempt {launch.attempt_number} exited with status {status} without "
                    f"reporting its end; its log: GET {where}"
                )
                session.add(attempt)
            projector.finish()
        logger.info("launch %d ended with status %s", launch_id, status)
        self.on_change()

    # -- logs -------------------------------------------------------------------------

    def log(self, run_id: str, number: int, tail: int) -> AttemptLogPublic:
        with Session(self.engine) as session:
            _run(session, run_id)
            launch = session.exec(
                select(Launch).where(Launch.run_id == run_id, Launch.attempt_number == number)
            ).first()
        if launch is None:
            raise NotFoundError(
                f"attempt {number} of run {run_id!r} was not launched by the control plane; "
                "its output is wherever it was started"
            )
        path = Path(launch.log_path)
        try:
            size = path.stat().st_size
            lines, truncated = _tail(path, tail, size)
        except FileNotFoundError:
            raise NotFoundError(
                f"the log of attempt {number} ({path}) is not on this backend's host"
                + (f"; it was written on {launch.host}" if launch.host != HOST else "")
            ) from None
        return AttemptLogPublic(
            run_id=run_id,
            attempt=number,
            path=str(path),
            host=launch.host,
            live=launch.live,
            size_bytes=size,
            lines=lines,
            truncated=truncated,
        )


def _tail(path: Path, count: int, size: int) -> tuple[list[str], bool]:
    """The last ``count`` lines of ``path``, reading at most a few MB from its end."""
    start = max(0, size - _LOG_READ_LIMIT)
    with path.open("rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first one is cut
    kept = lines[-count:] if count else []
    return kept, start > 0 or len(kept) < len(lines)


def next_auto_resume(run: Run, attempts: int, now: datetime) -> datetime | None:
    """When the job's auto-resume policy resumes ``run`` (failed after ``attempts``
    attempts), or None when it never will."""
    if run.status != "failed" or run.spec is None:
        return None
    try:
        policy = JobSpec.model_validate(run.spec).auto_resume
    except ValidationError:
        return None
    if policy is None or attempts >= policy.max_attempts:
        return None
    failed_at = run.finished_at or run.updated_at
    return failed_at.astimezone(UTC) + timedelta(seconds=policy.backoff_s * 2 ** (attempts - 1))


def _pending(record: BatchRecord, finding: IntentFinding) -> PendingIntentPublic:
    """An intended batch, with what BigQuery says of it and what a resume will do."""
    return PendingIntentPublic(
        query_id=record.query_id,
        batch_id=record.batch_id,
        table=record.table,
        write=record.write or None,
        mode=record.mode,
        expected_rows=record.expected_rows,
        streams=[s.stream for s in record.streams],
        intent_at=record.intent_at,
        in_bigquery=finding.in_bigquery,
        commit_time=finding.commit_time,
        resume_will=finding.resume_will,
    )
