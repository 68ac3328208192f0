"""Where the events a receiver will not take go, and the log lines that say so.

* Refused for good (:mod:`onceover_jobs.outbox.answers`): kept in ``rejected.jsonl`` of
  the spool, with the status and the first problem the answer names; never sent again.
* Refused for their token (401, 403): *parked*, moved as spool files into ``parked/``
  of the spool, where nothing sends them, and logged once with the jobs and runs they
  belong to and the command that sends them again once the token is fixed (see
  docs/guides/control-plane.md#the-spool). A shared folder's file is left where it is
  instead: it may be another job's, whose token the receiver accepts.
* What the disk refuses to keep is logged and counted as dropped: the one way these
  events are lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
from datetime import UTC, datetime
from pathlib import Path

from onceover_jobs.outbox.answers import RefusedTokenError
from onceover_jobs.outbox.claims import Claim
from onceover_jobs.outbox.health import ReceiverHealth
from onceover_jobs.outbox.spool import Spool
from onceover_jobs.outbox.tally import Tally
from onceover_jobs.outbox.wire import Wire

logger = logging.getLogger(__name__)


class Refusals:
    """Sets aside what ``wire``'s receiver at ``url`` refuses, in ``spool``.

    ``replay_dir``: where parked events are to be moved back to be sent again.
    """

    def __init__(
        self,
        spool: Spool,
        wire: Wire,
        url: str,
        *,
        replay_dir: Path,
        health: ReceiverHealth,
        tally: Tally,
    ) -> None:
        self._spool = spool
        self._wire = wire
        self._url = url
        self._replay_dir = replay_dir
        self._health = health
        self._tally = tally

    def reject(self, lines: list[bytes], status: int | None, problem: str) -> None:
        """Keep ``lines`` in ``rejected.jsonl`` (``status`` None: lines that are not JSON)."""
        head = json.dumps(
            {"rejected_at": datetime.now(UTC).isoformat(), "status": status, "problem": problem}
        ).encode()
        if status is None:  # not JSON: kept as text
            events = json.dumps([line.decode(errors="replace") for line in lines]).encode()
            record = head[:-1] + b', "unreadable": ' + events + b"}"
        else:
            record = head[:-1] + b', "events": [' + b",".join(lines) + b"]}"
        where: object = self._spool.rejected_path
        try:
            self._spool.reject(record)
        except OSError as exc:
            where = f"nowhere ({exc})"
        logger.error(
            "%s at %s refused %d events with %s: %s; kept in %s",
            self._wire.receiver,
            self._url,
            len(lines),
            "no status" if status is None else f"HTTP {status}",
            problem,
            where,
        )
        self._tally.add("rejected", len(lines))

    def park(self, lines: list[bytes], refusal: RefusedTokenError) -> None:
        """Set aside events of ours (not yet in any file) refused for their token."""
        try:
            path = self._spool.park(lines)
        except OSError as exc:
            logger.error(
                "cannot park %d events refused with %s in %s, they are lost: %s",
                len(lines),
                refusal,
                self._spool.parked_dir,
                exc,
            )
            self._tally.add("dropped", len(lines))
            return
        self._parked(lines, path.parent, refusal)

    def park_claim(self, claim: Claim, lines: list[bytes], refusal: RefusedTokenError) -> None:
        """Set aside a claimed spool file (holding ``lines``) refused for its token."""
        if claim.spool is not self._spool:
            claim.release()
            logger.warning(
                "%s at %s refused this job's token (%s): %s left where it is, "
                "for a job whose token it accepts",
                self._wire.receiver,
                self._url,
                refusal,
                claim.pending,
            )
            return
        # Moved whole, the part stored before the refusal too: sending that again is
        # harmless (stored once by id), and a rename cannot lose the rest.
        try:
            parked = claim.park(self._spool.parked_dir)
        except OSError as exc:
            claim.release()
            logger.error("cannot park spool file %s (left in the spool): %s", claim.path, exc)
            return
        self._parked(lines, parked.parent, refusal)

    def _parked(self, lines: list[bytes], folder: Path, refusal: RefusedTokenError) -> None:
        self._tally.add("parked", len(lines))
        if not self._health.first_parking():
            logger.debug("parked %d more events in %s", len(lines), folder)
            return
        replay = shlex.quote(str(self._replay_dir))
        logger.error(
            "%s at %s refused this job's token (%s): %d events of %s parked in "
            "%s and not sent again. Fix the job's %s; "
            "then send them with: mkdir -p %s && mv %s/events-* %s/",
            self._wire.receiver,
            self._url,
            refusal,
            len(lines),
            whose(lines),
            folder,
            self._wire.credential,
            replay,
            shlex.quote(str(folder)),
            replay,
        )


def whose(lines: list[bytes], most: int = 3) -> str:
    """Whose events these are, for a log line: "job 'orders' (run r1)"."""
    jobs: dict[str, None] = {}  # in order of appearance
    runs: dict[str, None] = {}
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                job, run = event.get("job"), event.get("run_id")
                if isinstance(job, dict):  # an OpenLineage event: job and run are objects
                    job = job.get("name")
                    run = (event.get("run") or {}).get("runId")
                for names, value in ((jobs, job), (runs, run)):
                    if isinstance(value, str):
                        names[value] = None

    def listed(kind: str, names: list[str]) -> str:
        more = f" and {len(names) - most} more" if len(names) > most else ""
        return f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names[:most])}{more}"

    job = listed("job", [repr(name) for name in jobs]) if jobs else "a job without a name"
    return f"{job} ({listed('run', list(runs))})" if runs else job
