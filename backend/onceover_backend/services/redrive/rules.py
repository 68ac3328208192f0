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
import re

from pydantic import ValidationError

from onceover.events import JobSpec
from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE
from onceover_backend.errors import NotRedrivableError, UnresumableError
from onceover_backend.services.resume.checkpoint import ledger_of
from onceover_backend.tables import Run

MODULE = "onceover_jobs.redrive"
SEPARATOR = ":redrive-"
"""The job's spelling of a re-drive's run id, ``<run>:redrive-<n>``
(onceover_jobs.redrive.selection.redrive_run_id)."""
_REDRIVE_RUN = re.compile(re.escape(SEPARATOR) + r"[0-9]+$")


def prefix(run_id: str) -> str:
    """What the run ids of ``run_id``'s re-drives start with."""
    return f"{run_id}{SEPARATOR}"


def number_of(run_id: str, redrive_run_id: str) -> int | None:
    """n, when ``redrive_run_id`` is ``<run_id>:redrive-<n>``; else None."""
    rest = redrive_run_id.removeprefix(prefix(run_id))
    return int(rest) if rest != redrive_run_id and rest.isdigit() else None


def redriven_run(run_id: str) -> str | None:
    """The run that ``run_id`` re-drives, when it is a re-drive's; else None."""
    found = _REDRIVE_RUN.search(run_id)
    return run_id[: found.start()] if found else None


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
