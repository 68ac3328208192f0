"""``onceover soak``'s arguments and what it prints; :mod:`onceover_tools.soak.run` does it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from onceover.console import minutes, positive_number
from onceover.errors import ConfigurationError
from onceover.modes import MODES
from onceover.preflight import check_java
from onceover_tools.soak.plan import FAULT_KINDS
from onceover_tools.soak.shapes import BEAM_SHAPES, shape_of
from onceover_tools.soak.target import (
    LOCAL,
    REAL,
    TARGETS,
    connection_options,
    refuse_bypass,
)

SOAK_DIR = Path(".onceover/soak")
SECRET_OPTIONS = ("credentials", "gcpaccesstoken", "proxypassword")
"""Connection options whose values the report's command line does not repeat."""


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds above 0")
    return number


def _fault_kinds(value: str) -> tuple[str, ...]:
    kinds = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [kind for kind in kinds if kind not in FAULT_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"{value!r}: fault kinds are {', '.join(FAULT_KINDS)} (comma-separated)"
        )
    return kinds


def _option(value: str) -> tuple[str, str]:
    name, equals, given = value.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME=VALUE")
    return name.strip(), given


def _redacted(argv: list[str]) -> str:
    """The command as the report shows it: secret options' values left out."""
    shown = []
    for word in argv:
        name, equals, _ = word.partition("=")
        shown.append(f"{name}=***" if equals and name.lower() in SECRET_OPTIONS else word)
    return "onceover " + " ".join(shown)


def add_soak_parser(commands: Any) -> None:
    soak = commands.add_parser(
        "soak",
        help="one streaming query at a set rate for minutes or hours, faults on a clock, "
        "sampled as it goes, then every key counted in BigQuery",
    )
    soak.add_argument("--shape", choices=list(BEAM_SHAPES), default="local",
                      help="Beam's load-test shape: rows a second, fields, bytes per field "
                           "and minutes (default %(default)s; the options below change "
                           "any of them)")  # fmt: skip
    soak.add_argument("--rows-per-second", type=positive_number, default=None)
    soak.add_argument("--fields", type=positive_number, default=None)
    soak.add_argument("--bytes-per-field", type=positive_number, default=None)
    soak.add_argument("--minutes", type=minutes, default=None,
                      help="how long the query runs before it is stopped and drained")  # fmt: skip
    soak.add_argument("--mode", choices=MODES, default=None,
                      help="the sink's mode option (default: none, writeStream's default, "
                           "buffered); default is the at-least-once baseline")  # fmt: skip
    soak.add_argument("--crash-every", type=_seconds, default=60.0,
                      help="seconds between faults, each certain to fire (default "
                           "%(default)s)")  # fmt: skip
    soak.add_argument("--no-faults", action="store_true", help="no faults: the clean run")
    soak.add_argument(
        "--faults",
        type=_fault_kinds,
        default=FAULT_KINDS,
        help=f"fault kinds, taken in turn (default {','.join(FAULT_KINDS)})",
    )
    soak.add_argument("--sample-every", type=_seconds, default=5.0,
                      help="seconds between samples (default %(default)s)")  # fmt: skip
    soak.add_argument("--partitions", type=positive_number, default=2,
                      help="the rate source's partitions: tasks a micro-batch (default "
                           "%(default)s)")  # fmt: skip
    soak.add_argument("--request-max-bytes", type=positive_number, default=None,
                      help="the sink's request.max_bytes (default: the sink's)")  # fmt: skip
    soak.add_argument("--data-dir", type=Path, default=None,
                      help="keep the local BigQuery's tables in DuckDB files here (emptied "
                           "first), for loads larger than memory (default: in memory)")  # fmt: skip
    soak.add_argument("--bigquery", choices=TARGETS, default=LOCAL,
                      help="local: a local BigQuery the soak starts (default); real: "
                           "real BigQuery, reached as --option says (else Application "
                           "Default Credentials)")  # fmt: skip
    soak.add_argument("--option", action="append", default=[], type=_option,
                      metavar="NAME=VALUE",
                      help="with --bigquery real: a connection option of the sink's "
                           "(credentialsFile, parentProject, bigQueryStorageGrpcEndpoint, "
                           "proxyAddress, ...); again for each")  # fmt: skip
    soak.add_argument("--dataset", default="onceover_soak",
                      help="the dataset of the soak's table, made if missing (default "
                           "%(default)s); against real BigQuery each soak writes a new "
                           "table, rate_stream_<UTC time>, and leaves it")  # fmt: skip
    soak.add_argument("--report", type=Path, default=None,
                      help=f"report directory (default {SOAK_DIR}/<shape>-<mode>)")  # fmt: skip
    soak.add_argument("--rejudge", type=Path, default=None, metavar="DIR",
                      help="run no query: judge the flatness of the report kept in DIR "
                           "again from its samples, under today's rule, and rewrite it "
                           "(what BigQuery held stays as counted)")  # fmt: skip
    soak.set_defaults(handler=cmd_soak)


def cmd_soak(args: argparse.Namespace) -> int:
    from onceover.modes import STREAMING_DEFAULT_MODE
    from onceover_tools.soak.plan import SoakPlan
    from onceover_tools.soak.run import run_soak

    if args.rejudge is not None:
        return _rejudge(args.rejudge)
    check_java()
    try:
        shape = shape_of(
            args.shape, rows_per_second=args.rows_per_second, fields=args.fields,
            bytes_per_field=args.bytes_per_field, minutes=args.minutes,
        )  # fmt: skip
    except ValueError as exc:
        raise ConfigurationError(f"--shape: {exc}") from None
    if shape.minutes <= 0:
        raise ConfigurationError("--minutes: a soak runs for more than 0 minutes")
    mode = args.mode or STREAMING_DEFAULT_MODE
    if args.bigquery == LOCAL and args.option:
        raise ConfigurationError(
            f"--option {args.option[0][0]}: connection options are real BigQuery's; "
            "give --bigquery real"
        )
    if args.bigquery == REAL and args.data_dir is not None:
        raise ConfigurationError("--data-dir: the local BigQuery's; not with --bigquery real")
    options = connection_options(args.option)
    if args.bigquery == REAL:
        refuse_bypass(options, os.environ)
    plan = SoakPlan(
        shape=shape,
        mode=args.mode,
        crash_every_s=None if args.no_faults else args.crash_every,
        fault_kinds=args.faults,
        sample_every_s=args.sample_every,
        partitions=args.partitions,
        request_max_bytes=args.request_max_bytes,
        report_dir=args.report or SOAK_DIR / f"{args.shape}-{mode}",
        data_dir=args.data_dir,
        bigquery=args.bigquery,
        options=tuple(options.items()),
        dataset=args.dataset,
    )
    report = run_soak(plan, _redacted(sys.argv[1:]), sys.stdout)
    verdict = report.verdict
    figures = report.figures()
    print(
        f"{'passed' if verdict and verdict.ok else 'FAILED'}: {figures['rows']:,} rows "
        f"({figures['rows_per_s']} rows/s), {figures['faults_fired']} faults fired, "
        f"{figures['restarts']} restarts; report: {plan.report_dir / 'soak-report.md'}"
    )
    for problem in verdict.problems if verdict else ["no verdict"]:
        print(f"  - {problem}")
    return 0 if verdict and verdict.ok else 1


def _rejudge(directory: Path) -> int:
    from onceover_tools.soak.rejudge import RejudgeError, rejudge

    try:
        report = rejudge(directory)
    except RejudgeError as exc:
        raise ConfigurationError(f"--rejudge: {exc}") from None
    verdict = report.verdict
    assert verdict is not None
    flat = [f for f in verdict.flatness if f.flat is not None]
    print(
        f"{'passed' if verdict.ok else 'FAILED'}: {sum(bool(f.flat) for f in flat)} of "
        f"{len(flat)} figures flat; report: {directory / 'soak-report.md'}"
    )
    for problem in verdict.problems:
        print(f"  - {problem}")
    return 0 if verdict.ok else 1
