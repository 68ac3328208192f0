"""The ``onceover`` command line.

::

    onceover bigquery   the local BigQuery, in the foreground
    onceover serve      the control plane (backend and dashboard)
    onceover up         both, until Ctrl-C or SIGTERM
    onceover demo       the whole product: four loads, reconciliation, alerts, dashboard
    onceover db upgrade bring the backend's database to the latest migration
    onceover token ...  create, list or revoke API tokens
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover import __version__
from onceover.bigquery import LOCAL_PROJECT
from onceover.console import configure_logging, run
from onceover.errors import ConfigurationError
from onceover.localbq import (
    PINNED_VERSION,
    LocalBigQuery,
    LocalBigQueryOptions,
    LocalBigQueryProcess,
)
from onceover.preflight import check_java, check_port_free
from onceover.stack import BackendProcess, check_children

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from backend.core.config import Settings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_BACKEND_PORT = 8000
DEFAULT_REST_PORT = 9050
DEFAULT_GRPC_PORT = 9060
STATE_DIR = Path(".onceover")

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


def _backend_settings(args: argparse.Namespace) -> Settings:
    from pydantic import ValidationError

    from backend.core.config import Settings

    overrides = {"database_url": args.database_url} if args.database_url else {}
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(
            "; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors())
        ) from None


def _upgraded(settings: Settings) -> None:
    from sqlalchemy.exc import SQLAlchemyError

    from backend.core.migrate import upgrade_to_head

    try:
        upgrade_to_head(settings.database_url)
    except SQLAlchemyError as exc:
        from sqlalchemy.engine import make_url

        where = make_url(settings.database_url).render_as_string(hide_password=True)
        first = str(exc).splitlines()[0]
        raise ConfigurationError(f"cannot upgrade the database {where}: {first}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from backend.core.logging import configure_backend_logging
    from backend.main import create_app

    check_port_free(args.host, args.port, "--port")
    settings = _backend_settings(args)
    if not settings.launch_monitor_url:  # resumed jobs post their events back here
        wildcard = args.host in ("0.0.0.0", "::", "")  # noqa: S104 (a comparison)
        host = "127.0.0.1" if wildcard else args.host
        settings.launch_monitor_url = f"http://{host}:{args.port}"
    configure_backend_logging(settings.log_format)
    _upgraded(settings)
    if args.workers > 1:
        _serve_workers(args, settings)
        return 0
    app = create_app(settings)
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False)
    return 0


def _serve_workers(args: argparse.Namespace, settings: Settings) -> None:
    """Several worker processes on one port. Each builds its own app from the
    environment, so what this command decided goes there first."""
    import uvicorn
    from sqlalchemy.engine import make_url

    if make_url(settings.database_url).get_backend_name() != "postgresql":
        raise ConfigurationError(
            "--workers above 1 needs PostgreSQL (ONCEOVER_DATABASE_URL or --database-url): "
            "the workers share the database and coordinate through it"
        )
    os.environ["ONCEOVER_DATABASE_URL"] = settings.database_url
    os.environ["ONCEOVER_LAUNCH_MONITOR_URL"] = settings.launch_monitor_url
    uvicorn.run(
        "backend.main:create_app_from_environment",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
    )


@contextmanager
def _database(args: argparse.Namespace, *, upgrade: bool = True) -> Iterator[Engine]:
    """The backend's database engine (upgraded to the latest migration first)."""
    from backend.core.db import build_engine

    settings = _backend_settings(args)
    if upgrade:
        _upgraded(settings)
    engine = build_engine(settings.database_url)
    try:
        yield engine
    finally:
        engine.dispose()


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    with _database(args) as engine, engine.connect() as connection:
        revision = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    where = engine.url.render_as_string(hide_password=True)
    print(f"Database {where} is at revision {revision} (head).")
    return 0


def _actor() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def cmd_token_create(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from backend.services.tokens import TokenError, create_token

    name = args.name or f"{args.role}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    with _database(args) as engine:
        try:
            token = create_token(engine, args.role, name, _actor())
        except TokenError as exc:
            raise ConfigurationError(str(exc)) from None
    print(token)
    print(f"{args.role} token {name!r} created; it is shown only this once.", file=sys.stderr)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    from backend.services.tokens import list_tokens

    with _database(args) as engine:
        tokens = list_tokens(engine)
    for token in tokens:
        state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "live"
        print(f"{token.name}\t{token.role}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{state}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from backend.services.tokens import TokenError, revoke_token

    with _database(args, upgrade=False) as engine:
        try:
            revoke_token(engine, args.name, _actor())
        except TokenError as exc:
            raise ConfigurationError(str(exc)) from None
    print(f"token {args.name!r} revoked")
    return 0


def development_tokens() -> dict[str, str]:
    """One fresh token per role, for a local stack (``ONCEOVER_TOKENS`` wins if set)."""
    from backend.core.config import ROLES, parse_tokens
    from backend.core.security import new_token

    configured = os.environ.get("ONCEOVER_TOKENS", "")
    if configured:
        return dict(parse_tokens(configured))
    return {role: new_token() for role in ROLES}


def cmd_up(args: argparse.Namespace) -> int:
    stop = _stop_event()
    # Fail on a busy backend port before spending seconds starting BigQuery.
    check_port_free(args.host, args.port, "--port")
    tokens = development_tokens()
    with (
        LocalBigQueryProcess(_bigquery_options(args)) as bigquery,
        BackendProcess(
            host=args.host,
            port=args.port,
            database_url=args.database_url,
            bigquery=bigquery.config,
            tokens=tokens,
        ) as backend,
    ):
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
            f"{shown}"
            f"  for jobs:     export {env} ONCEOVER_MONITOR_URL={backend.url} "
            f"ONCEOVER_MONITOR_TOKEN={tokens.get('ingest', '<an ingest token>')}\n"
            "Ctrl-C to stop.",
            flush=True,
        )
        while not stop.wait(0.5):
            check_children(bigquery.child, backend.child)
    print("Onceover stopped.", flush=True)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from onceover.demo.loads import MIN_ROWS
    from onceover.demo.run import run_demo

    if args.rows < MIN_ROWS:  # fewer leave the faulty load too few requests to fault
        raise ConfigurationError(f"--rows must be at least {MIN_ROWS:,} for the demo")
    check_java()
    return run_demo(args.rows, STATE_DIR / "demo", development_tokens(), _stop_event())


def cmd_chaos(args: argparse.Namespace) -> int:
    from onceover.chaos.curated import curated_schedules
    from onceover.chaos.report import Session
    from onceover.chaos.schedule import DEFAULT_MODES, WORKLOADS, draw_schedules, load_schedule
    from onceover.chaos.session import run_session

    check_java()
    if args.curated:
        schedules = curated_schedules()
        modes = list(dict.fromkeys(s.mode for s in schedules))
        workloads = list(dict.fromkeys(s.workload for s in schedules))
        session = Session(None, len(schedules), modes, None, curated=True, workloads=workloads)
    elif args.replay is not None:
        try:
            schedules = [load_schedule(args.replay)]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise ConfigurationError(f"--replay {args.replay}: not a schedule ({exc})") from None
        session = Session(None, 1, [schedules[0].mode], None, replay=str(args.replay))
    else:
        workloads = args.workloads or list(WORKLOADS)
        modes = args.modes or list(DEFAULT_MODES)
        try:
            schedules = list(
                draw_schedules(
                    args.seed, args.schedules, modes=modes, rows=args.rows,
                    workloads=workloads,
                )
            )  # fmt: skip
        except ValueError as exc:
            raise ConfigurationError(f"--workloads/--modes: {exc}") from None
        session = Session(args.seed, args.schedules, modes, args.rows, workloads=workloads)
    name = (
        "curated"
        if args.curated
        else f"replay-{schedules[0].name}"
        if args.replay
        else f"seed{args.seed}"
    )
    report_dir = args.report or STATE_DIR / "chaos" / name
    print(f"Chaos: {len(schedules)} schedules; report in {report_dir}", flush=True)
    with LocalBigQueryProcess(log_path=report_dir / "local-bigquery.log") as bigquery:
        results = run_session(
            session,
            schedules,
            bigquery.config,
            report_dir,
            sys.stdout,
            tokens=development_tokens(),
            parallel=args.parallel,
        )
    violations = [r for r in results if not r.ok]
    print(
        f"{len(violations)} violations in {len(results)} schedules; "
        f"report: {report_dir / 'chaos-report.md'}"
    )
    return 1 if violations else 0


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
            type=_port,
            default=DEFAULT_REST_PORT,
            help="REST port (default %(default)s; 0 picks a free port)",
        )
        command.add_argument(
            "--grpc-port",
            type=_port,
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

    def backend_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--port",
            type=_port,
            default=DEFAULT_BACKEND_PORT,
            help="backend port (default %(default)s; 0 picks a free port)",
        )
        command.add_argument("--database-url", default=None,
                             help="SQLAlchemy URL (default $ONCEOVER_DATABASE_URL, else "
                                  "sqlite:///.onceover/onceover.db)")  # fmt: skip

    bigquery = commands.add_parser("bigquery", help="run the local BigQuery in the foreground")
    bigquery.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    bigquery_options(bigquery)
    bigquery.add_argument("--ready-json", action="store_true",
                          help="print one JSON line with the endpoints once serving")  # fmt: skip
    bigquery.set_defaults(handler=cmd_bigquery)

    serve = commands.add_parser("serve", help="run the backend and dashboard")
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument("--workers", type=_positive, default=1,
                       help="worker processes (default 1; more need PostgreSQL)")  # fmt: skip
    backend_options(serve)
    serve.set_defaults(handler=cmd_serve)

    up = commands.add_parser("up", help="run the local BigQuery and the backend until stopped")
    up.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    backend_options(up)
    bigquery_options(up)
    up.set_defaults(handler=cmd_up)

    demo = commands.add_parser(
        "demo", help="start the stack, run clean, faulty and crashed loads, serve the dashboard"
    )
    demo.add_argument("--rows", type=_positive, default=10_000,
                      help="rows per load (default %(default)s, at least 2000)")  # fmt: skip
    demo.set_defaults(handler=cmd_demo)

    _add_chaos_parser(commands)

    _add_bench_parser(commands)

    _add_py_files_parser(commands)

    _add_database_parsers(commands)
    return parser


def _add_database_parsers(commands: Any) -> None:
    """``onceover db`` and ``onceover token``: the backend's database and its tokens."""

    def database_option(command: argparse.ArgumentParser) -> None:
        command.add_argument("--database-url", default=None,
                             help="SQLAlchemy URL (default $ONCEOVER_DATABASE_URL, else an "
                                  "SQLite file in $ONCEOVER_DATA_DIR, .onceover)")  # fmt: skip

    db = commands.add_parser("db", help="the backend's database")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    upgrade = db_commands.add_parser("upgrade", help="apply every migration not yet applied")
    database_option(upgrade)
    upgrade.set_defaults(handler=cmd_db_upgrade)

    token = commands.add_parser("token", help="API tokens (stored hashed)")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    create = token_commands.add_parser("create", help="make a token and print it once")
    create.add_argument("--role", required=True, choices=["ingest", "viewer", "operator"])
    create.add_argument("--name", default=None, help="a unique name (default: role and time)")
    database_option(create)
    create.set_defaults(handler=cmd_token_create)
    listing = token_commands.add_parser("list", help="names, roles and states (never secrets)")
    database_option(listing)
    listing.set_defaults(handler=cmd_token_list)
    revoke = token_commands.add_parser("revoke", help="stop a token from working")
    revoke.add_argument("--name", required=True)
    database_option(revoke)
    revoke.set_defaults(handler=cmd_token_revoke)


def _add_py_files_parser(commands: Any) -> None:
    py_files = commands.add_parser(
        "py-files", help="build the zip of this project's code for spark-submit --py-files"
    )
    py_files.add_argument("--out", type=Path, default=Path("dist"),
                          help="directory to write it to (default %(default)s)")  # fmt: skip
    py_files.set_defaults(handler=cmd_py_files)


def cmd_bench(args: argparse.Namespace) -> int:
    from onceover.bench.run import BenchPlan, run_bench

    check_java()
    return run_bench(BenchPlan.from_args(args), "onceover " + " ".join(sys.argv[1:]))


def _add_bench_parser(commands: Any) -> None:
    from onceover.bench.control_plane import DATABASES, POSTGRES_ADMIN

    bench = commands.add_parser(
        "bench", help="every writer and the control plane measured side by side, as ratios"
    )
    bench.add_argument("--rows", type=_positive, default=None,
                       help="N: writers run at N and 4N rows (default 250000; 20000 with "
                            "--quick)")  # fmt: skip
    bench.add_argument("--quick", action="store_true",
                       help="small sizes, one run each: a few minutes")  # fmt: skip
    bench.add_argument("--repeat", type=_positive, default=None,
                       help="timed runs per writer and size, the median kept (default 3; 1 "
                            "with --quick)")  # fmt: skip
    bench.add_argument("--events", type=_positive, default=None,
                       help="control-plane events stored (default 1000000; 100000 with "
                            "--quick)")  # fmt: skip
    bench.add_argument("--micro-batches", type=_positive, default=None,
                       help="micro-batches per mode of the stream economy (default 60; 20 "
                            "with --quick or a smaller --rows)")  # fmt: skip
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
    from onceover.bench.control_plane import DATABASES

    return _comma_separated(value, DATABASES, "databases")


def _add_chaos_parser(commands: Any) -> None:
    chaos = commands.add_parser(
        "chaos", help="run real jobs under random fault schedules and verify exactly-once"
    )
    chaos.add_argument("--schedules", type=_positive, default=20, help="how many (default 20)")
    chaos.add_argument("--seed", type=int, default=1, help="draws the schedules (default 1)")
    chaos.add_argument("--rows", type=_positive, default=3_000,
                       help="rows per schedule (default %(default)s)")  # fmt: skip
    chaos.add_argument("--modes", type=_modes, default=None,
                       help="sink modes, taken in turn (default pending,buffered,committed; "
                            "default mode is the at-least-once baseline)")  # fmt: skip
    chaos.add_argument("--workloads", type=_workloads, default=None,
                       help="jobs, taken in turn with the modes (default all six; each "
                            "skips the modes its job does not take)")  # fmt: skip
    chaos.add_argument("--report", type=Path, default=None,
                       help="report directory (default .onceover/chaos/seed<S>)")  # fmt: skip
    chosen = chaos.add_mutually_exclusive_group()
    chosen.add_argument("--replay", type=Path, default=None,
                        help="re-run one schedule from its JSON file")  # fmt: skip
    chosen.add_argument("--curated", action="store_true",
                        help="run the curated schedules that arm every fault kind "
                             "(what CI runs) instead of random draws")  # fmt: skip
    chaos.add_argument("--parallel", type=_positive, default=2,
                       help="schedules run side by side, each with its own control plane "
                            "(default %(default)s)")  # fmt: skip
    chaos.set_defaults(handler=cmd_chaos)


def _port(value: str) -> int:
    port = int(value) if value.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535)")
    return port


def _workloads(value: str) -> list[str]:
    from onceover.chaos.schedule import WORKLOADS

    return _comma_separated(value, WORKLOADS, "workloads")


def _modes(value: str) -> list[str]:
    from onceover.chaos.schedule import MODES

    return _comma_separated(value, MODES, "modes")


def _comma_separated(value: str, choices: tuple[str, ...], what: str) -> list[str]:
    """``value`` as a non-empty list of ``choices``; refused naming them otherwise."""
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    if not chosen or any(part not in choices for part in chosen):
        raise argparse.ArgumentTypeError(
            f"{value!r}: give {what} from {', '.join(choices)}, separated by commas"
        )
    return chosen


def _positive(value: str) -> int:
    number = int(value) if value.isdigit() else 0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return number


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    configure_logging()
    run(lambda: int(args.handler(args)))
