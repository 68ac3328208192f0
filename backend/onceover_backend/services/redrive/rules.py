"""What a re-drive of a run is launched with, and when the control plane refuses one.

**The ledger.** A re-drive's records (``redrives/<run>/<n>.json``) say which set-aside
rows earlier re-drives took; two re-drives that kept them in two ledgers would each send
every row. So the control plane launches a re-drive only with the run's own ledger as
its spec names it (``ledger``, else ``<checkpoint>/onceover``: the rule resume follows,
:func:`onceover_backend.services.resume.checkpoint.ledger_of`), and refuses a run whose
spec names neither, or that reported no spec (a user's own script: only its owner knows
which ledger its writes used, and re-drives it with ``onceover redrive --ledger``).

**Arguments from events.** The dead-letter table and the key column come from the run's
events, which any ingest token can send: each must have the shape of a BigQuery table id
or column name, and goes as ``--option=value`` (never read as another option); the
module is fixed; the launch rests on the operator confirming the plan's command by its
digest (:mod:`.redriver`).
"""

from __future__ import annotations

import hashlib
import json

from pydantic import ValidationError

from onceover.events import JobSpec
from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE
from onceover.redrives import redriven_run
from onceover_backend.errors import NotRedrivableError, UnresumableError
from onceover_backend.services.resume.checkpoint import ledger_of
from onceover_backend.tables import Run

MODULE = "onceover_jobs.redrive"


def ledger_of_run(run: Run) -> str:
    """The ledger a re-drive of ``run`` must use; refused (422) when there is none to name."""
    if (original := redriven_run(run.run_id)) is not None:
        # Its rows set aside again are the run's: a re-drive of the run takes them, and a
        # re-drive of this one (another ledger folder) would send them a second time.
        raise NotRedrivableError(
            f"run {run.run_id!r} is a re-drive of run {original!r}: re-drive {original!r}, "
            "which sends the rows its re-drives set aside again"
        )
    if run.spec is None:
        raise NotRedrivableError(
            f"run {run.run_id!r} reported no launch spec, so the control plane does not know "
            "the ledger its writes used, which every re-drive of it must share: re-drive it "
            f"with onceover redrive {run.run_id} --dead-letter TABLE --ledger LEDGER"
        )
    try:
        return ledger_of(JobSpec.model_validate(run.spec))
    except ValidationError as exc:
        raise NotRedrivableError(f"run {run.run_id!r} has an unusable spec: {exc}") from exc
    except UnresumableError as exc:
        raise NotRedrivableError(
            f"run {run.run_id!r}: {exc.detail}; a re-drive needs the run's ledger"
        ) from exc


def why_not(run: Run) -> str | None:
    """Why the control plane cannot re-drive ``run`` at all; None when it can."""
    try:
        ledger_of_run(run)
    except NotRedrivableError as exc:
        return str(exc.detail)
    return None


def arguments(run_id: str, dead_letter: str, ledger: str, key: str | None, url: str) -> list[str]:
    """The job's arguments; ``dead_letter`` and ``key`` checked for their shapes."""
    if not TABLE_ID_RE.match(dead_letter):
        raise NotRedrivableError(
            f"the dead-letter table {dead_letter!r} the run's events name is not a "
            "project.dataset.table id"
        )
    args = [run_id, f"--dead-letter={dead_letter}", f"--ledger={ledger}", f"--monitor-url={url}"]
    if key is not None:
        if not COLUMN_NAME_RE.match(key):
            raise NotRedrivableError(f"the key column {key!r} the run's events name is not one")
        args.append(f"--key={key}")
    return args


def digest(argv: list[str]) -> str:
    """What an operator's confirmation names: the exact command."""
    return hashlib.sha256(json.dumps(argv, separators=(",", ":")).encode()).hexdigest()
