"""The ``onceover`` command line.

::

    onceover bigquery   the local BigQuery, in the foreground
    onceover serve      the control plane (backend and dashboard)
    onceover up         both, until Ctrl-C or SIGTERM
    onceover demo       start the stack, run the demo job, print what BigQuery holds
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

from onceover import __version__
from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig
from onceover.console import configure_logging, run
from onceover.errors import OnceoverError
from onceover.localbq import (
    PINNED_VERSION,
    LocalBigQuery,
    LocalBigQueryOptions,
    LocalBigQueryProcess,
)
from onceover.preflight import check_java, check_port_free
from onceover.processes import job_environment
from onceover.stack import BackendProcess, check_children

DEFAULT_HOST = "127.0.0.1"
DEFAULT_BACKEND_PORT = 8000
DEFAULT_REST_PORT = 9050
DEFAULT_GRPC_PORT = 9060
STATE_DIR = Path(".onceover")


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


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from backend.core.config import Settings
    from backend.main import create_app

    check_port_free(args.host, args.port, "--port")
    overrides = {"database_url": args.database_url} if args.database_url else {}
    app = create_app(Settings(**overrides))
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    stop = _stop_event()
    # Fail on a busy backend port before spending seconds starting BigQuery.
    check_port_free(args.host, args.port, "--port")
    with (
        LocalBigQueryProcess(_bigquery_options(args)) as bigquery,
        BackendProcess(
            host=args.host,
            port=args.port,
            database_url=args.database_url,
            bigquery=bigquery.config,
        ) as backend,
    ):
        env = " ".join(f"{k}={v}" for k, v in bigquery.config.env().items())
        print(
            f"Onceover is up.\n"
            f"  dashboard     {backend.url}/\n"
            f"  API           {backend.url}/api  (docs at {backend.url}/docs)\n"
            f"  BigQuery REST {bigquery.config.rest_endpoint}\n"
            f"  BigQuery gRPC {bigquery.config.grpc_endpoint}\n"
            f"  for jobs:     export {env}\n"
            "Ctrl-C to stop.",
            flush=True,
        )
        while not stop.wait(0.5):
            check_children(bigquery.child, backend.child)
    print("Onceover stopped.", flush=True)
    return 0


DEMO_TABLE = f"{LOCAL_PROJECT}.onceover_demo.orders"


def run_demo_load(config: BigQueryConfig, workdir: Path, rows: int) -> None:
    """Generate order events, load them with the exactly-once job, count them in BigQuery."""
    import shutil

    source, checkpoint = workdir / "orders", workdir / "checkpoint"
    for stale in (source, checkpoint):  # the local BigQuery is new each time: so are these
        shutil.rmtree(stale, ignore_errors=True)
    env = {**job_environment(config), "ONCEOVER_LOG_FORMAT": "text"}
    steps = [
        (f"Generating {rows:,} order events in 4 JSON files ...",
         ["-m", "jobs.generate", "--out", str(source), "--rows", str(rows), "--files", "4"]),
        (f"Loading them into {DEMO_TABLE} exactly once (jobs.load_files, pending mode) ...",
         ["-m", "jobs.load_files", "--source", str(source), "--format", "json",
          "--table", DEMO_TABLE, "--key", "event_id", "--checkpoint", str(checkpoint),
          "--create-table", "--max-files-per-trigger", "2"]),
    ]  # fmt: skip
    for message, job in steps:
        print(message, flush=True)
        status = subprocess.run([sys.executable, *job], env=env, check=False).returncode
        if status != 0:
            raise OnceoverError(f"{job[1]} failed with status {status}")
    from onceover.bigquery import bigquery_client

    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{DEMO_TABLE}`"
    counted = next(iter(bigquery_client(config).query_and_wait(query)))
    print(f"BigQuery counted {counted['n']} rows ({counted['ids']} distinct event ids).")
    if not counted["n"] == counted["ids"] == rows:
        raise OnceoverError(f"BigQuery holds {counted['n']} rows; {rows} were loaded")


def cmd_demo(args: argparse.Namespace) -> int:
    check_java()
    logs = STATE_DIR / "demo"
    print("Starting the local BigQuery and the backend ...", flush=True)
    with (
        LocalBigQueryProcess(log_path=logs / "local-bigquery.log") as bigquery,
        BackendProcess(bigquery=bigquery.config, log_path=logs / "backend.log") as backend,
    ):
        print(f"  BigQuery REST {bigquery.config.rest_endpoint}, backend {backend.url}")
        run_demo_load(bigquery.config, logs, args.rows)
        code, health = backend.health()
        print(
            f"Backend health: {health['status']} (database {health['database']['status']}, "
            f"BigQuery {health['bigquery']['status']})"
        )
        return 0 if code == 200 else 1


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
    backend_options(serve)
    serve.set_defaults(handler=cmd_serve)

    up = commands.add_parser("up", help="run the local BigQuery and the backend until stopped")
    up.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    backend_options(up)
    bigquery_options(up)
    up.set_defaults(handler=cmd_up)

    demo = commands.add_parser(
        "demo", help="start the stack, load order events exactly once, print the count"
    )
    demo.add_argument("--rows", type=_positive, default=10_000, help="rows to write")
    demo.set_defaults(handler=cmd_demo)
    return parser


def _port(value: str) -> int:
    port = int(value) if value.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port (0-65535)")
    return port


def _positive(value: str) -> int:
    number = int(value) if value.isdigit() else 0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return number


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    configure_logging()
    run(lambda: int(args.handler(args)))
