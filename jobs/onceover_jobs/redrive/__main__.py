"""``python -m onceover_jobs.redrive --run RUN --dead-letter TABLE``: re-drive a run's
set-aside rows (``onceover redrive`` runs this)."""

from __future__ import annotations

import argparse
import os
import sys

from onceover.console import run

DESCRIPTION = (
    "Send a run's set-aside rows (its dead-letter table's) to their tables again, once, "
    "after the cause is fixed; rows BigQuery still refuses stay set aside with the new "
    "reason. Run twice, it sends nothing twice."
)


def parser(prog: str = "python -m onceover_jobs.redrive") -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_arguments(parsed)
    return parsed


def add_arguments(parsed: argparse.ArgumentParser) -> None:
    parsed.add_argument("run_id", metavar="RUN", help="the run whose set-aside rows to send")
    parsed.add_argument(
        "--dead-letter", required=True, metavar="TABLE",
        help="the dead-letter table (project.dataset.table) the run set them aside in",
    )  # fmt: skip
    parsed.add_argument(
        "--ledger", default=os.environ.get("ONCEOVER_LEDGER"),
        help="the run's ledger (its ledger option; a streaming job's <checkpoint>/onceover), "
        "where every re-drive of the run keeps its records: two ledgers would send rows "
        "twice (default: $ONCEOVER_LEDGER; required without it)",
    )  # fmt: skip
    parsed.add_argument(
        "--key", default=None, metavar="COLUMN",
        help="the column the run's writes named rows by (their key option): rows refused "
        "again are named by it too",
    )  # fmt: skip
    parsed.add_argument("--monitor-url", default=None, help="the control plane, to report to")
    parsed.add_argument(
        "--monitor-token", default=os.environ.get("ONCEOVER_MONITOR_TOKEN"),
        help="its ingest token (default: $ONCEOVER_MONITOR_TOKEN)",
    )  # fmt: skip
    parsed.add_argument("--master", default=None, help="Spark's master (default: local[2])")


def main(argv: list[str] | None = None) -> int:
    return redrive_from(parser().parse_args(argv))


def redrive_from(args: argparse.Namespace) -> int:
    """Run the re-drive ``args`` describe; prints what it did."""
    from onceover.bigquery import BigQueryConfig
    from onceover_jobs.redrive.run import redrive
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.sink.errors import RedriveRefusedError
    from onceover_jobs.sink.job.options import ledger_location
    from onceover_jobs.spark import spark_session

    if not args.ledger:
        raise RedriveRefusedError(
            "--ledger: give the run's ledger (its ledger option, or <checkpoint>/onceover for "
            "a streaming job; the batch writes' default is ~/.onceover/ledger), which every "
            "re-drive of the run must share, or set $ONCEOVER_LEDGER"
        )
    ledger = ledger_location(args.ledger)
    options: dict[str, str] = {}
    if args.monitor_url:
        options["monitor.url"] = args.monitor_url
        if args.monitor_token:
            options["monitor.token"] = args.monitor_token
    spark = spark_session("onceover-redrive", args.master)
    register(spark)
    try:
        outcome = redrive(
            spark, BigQueryConfig.from_env(), run_id=args.run_id,
            dead_letter=args.dead_letter, ledger=ledger, key=args.key, options=options,
        )  # fmt: skip
    finally:
        spark.stop()
    print(outcome.describe())
    return 0


if __name__ == "__main__":
    run(main)
    sys.exit(0)
