"""Run every check of :mod:`onceover_jobs.preflight` for one job, in order.

A check that raises (an answer nobody foresaw) is a ``fail`` naming what it raised, so
one broken check never hides the others; after failed credentials the checks that call
BigQuery are not run, nor the Arrow append after failed permissions (each would fail for
the same reason).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TypeVar

from onceover.bigquery import BigQueryConfig
from onceover_jobs.preflight.report import Check, Report, fail, warn
from onceover_jobs.preflight.shape import JobShape, check_shape
from onceover_jobs.sink.errors import CheckFailedError
from onceover_jobs.sink.job.options import SinkOptions, connection_options, parse_options

logger = logging.getLogger(__name__)
NOT_RUN = "not checked: the credentials failed"
OPTIONS = "options"
"""The check a job's options fail when the sink's driver would refuse them."""


T = TypeVar("T")


def _guarded(name: str, check: Callable[[], tuple[Check, T]], default: T) -> tuple[Check, T]:
    """``check()``, or a ``fail`` naming what it raised (and ``default``)."""
    try:
        return check()
    except Exception as exc:
        reason = f"the check itself failed: {type(exc).__name__}: {exc}"
        return fail(name, reason, "fix what the error names and check again"), default


def _alone(check: Check) -> tuple[Check, None]:
    return check, None


def run_checks(config: BigQueryConfig, options: SinkOptions, shape: JobShape) -> Report:
    """Every check of the job writing ``options`` through ``config``, shaped so."""
    # Here, not at the top: the sink's driver imports this module for every write, and
    # only a write given check=true needs the checks (and what they import).
    from onceover_jobs.preflight.arrow import NAME as ARROW
    from onceover_jobs.preflight.arrow import check_arrow
    from onceover_jobs.preflight.credentials import NAME as CREDENTIALS
    from onceover_jobs.preflight.credentials import check_credentials
    from onceover_jobs.preflight.ledger import NAME as LEDGER
    from onceover_jobs.preflight.ledger import check_ledger
    from onceover_jobs.preflight.location import NAME as LOCATION
    from onceover_jobs.preflight.location import check_location
    from onceover_jobs.preflight.permissions import NAME as PERMISSIONS
    from onceover_jobs.preflight.permissions import check_permissions

    credentials, _ = _guarded(CREDENTIALS, lambda: _alone(check_credentials(config, options)), None)
    location: str | None = None
    if credentials.verdict == "fail":
        checks = [credentials, *(warn(name, NOT_RUN) for name in (LOCATION, PERMISSIONS))]
        ledger, _ = _guarded(LEDGER, lambda: _alone(check_ledger(config, options)), None)
        checks += [ledger, warn(ARROW, NOT_RUN)]
    else:
        found, location = _guarded(LOCATION, lambda: check_location(config, options), None)
        permitted, table = _guarded(PERMISSIONS, lambda: check_permissions(config, options), None)
        ledger, _ = _guarded(LEDGER, lambda: _alone(check_ledger(config, options)), None)
        if permitted.verdict == "fail":  # an append would be refused for the same reason
            arrow = warn(ARROW, "not checked: the permissions failed")
        else:
            arrow, _ = _guarded(ARROW, lambda: _alone(check_arrow(config, options, table)), None)
        checks = [credentials, found, permitted, ledger, arrow]
    checks += check_shape(options, shape, location)
    return Report(options.table, tuple(checks))


def options_failed(table: str, problem: Exception) -> Report:
    """The report of a job whose options are refused before any check can run."""
    return Report(table, (fail(OPTIONS, str(problem), "fix the option the error names"),))


def plan(raw: Mapping[str, str], shape: JobShape) -> tuple[BigQueryConfig, SinkOptions]:
    """The job's connection and options from its write options, read as the sink's
    driver reads them (``prepare_job``); a streaming job's (a trigger given) mode is
    ``writeStream``'s default unless it names one. A wrong option raises
    :class:`~onceover_jobs.sink.errors.SinkOptionError` naming it."""
    given = {key.lower(): value for key, value in raw.items()}
    if shape.trigger_s is not None and "mode" not in given:
        from onceover.modes import STREAMING_DEFAULT_MODE

        given["mode"] = STREAMING_DEFAULT_MODE
    config = replace(BigQueryConfig.from_env(), connection=connection_options(given))
    return config, parse_options(given, default_project=config.table_project(), streaming=False)


def check_before_write(config: BigQueryConfig, options: SinkOptions) -> Report | None:
    """For a write given ``check=true`` (else nothing: None), the checks on the driver
    before anything is created or written; raises :class:`CheckFailedError` naming each
    failed check."""
    if not options.check:
        return None
    report = run_checks(config, options, JobShape())
    for check in report.checks:
        if check.verdict == "warn":
            logger.warning("onceover check %s: %s", check.name, check.reason)
    if report.failed:
        raise CheckFailedError([(c.name, c.reason, c.fix or "") for c in report.failed])
    return report
