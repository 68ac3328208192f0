"""Settle by hand an intent the sink cannot settle from BigQuery.

A pending-mode batch whose commit was asked for, and whose streams BigQuery no longer
knows (expired, or forgotten long after), stops the write with
:class:`~onceover_jobs.sink.errors.IntentUnresolvableError`: only the table can tell whether its
rows went in. Once a person has counted them::

    python -m onceover_jobs.sink.settle --ledger DIR --scope ID --table P.D.T [--write W] \\
        --batch N --as committed     # the rows are in the table: the batch is done
    python -m onceover_jobs.sink.settle ... --as rewrite   # they are not: write it again

``committed`` marks the intent committed (``resolved``, no commit time), so a replay
skips the batch. ``rewrite`` moves the intent aside (kept as
``settled-batch-<id>-<time>.json``), so the next run writes the batch on new streams.
The error's message gives the whole command. Exit status: 0 settled, 2 nothing to
settle (no such intent, or the batch is committed) or a bad argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from onceover.events import now
from onceover.ledger_files import BATCH_WRITE
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_jobs.sink.settle", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--ledger", required=True, help="the ledger root the error names")
    parser.add_argument("--scope", required=True, help="the query id or run id")
    parser.add_argument("--table", required=True, help="project.dataset.table")
    parser.add_argument("--write", default="", help="the write, for batch and foreachBatch")
    parser.add_argument("--batch", required=True, help="the batch id, or 'write'")
    parser.add_argument("--as", dest="outcome", required=True, choices=("committed", "rewrite"))
    return parser.parse_args(argv)


def settle(args: argparse.Namespace) -> str:
    """Settle the intent; returns what was done. Raises LedgerError when there is none."""
    batch_id = None if args.batch == BATCH_WRITE else int(args.batch)
    ledger = Ledger(args.ledger, args.scope, args.table, args.write)
    record = ledger.batch(batch_id)
    if record is None:
        raise LedgerError(f"no record of batch {args.batch} in {ledger.where}")
    if record.committed:
        raise LedgerError(f"batch {args.batch} in {ledger.where} is committed already")
    at = now().isoformat()
    if args.outcome == "committed":
        ledger.mark_committed(record, at=at, commit_time=None, resolved=True)
        return f"batch {args.batch} marked committed in {ledger.where}; a replay skips it"
    kept = ledger.set_aside(record, at=at)
    return f"intent of batch {args.batch} set aside as {kept}; the next run writes it again"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse has printed the problem
        return int(exc.code or 0)
    try:
        print(settle(args))
    except (LedgerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
