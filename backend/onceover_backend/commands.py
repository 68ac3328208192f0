"""The control plane's commands: ``serve``, ``db upgrade`` and ``token``.

``python -m onceover_backend COMMAND`` runs them on an install with the ``server`` extra;
the ``onceover`` command line offers the same commands beside the tools'. Heavy imports
(uvicorn, SQLAlchemy, the app) happen when a command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from onceover import __version__
from onceover.console import configure_logging, port_number, positive_number, run
from onceover.errors import ConfigurationError
from onceover.preflight import check_port_free

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from onceover_backend.core.config import Settings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_BACKEND_PORT = 8000


def backend_settings(args: argparse.Namespace) -> Settings:
    """The backend's settings from the environment, with ``--database-url`` if given."""
    from pydantic import ValidationError

    from onceover_backend.core.config import Settings

    overrides = {"database_url": args.database_url} if args.database_url else {}
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigurationError(
            "; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors())
        ) from None


def _upgraded(settings: Settings) -> None:
    from sqlalchemy.exc import SQLAlchemyError

    from onceover_backend.core.migrate import upgrade_to_head

    try:
        upgrade_to_head(settings.database_url)
    except SQLAlchemyError as exc:
        from sqlalchemy.engine import make_url

        where = make_url(settings.database_url).render_as_string(hide_password=True)
        first = str(exc).splitlines()[0]
        raise ConfigurationError(f"cannot upgrade the database {where}: {first}") from None


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from onceover_backend.core.logging import configure_backend_logging
    from onceover_backend.main import create_app

    check_port_free(args.host, args.port, "--port")
    settings = backend_settings(args)
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

    from onceover_backend.services.prometheus.instruments import MULTIPROCESS_DIR

    if make_url(settings.database_url).get_backend_name() != "postgresql":
        raise ConfigurationError(
            "--workers above 1 needs PostgreSQL (ONCEOVER_DATABASE_URL or --database-url): "
            "the workers share the database and coordinate through it"
        )
    if settings.metrics_port is not None:
        raise ConfigurationError(
            "ONCEOVER_METRICS_PORT serves one process's metrics: with --workers above 1, "
            "leave it unset and scrape /metrics on the API's port with ONCEOVER_METRICS_TOKEN "
            "(each scrape then sums every worker's)"
        )
    os.environ["ONCEOVER_DATABASE_URL"] = settings.database_url
    os.environ["ONCEOVER_LAUNCH_MONITOR_URL"] = settings.launch_monitor_url
    # Each worker's own measurements (latency, queue depths) in files one folder holds,
    # so that a scrape, whichever worker answers it, sums them all (prometheus-client's
    # multiprocess mode; services/prometheus/instruments.py).
    made = None
    if not os.environ.get(MULTIPROCESS_DIR):
        made = tempfile.mkdtemp(prefix="onceover-metrics-")
        os.environ[MULTIPROCESS_DIR] = made
    try:
        uvicorn.run(
            "onceover_backend.main:create_app_from_environment",
            factory=True,
            workers=args.workers,
            host=args.host,
            port=args.port,
            log_config=None,
            access_log=False,
        )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


@contextmanager
def _database(args: argparse.Namespace, *, upgrade: bool = True) -> Iterator[Engine]:
    """The backend's database engine (upgraded to the latest migration first)."""
    from onceover_backend.core.db import build_engine

    settings = backend_settings(args)
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

    from onceover_backend.services.access.tokens import TokenError, create_token

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
    from onceover_backend.services.access.tokens import list_tokens

    with _database(args) as engine:
        tokens = list_tokens(engine)
    for token in tokens:
        state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "live"
        print(f"{token.name}\t{token.role}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{state}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from onceover_backend.services.access.tokens import TokenError, revoke_token

    with _database(args, upgrade=False) as engine:
        try:
            revoke_token(engine, args.name, _actor())
        except TokenError as exc:
            raise ConfigurationError(str(exc)) from None
    print(f"token {args.name!r} revoked")
    return 0


def development_tokens() -> dict[str, str]:
    """One fresh token per role, for a local stack (``ONCEOVER_TOKENS`` wins if set)."""
    from onceover_backend.core.config import ROLES, parse_tokens
    from onceover_backend.core.security import new_token

    configured = os.environ.get("ONCEOVER_TOKENS", "")
    if configured:
        return dict(parse_tokens(configured))
    return {role: new_token() for role in ROLES}


def add_backend_options(command: argparse.ArgumentParser) -> None:
    """``--port`` and ``--database-url``: where a backend listens and what it stores in."""
    command.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_BACKEND_PORT,
        help="backend port (default %(default)s; 0 picks a free port)",
    )
    command.add_argument("--database-url", default=None,
                         help="SQLAlchemy URL (default $ONCEOVER_DATABASE_URL, else "
                              "sqlite:///.onceover/onceover.db)")  # fmt: skip


def add_backend_commands(commands: Any) -> None:
    """``serve``, ``db upgrade`` and ``token create|list|revoke`` on ``commands``."""
    serve = commands.add_parser("serve", help="run the backend and dashboard")
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument("--workers", type=positive_number, default=1,
                       help="worker processes (default 1; more need PostgreSQL)")  # fmt: skip
    add_backend_options(serve)
    serve.set_defaults(handler=cmd_serve)

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m onceover_backend", description="Onceover's control plane."
    )
    parser.add_argument("--version", action="version", version=f"onceover {__version__}")
    add_backend_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    configure_logging()
    run(lambda: int(args.handler(args)), prog="onceover")
