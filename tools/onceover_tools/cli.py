"""The ``onceover`` command line.

::

    onceover bigquery   the local BigQuery, in the foreground
    onceover serve      the control plane (backend and dashboard)    } onceover_backend.commands,
    onceover up         both, until Ctrl-C or SIGTERM (--object-stores: local S3 and GCS too)
    onceover demo       the whole product: four loads, reconciliation, alerts, dashboard
    onceover check      a job's options, credentials, permissions, ledger and shape, before it runs
    onceover db upgrade bring the backend's database to the latest migration } which
    onceover token ...  create, list or revoke API tokens                   } this CLI offers too
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from onceover_backend.commands import (
    DEFAULT_HOST,
    add_backend_commands,
    add_backend_options,
    development_tokens,
)

from onceover import __version__
from onceover.bigquery import LOCAL_PROJECT
from onceover.console import configure_logging, minutes, port_number, positive_number, run
from onceover.errors import ConfigurationError
from onceover.preflight import check_java, check_port_free
from onceover.processes import ChildProcess
from onceover_tools.localbq import (
    PINNED_VERSION,
    LocalBigQuery,
    LocalBigQueryOptions,
    LocalBigQueryProcess,
)
from onceover_tools.localstores import LocalObjectStores
from onceover_tools.soak.command import add_soak_parser
from onceover_tools.stack import BackendProcess, check_children

DEFAULT_REST_PORT = 9050
DEFAULT_GRPC_PORT = 9060
STATE_DIR = Path(".onceover")
LEDGER_BUCKET = "onceover-ledger"
"""The bucket ``onceover up --object-stores`` creates in each local object store."""

BENCH_OUT = Path("~/.onceover/bench").expanduser()
"""Where ``onceover bench`` writes unless told: never the repository's tracked docs."""


def _stop_event() -> threading.Event:
    """An event set by SIGINT or SIGTERM (instead of KeyboardInterrupt mid-shutdown)."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _bigquery_options(args: argparse.Namespace) -> LocalBigQueryOptions:
    return LocalBigQueryOptions(
        host=args.host,
        rest_port=args.rest_port,
        grpc_port=args.grpc_port,
        data_dir=args.data_dir,
        project=args.project,
    )


def cmd_bigquery(args: argparse.Namespace) -> int:
    options = _bigquery_options(args)
    stop = _stop_event()
    server = LocalBigQuery(options).start()
    try:
        config = server.config
        if args.ready_json:
            # One line on stdout that LocalBigQueryProcess waits for; logs go to stderr.
            ready = {
                "rest": config.rest_endpoint,
                "grpc": config.grpc_endpoint,
                "project": config.project,
            }
            print(json.dumps(ready), flush=True)
        else:
            where = options.data_dir or "memory (gone when stopped)"
            print(
                f"Local BigQuery (bqemulator {PINNED_VERSION}, patched)\n"
                f"  REST  {config.rest_endpoint}\n"
                f"  gRPC  {config.grpc_endpoint}\n"
                f"  project {config.project}, data in {where}\n"
                f"  export {' '.join(f'{k}={v}' for k, v in config.env().items())}\n"
                "Ctrl-C to stop.",
                flush=True,
            )
        stop.wait()
    finally:
        server.stop()
    return 0


def object_stores_text(stores: LocalObjectStores, buckets: tuple[str, ...]) -> str:
    """The lines of ``onceover up``'s greeting about the local object stores: where each
    is, its bucket, and what to export for a ledger in one."""
    env = " ".join(f"{k}={v}" for k, v in stores.environment().items())
    return (
        f"  S3 (local)    {stores.s3.endpoint}  bucket {buckets[0]}\n"
        f"  GCS (local)   {stores.gcs.endpoint}  bucket {buckets[1]}\n"
        f"  for ledgers:  export {env}\n"
        f"                (logs in {STATE_DIR}/local-s3.log, {STATE_DIR}/local-gcs.log)\n"
    )


def cmd_up(args: argparse.Namespace) -> int:
    stop = _stop_event()
    # Fail on a busy backend port before spending seconds starting BigQuery.
    check_port_free(args.host, args.port, "--port")
    tokens = development_tokens()
    with contextlib.ExitStack() as started:
        stores_text = ""
        store_env: dict[str, str] = {}
        store_children: list[ChildProcess] = []
        if args.object_stores:
            stores = started.enter_context(LocalObjectStores(host=args.host, log_dir=STATE_DIR))
            stores_text = object_stores_text(stores, stores.create_bucket(LEDGER_BUCKET))
            # The jobs the backend resumes write their ledgers where the user's did.
            store_env = stores.environment()
            store_children = [store.child for store in stores.stores]
        bigquery = started.enter_context(LocalBigQueryProcess(_bigquery_options(args)))
        backend = started.enter_context(
            BackendProcess(
                host=args.host,
                port=args.port,
                database_url=args.database_url,
                bigquery=bigquery.config,
                tokens=tokens,
                settings=store_env,
            )
        )
        env = " ".join(f"{k}={v}" for k, v in bigquery.config.env().items())
        shown = (
            "  tokens:       from ONCEOVER_TOKENS\n"
            if os.environ.get("ONCEOVER_TOKENS")
            else "".join(
                f"  {'tokens' if i == 0 else '':<14}{role:<9}{token}\n"
                for i, (role, token) in enumerate(tokens.items())
            )
        )
        print(
            f"Onceover is up.\n"
            f"  dashboard     {backend.url}/\n"
            f"  API           {backend.url}/api  (docs at {backend.url}/docs)\n"
            f"  BigQuery REST {bigquery.config.rest_endpoint}\n"
            f"  BigQuery gRPC {bigquery.config.grpc_endpoint}\n"
            f"{stores_text}"
            f"{shown}"
            f"  for jobs:     export {env} ONCEOVER_MONITOR_URL={backend.url} "
            f"ONCEOVER_MONITOR_TOKEN={tokens.get('ingest', '<an ingest token>')}\n"
            "Ctrl-C to stop.",
            flush=True,
        )
        while not stop.wait(0.5):
            check_children(bigquery.child, backend.child, *store_children)
    print("Onceover stopped.", flush=True)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from onceover_tools.demo.loads import MIN_ROWS
    from onceover_tools.demo.run import run_demo

    if args.rows < MIN_ROWS:  # fewer leave the faulty load too few requests to fault
        raise ConfigurationError(f"--rows must be at least {MIN_ROWS:,} for the demo")
    check_java()
    return run_demo(args.rows, STATE_DIR / "demo", development_tokens(), _stop_event())


def cmd_chaos(args: argparse.Namespace) -> int:
    from onceover_tools.chaos.curated import curated_schedules
    from onceover_tools.chaos.report import ReportMismatchError, Session
    from onceover_tools.chaos.schedule import (
        DEFAULT_MODES,
        STORES,
        WORKLOADS,
        draw_schedules,
        load_schedule,
    )
    from onceover_tools.chaos.session import resume, run_session

    if args.curated:
        schedules = curated_schedules(args.curated)
        modes = list(dict.fromkeys(s.mode for s in schedules))
        workloads = list(dict.fromkeys(s.workload for s in schedules))
        stores = list(dict.fromkeys(s.store for s in schedules))
        session = Session(
            None, len(schedules), modes, None, curated=args.curated, workloads=workloads,
            stores=stores,
        )  # fmt: skip
    elif args.replay is not None:
        try:
            schedules = [load_schedule(args.replay)]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigurationError(f"--replay {args.replay}: not a schedule ({exc})") from None
        one = schedules[0]
        session = Session(
            None, 1, [one.mode], None, replay=str(args.replay), workloads=[one.workload],
            stores=[one.store],
        )  # fmt: skip
    else:
        workloads = args.workloads or list(WORKLOADS)
        modes = args.modes or list(DEFAULT_MODES)
        stores = args.stores or list(STORES)
        try:
            schedules = list(
                draw_schedules(
                    args.seed, args.schedules, modes=modes, rows=args.rows,
                    workloads=workloads, stores=stores,
                )
            )  # fmt: skip
        except ValueError as exc:
            raise ConfigurationError(f"--workloads/--modes: {exc}") from None
        session = Session(
            args.seed, args.schedules, modes, args.rows, workloads=workloads, stores=stores
        )
    name = (
        "curated"
        if args.curated
        else f"replay-{schedules[0].name}"
        if args.replay
        else f"seed{args.seed}"
    )
    report_dir = args.report or STATE_DIR / "chaos" / name
    try:
        judged = resume(session, schedules, report_dir, fresh=args.fresh)
    except ReportMismatchError as exc:
        raise ConfigurationError(str(exc)) from None
    left = len(schedules) - len(judged.results)
    print(
        f"Chaos: {len(schedules)} schedules, {len(judged.results)} judged already "
        f"(kept), {left} to run; report in {report_dir}",
        flush=True,
    )
    if left:
        check_java()
        with LocalBigQueryProcess(log_path=report_dir / "local-bigquery.log") as bigquery:
            results = run_session(
                session,
                schedules,
                bigquery.config,
                report_dir,
                sys.stdout,
                tokens=development_tokens(),
                parallel=args.parallel,
                judged=judged,
            )
    else:
        results = [judged.results[n] for n in sorted(judged.results)]
    violations = [r for r in results if not r.ok]
    print(
        f"{len(violations)} violations in {len(results)} schedules; "
        f"report: {report_dir / 'chaos-report.md'}"
    )
    return 1 if violations else 0


def cmd_check(args: argparse.Namespace) -> int:
    from onceover_jobs.preflight.run import options_failed, plan, run_checks
    from onceover_jobs.preflight.shape import JobShape
    from onceover_jobs.sink.errors import SinkOptionError

    raw = dict(args.option)
    raw["table"] = args.table
    for name, value in (("mode", args.mode), ("ledger", args.ledger)):
        if value is not None:
            raw[name] = value
    shape = JobShape(args.partitions, args.trigger_seconds, args.rows_per_batch)
    try:
        config, options = plan(raw, shape)
    except (SinkOptionError, ConfigurationError) as exc:  # as the driver would refuse it
        report = options_failed(args.table, exc)
    else:
        report = run_checks(config, options, shape)
    print(report.to_json() if args.json else report.to_text(), flush=True)
    return report.exit_code


def _option_pair(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not key=value (a write option)")
    return key.strip(), text


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds above 0")
    return seconds


def _add_check_parser(commands: Any) -> None:
    from onceover.modes import MODES

    check = commands.add_parser(
        "check", help="check a job's credentials, permissions, ledger and shape before it runs"
    )
    check.add_argument("--table", required=True, help="project.dataset.table the job writes")
    check.add_argument("--mode", choices=MODES, default=None,
                       help="the job's mode (default: pending; buffered with "
                            "--trigger-seconds, as writeStream's)")  # fmt: skip
    check.add_argument("--ledger", default=None,
                       help="the job's ledger: a path or a bucket URL (default as the sink's: "
                            "$ONCEOVER_LEDGER, else ~/.onceover/ledger)")  # fmt: skip
    check.add_argument("--partitions", type=positive_number, default=None,
                       help="partitions of each write or micro-batch")  # fmt: skip
    check.add_argument("--trigger-seconds", type=_seconds, default=None,
                       help="a streaming query's trigger interval")  # fmt: skip
    check.add_argument("--rows-per-batch", type=positive_number, default=None,
                       help="rows of each write or micro-batch")  # fmt: skip
    check.add_argument("--option", type=_option_pair, action="append", default=[],
                       metavar="KEY=VALUE",
                       help="a write option as the job gives the sink (credentialsFile, "
                            "parentProject, bigQueryStorageGrpcEndpoint, createDisposition, "
                            "row_format, ...); repeat for each")  # fmt: skip
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(handler=cmd_check)


def _add_redrive_parser(commands: Any) -> None:
    from onceover_jobs.redrive.__main__ import DESCRIPTION, add_arguments

    redrive = commands.add_parser(
        "redrive", help="send a run's set-aside rows to their tables again, once",
        description=DESCRIPTION,
    )  # fmt: skip
    add_arguments(redrive)
    redrive.set_defaults(handler=cmd_redrive)


def cmd_redrive(args: argparse.Namespace) -> int:
    from onceover_jobs.redrive.__main__ import redrive_from

    return redrive_from(args)


def cmd_py_files(args: argparse.Namespace) -> int:
    from onceover.packaging import build_py_files

    print(build_py_files(args.out).resolve())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onceover", description="Exactly-once Spark to BigQuery loads."
    )
    parser.add_argument("--version", action="version", version=f"onceover {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def bigquery_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--rest-port",
            type=port_number,
            default=DEFAULT_REST_PORT,
            help="REST port (default %(default)s; 0 picks a free port)",
        )
        command.add_argument(
            "--grpc-port",
            type=port_number,
            default=DEFAULT_GRPC_PORT,
            help="gRPC port (default %(default)s; 0 picks a free port)",
        )
        command.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help="keep tables here (default: in memory, gone when stopped)",
        )
        command.add_argument("--project", default=LOCAL_PROJECT,
                             help="default project id (default %(default)s)")  # fmt: skip

    bigquery = commands.add_parser("bigquery", help="run the local BigQuery in the foreground")
    bigquery.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    bigquery_options(bigquery)
    bigquery.add_argument("--ready-json", action="store_true",
                          help="print one JSON line with the endpoints once serving")  # fmt: skip
    bigquery.set_defaults(handler=cmd_bigquery)

    up = commands.add_parser("up", help="run the local BigQuery and the backend until stopped")
    up.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    add_backend_options(up)
    bigquery_options(up)
    up.add_argument("--object-stores", action="store_true",
                    help=f"also run local S3 and Cloud Storage stand-ins, each with a bucket "
                         f"{LEDGER_BUCKET}, on free ports")  # fmt: skip
    up.set_defaults(handler=cmd_up)

    demo = commands.add_parser(
        "demo", help="start the stack, run clean, faulty and crashed loads, serve the dashboard"
    )
    demo.add_argument("--rows", type=positive_number, default=10_000,
                      help="rows per load (default %(default)s, at least 2000)")  # fmt: skip
    demo.set_defaults(handler=cmd_demo)

    _add_check_parser(commands)
    _add_redrive_parser(commands)

    _add_chaos_parser(commands)

    add_soak_parser(commands)

    _add_bench_parser(commands)

    _add_py_files_parser(commands)

    add_backend_commands(commands)
    return parser


def _add_py_files_parser(commands: Any) -> None:
    py_files = commands.add_parser(
        "py-files", help="build the zip of this project's code for spark-submit --py-files"
    )
    py_files.add_argument("--out", type=Path, default=Path("dist"),
                          help="directory to write it to (default %(default)s)")  # fmt: skip
    py_files.set_defaults(handler=cmd_py_files)


def cmd_bench(args: argparse.Namespace) -> int:
    from onceover_tools.bench.run import BenchPlan, run_bench

    check_java()
    return run_bench(BenchPlan.from_args(args), "onceover " + " ".join(sys.argv[1:]))


def _add_bench_parser(commands: Any) -> None:
    from onceover_tools.bench.control_plane import DATABASES, POSTGRES_ADMIN

    bench = commands.add_parser(
        "bench", help="every writer and the control plane measured side by side, as ratios"
    )
    bench.add_argument("--rows", type=positive_number, default=None,
                       help="N: writers run at N and 4N rows (default 250000; 20000 with "
                            "--quick)")  # fmt: skip
    bench.add_argument("--quick", action="store_true",
                       help="small sizes, one run each: a few minutes")  # fmt: skip
    bench.add_argument("--repeat", type=positive_number, default=None,
                       help="timed runs per writer and size, the median kept (default 3; 1 "
                            "with --quick)")  # fmt: skip
    bench.add_argument("--monitoring-rounds", type=positive_number, default=None,
                       help="rounds of plain pending and each monitored write, back to "
                            "back, the median of their paired ratios kept (default 21; 3 "
                            "with --quick or a smaller --rows; at least --repeat)")  # fmt: skip
    bench.add_argument("--events", type=positive_number, default=None,
                       help="control-plane events stored (default 1000000; 100000 with "
                            "--quick)")  # fmt: skip
    bench.add_argument("--micro-batches", type=positive_number, default=None,
                       help="micro-batches per mode of the stream economy (default 60; 20 "
                            "with --quick or a smaller --rows)")  # fmt: skip
    bench.add_argument("--soak-minutes", type=minutes, default=None,
                       help="how long the stream economy's soak of writeStream's default "
                            "runs, 0 skips it (default 5; 0 with --quick or a smaller "
                            "--rows)")  # fmt: skip
    bench.add_argument("--ledger-batches", type=positive_number, default=None,
                       help="micro-batches per mode and store of the ledger-store bench "
                            "(default 60; 12 with --quick or a smaller --rows)")  # fmt: skip
    bench.add_argument("--ledger-stores", type=_ledger_stores, default=None,
                       help="where the ledger-store bench keeps its ledgers (default "
                            "s3,gcs; add posix for the disk, the reference)")  # fmt: skip
    bench.add_argument("--ledger-modes", type=_ledger_modes, default=None,
                       help="sink modes of the ledger-store bench (default "
                            "pending,buffered,committed,default)")  # fmt: skip
    bench.add_argument("--databases", type=_databases, default=list(DATABASES),
                       help="control-plane databases (default sqlite,postgresql)")  # fmt: skip
    bench.add_argument("--postgres-admin", default=POSTGRES_ADMIN,
                       help="PostgreSQL DSN allowed to create the bench's database "
                            "(default %(default)s)")  # fmt: skip
    bench.add_argument("--out", type=Path, default=BENCH_OUT,
                       help="directory for BENCHMARKS.md and benchmarks.json (default "
                            "%(default)s, outside the repository; `--out docs` updates "
                            "the figures of record)")  # fmt: skip
    bench.set_defaults(handler=cmd_bench)


def _databases(value: str) -> list[str]:
    from onceover_tools.bench.control_plane import DATABASES

    return _comma_separated(value, DATABASES, "databases")


def _ledger_stores(value: str) -> list[str]:
    from onceover_tools.bench.ledger_stores import STORES

    return _comma_separated(value, STORES, "stores")


def _ledger_modes(value: str) -> list[str]:
    from onceover_tools.bench.ledger_stores import MODES

    return _comma_separated(value, MODES, "modes")


def _add_chaos_parser(commands: Any) -> None:
    chaos = commands.add_parser(
        "chaos", help="run real jobs under random fault schedules and verify exactly-once"
    )
    chaos.add_argument(
        "--schedules", type=positive_number, default=20, help="how many (default 20)"
    )
    chaos.add_argument("--seed", type=int, default=1, help="draws the schedules (default 1)")
    chaos.add_argument("--rows", type=positive_number, default=3_000,
                       help="rows per schedule (default %(default)s)")  # fmt: skip
    chaos.add_argument("--modes", type=_modes, default=None,
                       help="sink modes, taken in turn (default pending,buffered,committed; "
                            "default mode is the at-least-once baseline)")  # fmt: skip
    chaos.add_argument("--workloads", type=_workloads, default=None,
                       help="jobs, taken in turn with the modes (default every workload; "
                            "each skips the modes its job does not take: cdc takes "
                            "only default)")  # fmt: skip
    chaos.add_argument("--stores", type=_stores, default=None,
                       help="where the schedules' ledgers are, drawn per schedule "
                            "(default posix,s3,gcs: half on a disk, a quarter in each "
                            "local bucket)")  # fmt: skip
    chaos.add_argument("--report", type=Path, default=None,
                       help="report directory (default .onceover/chaos/seed<S>); a drawn "
                            "session's report there is resumed: its judged schedules are "
                            "kept, the rest run")  # fmt: skip
    chaos.add_argument("--fresh", action="store_true",
                       help="discard the report in the report directory and start "
                            "over (default: resume it; refused if it was drawn with "
                            "other arguments)")  # fmt: skip
    chosen = chaos.add_mutually_exclusive_group()
    chosen.add_argument("--replay", type=Path, default=None,
                        help="re-run one schedule from its JSON file")  # fmt: skip
    chosen.add_argument("--curated", nargs="?", const="all", default=None,
                        choices=("all", "ci"),
                        help="run the curated schedules that arm every fault kind instead "
                             "of random draws: all of them (the default), or `ci`, CI's "
                             "share (every fault kind once at least)")  # fmt: skip
    chaos.add_argument("--parallel", type=positive_number, default=2,
                       help="schedules run side by side, each with its own control plane "
                            "(default %(default)s)")  # fmt: skip
    chaos.set_defaults(handler=cmd_chaos)


def _workloads(value: str) -> list[str]:
    from onceover_tools.chaos.schedule import WORKLOADS

    return _comma_separated(value, WORKLOADS, "workloads")


def _stores(value: str) -> list[str]:
    from onceover_tools.chaos.schedule import STORES

    return _comma_separated(value, STORES, "stores")


def _modes(value: str) -> list[str]:
    from onceover_tools.chaos.schedule import MODES

    return _comma_separated(value, MODES, "modes")


def _comma_separated(value: str, choices: tuple[str, ...], what: str) -> list[str]:
    """``value`` as a non-empty list of ``choices``; refused naming them otherwise."""
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    if not chosen or any(part not in choices for part in chosen):
        raise argparse.ArgumentTypeError(
            f"{value!r}: give {what} from {', '.join(choices)}, separated by commas"
        )
    return chosen


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    configure_logging()
    run(lambda: int(args.handler(args)))
