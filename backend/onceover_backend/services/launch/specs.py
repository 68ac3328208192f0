"""Which launch spec a run may be resumed with, and on whose approval.

A run's spec (module, arguments, checkpoint, auto-resume policy) arrives in
``run_started`` from whoever holds an ingest token: it is data, never a decision. So:

- the first spec a run reports is *pinned*; a later, different one does not replace it
  but waits as the run's *proposed* spec, shown to operators (a job restarted by hand
  with new arguments looks exactly like a token used to swap what Resume launches);
- the control plane launches a spec only on an operator's approval of that exact spec,
  named by its digest: given in the resume call itself (the dashboard's Resume sends the
  digest of the plan the operator confirmed), or beforehand with
  ``POST /api/runs/{id}/spec``. Auto-resume launches only a spec approved that way;
- every launch records whose approval it rests on (its row, its log header, the audit
  log).

The digest leaves out ``cwd``: it says where the job was first started, and launches
never run there (see :mod:`onceover_backend.services.launch.launcher`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Engine

from onceover_backend.core.db import write_transaction
from onceover_backend.errors import NotFoundError, ResumeConflictError, SpecNotApprovedError
from onceover_backend.models import RunSpecPublic
from onceover_backend.services.launch.redaction import redacted_spec
from onceover_backend.tables import Run, utcnow

Decision = Literal["approve", "reject"]


def spec_digest(spec: dict[str, Any]) -> str:
    """What an approval names: the spec's content, canonically, without ``cwd``."""
    content = {name: value for name, value in spec.items() if name != "cwd"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Approval:
    digest: str
    by: str
    at: datetime

    def describe(self) -> str:
        return f"spec {self.digest[:12]} approved by {self.by} at {self.at.isoformat()}"


def pin(run: Run, spec: dict[str, Any], attempt_id: str, now: datetime) -> None:
    """A spec reported by ``attempt_id``: the run's, if it has none; else, if different,
    its proposed spec (the newest proposal wins; the pinned spec never moves)."""
    if run.spec is None:
        run.spec = spec
        return
    digest = spec_digest(spec)
    if digest == spec_digest(run.spec):
        return
    run.spec_proposed = spec
    run.spec_proposed_at = now
    run.spec_proposed_by = attempt_id


def approval(run: Run) -> Approval | None:
    """The standing approval of the run's pinned spec, if an operator gave one."""
    if run.spec is None or run.spec_approved_digest is None:
        return None
    if run.spec_approved_digest != spec_digest(run.spec):
        return None
    assert run.spec_approved_by is not None
    assert run.spec_approved_at is not None
    return Approval(run.spec_approved_digest, run.spec_approved_by, run.spec_approved_at)


def approve_for_launch(run: Run, given: str | None, actor: str, now: datetime) -> Approval:
    """The approval a launch of ``run`` rests on; ``given`` is the digest the caller
    approves with this launch (None: only a standing approval will do).

    Raises :class:`ResumeConflictError` when ``given`` is not the pinned spec's digest (it
    changed since the caller looked), and :class:`SpecNotApprovedError` when nothing
    approves the spec.
    """
    assert run.spec is not None
    digest = spec_digest(run.spec)
    if given is not None:
        if given != digest:
            raise ResumeConflictError(
                f"run {run.run_id!r}: the spec you approved ({given[:12]}) is not the one a "
                f"resume would launch now ({digest[:12]}); look at the plan again"
            )
        record_approval(run, actor, now)
    standing = approval(run)
    if standing is None:
        raise SpecNotApprovedError(
            f"run {run.run_id!r}: no operator has approved its launch spec {digest[:12]} "
            "(module and arguments as its job reported them): look at the plan and resume "
            "with approve_spec set to its spec.digest, or approve it with "
            f"POST /api/runs/{run.run_id}/spec"
        )
    return standing


def record_approval(run: Run, actor: str, now: datetime) -> None:
    assert run.spec is not None
    run.spec_approved_digest = spec_digest(run.spec)
    run.spec_approved_by = actor
    run.spec_approved_at = now


def state(run: Run) -> RunSpecPublic:
    """What the run page and the resume plan show about the run's specs."""
    standing = approval(run)
    return RunSpecPublic(
        spec=None if run.spec is None else redacted_spec(run.spec),
        digest=None if run.spec is None else spec_digest(run.spec),
        approved_by=None if standing is None else standing.by,
        approved_at=None if standing is None else standing.at,
        proposed=None if run.spec_proposed is None else redacted_spec(run.spec_proposed),
        proposed_digest=None if run.spec_proposed is None else spec_digest(run.spec_proposed),
        proposed_at=run.spec_proposed_at,
        proposed_by_attempt=run.spec_proposed_by,
    )


def decide(
    engine: Engine, run_id: str, digest: str, decision: Decision, actor: str
) -> RunSpecPublic:
    """An operator's decision on the spec ``digest`` names: the pinned one or the proposed
    one. Approving the proposed spec pins it (and approves it); rejecting it drops the
    proposal; rejecting the pinned one withdraws its approval."""
    now = utcnow()
    with write_transaction(engine) as session:
        run = session.get(Run, run_id, with_for_update=True)
        if run is None:
            raise NotFoundError(f"no run {run_id!r}")
        pinned = None if run.spec is None else spec_digest(run.spec)
        proposed = None if run.spec_proposed is None else spec_digest(run.spec_proposed)
        if digest not in (pinned, proposed):
            known = ", ".join(d[:12] for d in (pinned, proposed) if d) or "none"
            raise ResumeConflictError(
                f"run {run_id!r} has no spec {digest[:12]} (its specs now: {known}); "
                "look at the run again"
            )
        if decision == "approve":
            if digest == proposed:
                run.spec, run.spec_proposed = run.spec_proposed, None
                run.spec_proposed_at = run.spec_proposed_by = None
            record_approval(run, actor, now)
        elif digest == proposed:
            run.spec_proposed = None
            run.spec_proposed_at = run.spec_proposed_by = None
        else:
            run.spec_approved_digest = run.spec_approved_by = None
            run.spec_approved_at = None
        run.updated_at = now
        session.add(run)
        session.flush()
        return state(run)
