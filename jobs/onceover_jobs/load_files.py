"""Load a directory of files into BigQuery exactly once, with Structured Streaming.

    python -m onceover_jobs.load_files --source DIR --format json|csv|parquet --table P.D.T
        --key COL --checkpoint DIR [--ledger LOCATION] [--mode pending|committed|default]
        [--run-id ID]
        [--monitor-url URL --monitor-token T] [--master local[2,4]]
        [--max-files-per-trigger N] [--request-max-bytes N] [--create-table] [--stamp]
        [--dead-letter P.D.T] [--continuous [--interval SECONDS]]
        [--auto-resume ATTEMPTS [--auto-resume-backoff SECONDS]]

Runs with ``spark-submit jobs/onceover_jobs/load_files.py ...`` too. By default the trigger is
``availableNow``: every file present is loaded, then the job ends. ``--continuous``
keeps polling the directory every ``--interval`` seconds until stopped (SIGTERM or
Ctrl-C stop it between batches).

The ledger is ``<checkpoint>/onceover`` unless ``--ledger`` puts it elsewhere: a path, or
a bucket's URL (``gs://bucket/ledgers/q1``, ``s3://…``, ``abfss://…``: the sink's ``ledger``
option), reached with the credentials the store's own clients find. The checkpoint is
a directory on a disk, and the run id is kept there either way.

Re-running the same command on the same ``--checkpoint`` resumes where it stopped:
Spark replays an unfinished batch with the same rows, and the sink's ledger commits
every batch exactly once. Exit status 0 only when every batch Spark finished is
committed in BigQuery; 1 when the load failed; 2 for bad arguments or configuration.

The table's schema is the read schema when the table exists (so ISO timestamps in
JSON or CSV load into a TIMESTAMP column); with ``--create-table`` a missing table is
created from the files' inferred schema. ``--stamp`` writes the run id and batch id
into ``_onceover_run_id`` / ``_onceover_batch_id`` (the sink's ``stamp=true``; a table
made with ``--create-table --stamp`` gets the two columns). ``--dead-letter P.D.T`` sets the
rows BigQuery refuses (a value too long for a ``STRING(n)`` column, ...) aside in that table,
exactly once, and loads the rest (the sink's ``dead_letter``); without it such a row fails
the load, named. The monitor URL and token also come from
``ONCEOVER_MONITOR_URL`` / ``ONCEOVER_MONITOR_TOKEN``; they are never stored in the
run's spec, which the control plane keeps to resume the run. ``--auto-resume 3`` asks the
control plane to resume the run by itself after a failure, up to 3 attempts in all
(see docs/guides/resume.md). A launch by the control plane names its attempt in
``ONCEOVER_ATTEMPT_ID``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover.argv import without_options
from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover.checkpoint_layout import ledger_root, run_id_path
from onceover.console import run
from onceover.errors import ConfigurationError
from onceover.job_env import (
    ATTEMPT_ID_ENV,
    EXIT_REFUSED,
    MONITOR_TOKEN_ENV,
    MONITOR_URL_ENV,
    SPARK_MASTER_ENV,
)
from onceover.ledger_store import check_location
from onceover.modes import MODES
from onceover.stamp import STAMP_COLUMNS
from onceover_jobs.sink.errors import ConcurrentDriverError, refused_as_concurrent
from onceover_jobs.sink.job.options import (
    DEFAULT_MAX_REQUEST_BYTES,
    MAX_REQUEST_BYTES_LIMIT,
    MIN_REQUEST_BYTES,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from onceover.ledger_files import ScopeTotals
    from onceover_jobs.sink.reporting.lineage import EventType

logger = logging.getLogger("onceover_jobs.load_files")
STAMP_NAMES = frozenset(name.casefold() for name in STAMP_COLUMNS)

MODULE = "onceover_jobs.load_files"
FORMATS = ("json", "csv", "parquet")
DEFAULT_MASTER = "local[2,4]"
"""Two cores; each task may be tried 4 times, as on a cluster (plain local[2] never retries)."""
HEARTBEAT_S = float(os.environ.get("ONCEOVER_HEARTBEAT_S", "30"))
RUN_END_FLUSH_S = 30.0
"""How long the run's end (finished, failed) waits to deliver its events: a control
plane restarting (a deploy, a crash) is back within seconds, and a job that ended
meanwhile would otherwise leave its end in a spool that no later job may send."""
_SECRET_ARGS = ("--monitor-token", "--monitor-url")
_ATTEMPT_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass(frozen=True)
class LoadResult:
    run_id: str
    query_id: str
    batches: int
    rows: int


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, type=Path, help="directory of input files")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--table", required=True, help="project.dataset.table")
    parser.add_argument("--key", required=True, help="column identifying a row")
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=Path,
        help="checkpoint directory (the ledger lives in it, unless --ledger)",
    )
    parser.add_argument(
        "--ledger",
        metavar="LOCATION",
        default=None,
        help="where the ledger is: a path or a bucket's URL (gs://, s3://, abfss://; "
        "default: <checkpoint>/onceover)",
    )
    parser.add_argument("--mode", choices=MODES, default="pending")
    parser.add_argument("--run-id", help="run id (default: kept in the checkpoint)")
    parser.add_argument("--job", default="load_files", help="job name shown by the dashboard")
    parser.add_argument("--monitor-url", default=os.environ.get(MONITOR_URL_ENV))
    parser.add_argument("--monitor-token", default=os.environ.get(MONITOR_TOKEN_ENV))
    parser.add_argument(
        "--master",
        help="Spark master (default: $ONCEOVER_SPARK_MASTER, else spark-submit's --master, "
        f"else {DEFAULT_MASTER})",
    )
    parser.add_argument("--max-files-per-trigger", type=int, default=None)
    parser.add_argument(
        "--create-table",
        action="store_true",
        help="create the table from the files' schema if it is missing",
    )
    parser.add_argument(
        "--stamp",
        action="store_true",
        help="stamp every row with the run id and batch id (for reconciliation per run and "
        "per batch)",
    )
    parser.add_argument(
        "--dead-letter",
        metavar="TABLE",
        default=None,
        help="set the rows BigQuery refuses aside in this table (project.dataset.table or "
        "dataset.table; created if missing) and load the rest (default: a refused row fails "
        "the load, named)",
    )
    parser.add_argument(
        "--continuous",
        action="store_true",
        help="keep polling (processing-time trigger) instead of availableNow",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=10.0,
        help="seconds between micro-batches with --continuous",
    )
    parser.add_argument("--row-format", choices=("arrow", "proto"), default="arrow")
    parser.add_argument(
        "--auto-resume",
        type=int,
        metavar="ATTEMPTS",
        default=None,
        help="let the control plane resume a failed run by itself, up to ATTEMPTS attempts "
        "in all (default: never)",
    )
    parser.add_argument(
        "--auto-resume-backoff",
        type=float,
        metavar="SECONDS",
        default=30.0,
        help="wait before the first automatic resume, doubled before each next one",
    )
    parser.add_argument(
        "--request-max-bytes",
        type=int,
        default=None,
        help=(
            "cap of one append request in bytes (the sink's request.max_bytes; default "
            f"{DEFAULT_MAX_REQUEST_BYTES:,}, at most {MAX_REQUEST_BYTES_LIMIT:,})"
        ),
    )
    args = parser.parse_args(argv)
    if args.max_files_per_trigger is not None and args.max_files_per_trigger < 1:
        parser.error("--max-files-per-trigger must be at least 1")
    if args.request_max_bytes is not None and not (
        MIN_REQUEST_BYTES <= args.request_max_bytes <= MAX_REQUEST_BYTES_LIMIT
    ):
        parser.error(
            f"--request-max-bytes must be between {MIN_REQUEST_BYTES:,} and "
            f"{MAX_REQUEST_BYTES_LIMIT:,}"
        )
    if args.auto_resume is not None and not 1 <= args.auto_resume <= 100:
        parser.error("--auto-resume must be between 1 and 100 attempts")
    if not 0 <= args.auto_resume_backoff <= 86_400:
        parser.error("--auto-resume-backoff must be between 0 and 86400 seconds")
    if not args.source.is_dir():
        parser.error(f"--source {args.source} is not a directory")
    if args.table.count(".") != 2:
        parser.error(f"--table {args.table!r} is not project.dataset.table")
    if args.ledger is not None:
        try:
            args.ledger = check_location(args.ledger, "--ledger")  # a path made absolute
        except ConfigurationError as exc:
            parser.error(str(exc))
    if args.dead_letter is not None and (
        args.dead_letter.count(".") not in (1, 2) or args.dead_letter == args.table
    ):
        parser.error(
            f"--dead-letter {args.dead_letter!r} is not project.dataset.table or "
            "dataset.table, other than --table"
        )
    return args


_PATH_ARGS = ("--source", "--checkpoint", "--ledger")


def spec_args(argv: list[str], args: argparse.Namespace) -> list[str]:
    """The arguments to store for a resume: everything but the monitor URL and token,
    with the paths made absolute (a launch runs in a directory of the control plane's,
    not where this job was started)."""
    kept = without_options(argv, (*_SECRET_ARGS, *_PATH_ARGS))
    ledger = [] if args.ledger is None else ["--ledger", args.ledger]  # absolute, or a URL
    return [*kept, "--source", str(args.source.resolve()),
            "--checkpoint", str(args.checkpoint.resolve()), *ledger]  # fmt: skip


def ledger_of(args: argparse.Namespace) -> str:
    """The run's ledger: ``--ledger``, else the checkpoint's (an absolute path or a URL)."""
    if args.ledger is not None:
        return str(args.ledger)
    return str(Path(ledger_root(args.checkpoint)).resolve())


def attempt_id() -> str:
    """The id the control plane gave this attempt when it launched it, else a new one."""
    given = os.environ.get(ATTEMPT_ID_ENV, "")
    if not given:
        return uuid.uuid4().hex
    if not _ATTEMPT_ID.match(given):
        raise ConfigurationError(
            f"{ATTEMPT_ID_ENV}={given[:50]!r} is not an attempt id (letters, digits, . _ -)"
        )
    return given


def run_id_for(checkpoint: Path, given: str | None) -> str:
    """``given``, else the id this checkpoint was first run with (kept beside the ledger)."""
    path = run_id_path(checkpoint)
    if given:
        return given
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    run_id = f"load-{uuid.uuid4().hex[:12]}"
    temp = path.with_suffix(".tmp")
    temp.write_text(run_id)
    temp.replace(path)
    return run_id


# -- schema -------------------------------------------------------------------------


def spark_type(field: Any) -> DataType:
    """The Spark type a BigQuery column is read as (the read schema of the files)."""
    from pyspark.sql import types as t

    kind = field.field_type.upper()
    scalar: dict[str, DataType] = {
        "STRING": t.StringType(),
        "INT64": t.LongType(),
        "INTEGER": t.LongType(),
        "FLOAT64": t.DoubleType(),
        "FLOAT": t.DoubleType(),
        "BOOL": t.BooleanType(),
        "BOOLEAN": t.BooleanType(),
        "NUMERIC": t.DecimalType(38, 9),
        "BIGNUMERIC": t.DecimalType(38, 18),
        "DATE": t.DateType(),
        "TIMESTAMP": t.TimestampType(),
        "DATETIME": t.TimestampNTZType(),
        "BYTES": t.BinaryType(),
        "JSON": t.StringType(),
    }
    if kind in ("RECORD", "STRUCT"):
        inner: DataType = t.StructType([t.StructField(f.name, spark_type(f)) for f in field.fields])
    elif kind in scalar:
        inner = scalar[kind]
    else:
        raise ConfigurationError(f"column {field.name} of type {kind} cannot be read from files")
    return t.ArrayType(inner) if field.mode == "REPEATED" else inner


def target_table(args: argparse.Namespace, config: BigQueryConfig) -> Any | None:
    """The table, or None when it is missing and ``--create-table`` will make it.

    Asked before Spark starts, so a typo in ``--table`` costs no JVM start.
    """
    from google.api_core.exceptions import NotFound

    try:
        return bigquery_client(config).get_table(args.table)
    except NotFound:
        if args.create_table:
            return None
        raise ConfigurationError(
            f"table {args.table} does not exist; create it, or pass --create-table to create "
            "it from the files' schema"
        ) from None


def read_schema(
    spark: SparkSession, args: argparse.Namespace, config: BigQueryConfig, table: Any | None
) -> StructType:
    """The table's schema when it exists; else (``--create-table``) the files', creating it."""
    from google.cloud import bigquery
    from pyspark.sql import types as t
    from pyspark.sql.pandas.types import to_arrow_schema

    from onceover_jobs.sink.rows.schema import bigquery_schema_from_arrow

    if table is not None:  # the stamp columns are not in the files: the sink fills them
        return t.StructType(
            [
                t.StructField(f.name, spark_type(f))
                for f in table.schema
                if f.name.casefold() not in STAMP_NAMES
            ]
        )
    client = bigquery_client(config)
    if not any(p.is_file() and not p.name.startswith(".") for p in args.source.iterdir()):
        raise ConfigurationError(f"--create-table needs at least one file in {args.source}")
    inferred = reader(spark, args).load(str(args.source)).schema
    fields = bigquery_schema_from_arrow(to_arrow_schema(inferred, timezone="UTC"))
    if args.stamp:
        fields += [bigquery.SchemaField(name, kind) for name, kind in STAMP_COLUMNS.items()]
    project, dataset, _ = args.table.split(".")
    client.create_dataset(f"{project}.{dataset}", exists_ok=True)
    client.create_table(bigquery.Table(args.table, schema=fields), exists_ok=True)
    logger.info(
        "created %s from the files' schema: %s",
        args.table,
        ", ".join(f"{f.name} {f.field_type}" for f in fields),
    )
    schema: StructType = inferred
    return schema


def reader(spark: SparkSession, args: argparse.Namespace) -> Any:
    read = spark.read.format(args.format)
    if args.format == "csv":
        read = read.option("header", "true").option("inferSchema", "true")
    if args.format == "json":
        read = read.option("inferTimestamp", "true")
    return read


def source_stream(spark: SparkSession, args: argparse.Namespace, schema: StructType) -> DataFrame:
    stream = spark.readStream.format(args.format).schema(schema)
    if args.format == "csv":
        stream = stream.option("header", "true")
    if args.max_files_per_trigger:
        stream = stream.option("maxFilesPerTrigger", args.max_files_per_trigger)
    frame: DataFrame = stream.load(str(args.source))
    return frame


# -- run events ---------------------------------------------------------------------


class RunReporter:
    """Run events for the control plane: started (with the spec), heartbeats, the end;
    and the run's OpenLineage START and COMPLETE or FAIL, where the OpenLineage clients'
    configuration names a receiver (the sink sends RUNNING per committed batch under
    the same runId, :attr:`lineage_run_id`)."""

    def __init__(self, args: argparse.Namespace, argv: list[str], run_id: str) -> None:
        from onceover_jobs.outbox import emitter_for
        from onceover_jobs.sink.errors import LineageConfigError
        from onceover_jobs.sink.job.lineage_config import resolve
        from onceover_jobs.sink.reporting.lineage import lineage_emitter, lineage_run_id

        self.args = args
        self.argv = argv
        self.run_id = run_id
        self.attempt_id = attempt_id()
        self.emitter = emitter_for(args.monitor_url, args.monitor_token)
        try:
            self.lineage = resolve({})
        except LineageConfigError as exc:  # exit 2, before Spark starts
            raise ConfigurationError(str(exc)) from None
        self.lineage_run_id = lineage_run_id(run_id, self.attempt_id)
        self.lineage_emitter = lineage_emitter(self.lineage)
        self.query_id: str | None = None
        self._stop = threading.Event()
        self._beats = 0
        self._ledger_totals: ScopeTotals | None = None
        self._totals_lock = threading.Lock()

    def _common(self, kind: str, *facts: object) -> dict[str, Any]:
        from onceover.events import event_id, now

        return {
            "id": event_id(self.run_id, kind, self.attempt_id, *facts),
            "time": now(),
            "run_id": self.run_id,
            "table": self.args.table,
            "job": self.args.job,
            "attempt_id": self.attempt_id,
        }

    def started(self) -> None:
        from onceover.events import AutoResume, JobSpec, RunStarted

        auto = self.args.auto_resume
        spec = JobSpec(
            module=MODULE,
            args=spec_args(self.argv, self.args),
            checkpoint=str(self.args.checkpoint.resolve()),
            ledger=ledger_of(self.args),
            cwd=os.getcwd(),
            auto_resume=None
            if auto is None
            else AutoResume(max_attempts=auto, backoff_s=self.args.auto_resume_backoff),
        )
        self.emitter.emit(RunStarted(mode=self.args.mode, spec=spec, **self._common("started")))
        self._lineage("START")

    def _lineage(
        self, kind: EventType, *, rows: int | None = None, error: str | None = None
    ) -> None:
        """One of the run's OpenLineage events (the sink's RUNNING come between)."""
        if self.lineage is None:
            return
        from onceover_jobs.sink.reporting.lineage import job_name, run_event

        self.lineage_emitter.emit(
            run_event(
                kind, config=self.lineage, run_uuid=self.lineage_run_id,
                job_name=job_name(self.args.job, self.args.table), streaming=True,
                table=self.args.table, onceover_run_id=self.run_id,
                attempt_id=self.attempt_id, rows=rows, error=error,
            )
        )  # fmt: skip
        if kind != "START":
            self.lineage_emitter.flush(10.0)

    def totals(self) -> tuple[int, int]:
        """(rows, batches) committed by the query, pruned batches included. One reader
        lives as long as the run, so each heartbeat opens only the ledger files written
        since the last one (onceover.ledger_files.ScopeTotals)."""
        if self.query_id is None:
            return 0, 0
        from onceover.ledger_files import ScopeTotals

        with self._totals_lock:  # the heartbeat thread and the main thread both ask
            if self._ledger_totals is None or self._ledger_totals.scope != self.query_id:
                self._ledger_totals = ScopeTotals(ledger_of(self.args), self.query_id)
            reader = self._ledger_totals
        totals = reader.read()
        return totals.rows, totals.batches

    def start_heartbeats(self) -> None:
        def beat() -> None:
            from onceover.events import RunHeartbeat

            while not self._stop.wait(HEARTBEAT_S):
                self._beats += 1
                rows, batches = self.totals()
                self.emitter.emit(
                    RunHeartbeat(
                        rows_committed=rows,
                        batches_committed=batches,
                        **self._common("heartbeat", self._beats),
                    )
                )

        threading.Thread(target=beat, name="onceover-heartbeat", daemon=True).start()

    def finished(self) -> None:
        from onceover.events import RunFinished

        self._stop.set()
        rows, batches = self.totals()
        self.emitter.emit(
            RunFinished(rows_committed=rows, batches_committed=batches, **self._common("finished"))
        )
        self.emitter.flush(RUN_END_FLUSH_S)
        self._lineage("COMPLETE", rows=rows)

    def failed(self, error: str, *, refused: bool = False) -> None:
        from onceover.events import RunFailed

        self._stop.set()
        rows, _ = self.totals()
        self.emitter.emit(
            RunFailed(
                error=error[:4000],
                rows_committed=rows,
                refused=refused,
                **self._common("failed"),
            )
        )
        self.emitter.flush(RUN_END_FLUSH_S)
        self._lineage("FAIL", rows=rows, error=error)


# -- the job ------------------------------------------------------------------------


def uncommitted_batches(checkpoint: Path, query_id: str, ledger: str | None = None) -> list[int]:
    """Batches Spark recorded as done (commit log) that the ledger (``ledger``, else the
    checkpoint's) does not hold committed."""
    from onceover.ledger_files import scope_records, scope_summaries

    commits = checkpoint / "commits"
    done = (
        sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        if commits.is_dir()
        else []
    )
    root = ledger if ledger is not None else ledger_root(checkpoint)
    committed = {r.batch_id for r in scope_records(root, query_id) if r.committed}
    # Spark's commits log may still list batches the ledger pruned (it keeps one more, or
    # more where the ledger keeps fewer: onceover_jobs.sink.ledger.retention); only a
    # committed batch
    # is pruned. Read after the records: a prune writes its summary before it removes them.
    pruned = scope_summaries(root, query_id).values()
    return [b for b in done if b not in committed and not any(s.covers(b) for s in pruned)]


def optional_options(args: argparse.Namespace) -> dict[str, str]:
    """The sink's options this run gives only when asked to."""
    given = {
        "ledger": args.ledger,
        "request.max_bytes": args.request_max_bytes,
        "dead_letter": args.dead_letter,
        "monitor.url": args.monitor_url or None,
        "monitor.token": args.monitor_token or None,
    }
    return {name: str(value) for name, value in given.items() if value is not None}


def load(args: argparse.Namespace, argv: list[str]) -> LoadResult:
    from onceover_jobs.sink.claim import claim_checkpoint
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.spark import spark_session, submitted

    config = BigQueryConfig.from_env()
    table = target_table(args, config)
    args.checkpoint.mkdir(parents=True, exist_ok=True)
    run_id = run_id_for(args.checkpoint, args.run_id)
    reporter = RunReporter(args, argv, run_id)
    reporter.started()
    master = args.master or os.environ.get(SPARK_MASTER_ENV)
    if master is None and not submitted():
        master = DEFAULT_MASTER
    spark = spark_session(f"onceover-{args.job}", master)
    try:
        register(spark)
        schema = read_schema(spark, args, config, table)
        writer = (
            source_stream(spark, args, schema)
            .writeStream.format("onceover")
            .option("table", args.table)
            .option("mode", args.mode)
            .option("key", args.key)
            .option("stamp", "true" if args.stamp else "false")
            .option("run_id", run_id)
            .option("job", args.job)
            .option("run_events", "false")  # this job reports its run itself
            .option("openlineage.run_id", reporter.lineage_run_id)  # its RUNNING, our run
            .option("row_format", args.row_format)
            .option("checkpointLocation", str(args.checkpoint.resolve()))
        )
        for name, value in optional_options(args).items():
            writer = writer.option(name, value)
        if args.continuous:
            writer = writer.trigger(processingTime=f"{args.interval} seconds")
        else:
            writer = writer.trigger(availableNow=True)
        # Refused here, a second driver leaves the checkpoint as it found it; refused by
        # the sink, it would have planned a micro-batch there first (claim.py says why).
        claim_checkpoint(spark, str(args.checkpoint.resolve()), ledger=args.ledger)
        query = writer.start()
        reporter.query_id = str(query.id)
        reporter.start_heartbeats()
        _stop_on_signal(query)
        query.awaitTermination()
        uncommitted = uncommitted_batches(args.checkpoint, str(query.id), args.ledger)
        if uncommitted:
            raise RuntimeError(f"batches {uncommitted} finished in Spark but are not committed")
        rows, batches = reporter.totals()
    except BaseException as exc:
        reporter.failed(f"{type(exc).__name__}: {exc}", refused=refused_as_concurrent(exc))
        raise
    finally:
        try:
            spark.stop()
        except Exception:  # the JVM may be gone already (a crash failpoint)
            logger.warning("Spark did not stop cleanly", exc_info=True)
    reporter.finished()
    return LoadResult(run_id, str(query.id), batches, rows)


def _stop_on_signal(query: Any) -> None:
    def stop(signum: int, _frame: object) -> None:
        logger.warning("signal %d: stopping the query between batches", signum)
        threading.Thread(target=query.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)


def _refusal(exc: BaseException) -> str:
    """The sink's own sentence, out of the Spark exception that wraps it."""
    text = str(exc)
    name = ConcurrentDriverError.__name__
    at = text.find(f"{name}: ")
    return (text[at + len(name) + 2 :] if at >= 0 else text).splitlines()[0][:1000]


def share_failpoint_hits() -> None:
    """Count failpoint hits across this job's processes (set before Spark starts them).

    Spark replaces a Python worker that died, and retries a task in whichever worker is
    free; with per-process counts ``@2`` would fire again in every new worker.
    """
    import tempfile

    from onceover_jobs.sink import failpoints

    if os.environ.get(failpoints.ENV) and not os.environ.get(failpoints.STATE_ENV):
        os.environ[failpoints.STATE_ENV] = tempfile.mkdtemp(prefix="onceover-failpoints-")


def main(argv: list[str] | None = None) -> int:
    from onceover_jobs.logs import configure_job_logging

    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    configure_job_logging(args.job)
    share_failpoint_hits()
    try:
        result = load(args, argv)
    except ConfigurationError:
        raise
    except Exception as exc:
        logger.error("load failed: %s", exc)
        if refused_as_concurrent(exc):
            print(f"{MODULE}: refused: {_refusal(exc)}", file=sys.stderr)
            return EXIT_REFUSED
        print(f"{MODULE}: load failed: {str(exc).splitlines()[0][:500]}", file=sys.stderr)
        return 1
    print(
        f"Committed {result.rows:,} rows in {result.batches} batches to {args.table} "
        f"(run {result.run_id}, query {result.query_id})."
    )
    return 0


if __name__ == "__main__":
    run(main, prog=MODULE)
