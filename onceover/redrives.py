"""A re-drive's run id, as the job writes it and the control plane reads it.

Re-drive *n* of run ``R`` (onceover_jobs.redrive) writes under ``R:redrive-<n>``: ``:`` is in
no id the sink makes, so no other run's re-drive reads alike. Its rows set aside again
are ``R``'s to re-drive (a re-drive of ``R`` takes them), never a re-drive's own.
"""

from __future__ import annotations

import re

SEPARATOR = ":redrive-"
_REDRIVE_RUN = re.compile(re.escape(SEPARATOR) + r"[0-9]+$")


def redrive_run_id(run_id: str, number: int) -> str:
    """Re-drive ``number`` of ``run_id``'s run id."""
    return f"{redrive_prefix(run_id)}{number}"


def redrive_prefix(run_id: str) -> str:
    """What the run ids of ``run_id``'s re-drives (and theirs) start with."""
    return f"{run_id}{SEPARATOR}"


def redrive_number(run_id: str, redrive_run: str) -> int | None:
    """n, when ``redrive_run`` is ``<run_id>:redrive-<n>``; else None."""
    rest = redrive_run.removeprefix(redrive_prefix(run_id))
    return int(rest) if rest != redrive_run and rest.isdigit() else None


def redriven_run(run_id: str) -> str | None:
    """The run that ``run_id`` re-drives, when it is a re-drive's; else None."""
    found = _REDRIVE_RUN.search(run_id)
    return run_id[: found.start()] if found else None
