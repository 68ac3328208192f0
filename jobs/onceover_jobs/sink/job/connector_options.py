"""The spark-bigquery-connector's write options, read as the connector's users write them.

A job moving from ``format("bigquery")`` to ``format("onceover")`` keeps its options. Each
one the connector documents for writes (README 0.45, "Properties") is here once, with
what it does in Onceover: honoured as the connector honours it, honoured differently
(the line says how), ignored (it steers something Onceover never does, such as the
connector's load through a bucket, or it is a read option), or refused, with the reason
and the fix. The readers' page of this table is docs/guides/from-connector.md, "Coming
from spark-bigquery-connector" (tests/project/test_connector_page.py keeps the two alike).

:func:`translate` turns the connector's spelling into the sink's before the sink's own
options are checked (:func:`onceover_jobs.sink.job.options.parse_options`): the table
named by ``save(path)``, ``table``, ``dataset`` and ``project``; ``writeAtLeastOnce`` as
``mode=default``; ``writeMethod`` checked. Options ignored are returned as notes, which
the driver logs once per write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from onceover.modes import AT_LEAST_ONCE_MODE, MODES, traits_of
from onceover_jobs.sink.errors import SinkOptionError

Disposition = Literal["honoured", "honoured differently", "ignored", "refused"]


@dataclass(frozen=True)
class ConnectorOption:
    name: str
    """As the connector spells it."""
    disposition: Disposition
    here: str
    """One line: what it does in Onceover, or why it is refused and what to do instead."""


_INDIRECT_ONLY = (
    "steers the connector's indirect write (files in a bucket, then a load job); "
    "Onceover always writes directly through the Storage Write API"
)
_READ_ONLY = "a read option; a write has nothing to do with it"

CONNECTOR_OPTIONS: tuple[ConnectorOption, ...] = (
    ConnectorOption(
        "path", "honoured",
        "`save(\"dataset.table\")` or `save(\"project.dataset.table\")` names the table",
    ),
    ConnectorOption(
        "table", "honoured",
        "`[[project:]dataset.]table`, or `project.dataset.table`; the same as `save(path)`",
    ),
    ConnectorOption("dataset", "honoured", "the table's dataset when `table` names none"),
    ConnectorOption(
        "project", "honoured",
        "the table's project when `table` names none; else `parentProject`, as the connector",
    ),
    ConnectorOption(
        "writeMethod", "honoured",
        "`direct` is what Onceover does; `indirect` is refused (Onceover has no load "
        "through a bucket: it writes through the Storage Write API, exactly once)",
    ),
    ConnectorOption(
        "writeAtLeastOnce", "honoured",
        "`true`: `mode=default` (the `_default` stream, at least once); `false`: "
        "exactly once, the sink's own mode",
    ),
    ConnectorOption("temporaryGcsBucket", "ignored", _INDIRECT_ONLY),
    ConnectorOption("persistentGcsBucket", "ignored", _INDIRECT_ONLY),
    ConnectorOption("persistentGcsPath", "ignored", _INDIRECT_ONLY),
    ConnectorOption("intermediateFormat", "ignored", _INDIRECT_ONLY),
    ConnectorOption("useAvroLogicalTypes", "ignored", _INDIRECT_ONLY),
    ConnectorOption("enableListInference", "ignored", _INDIRECT_ONLY),
    ConnectorOption(
        "enableModeCheckForSchemaFields", "honoured differently",
        "modes need not match: a nullable column may feed a REQUIRED one, and a NULL "
        "there is a row BigQuery refuses, named (or set aside with `dead_letter`)",
    ),
    ConnectorOption(
        "datePartition", "honoured",
        "`YYYYMMDD` (`YYYYMMDDHH`, `YYYYMM`, `YYYY`: the table's unit): every row must fall "
        "in that partition, or the write stops with nothing committed; with "
        "`mode(\"overwrite\")` only that partition is replaced. A table partitioned by "
        "ingestion time is refused (its rows name no partition to check)",
    ),
    ConnectorOption(
        "allowFieldAddition", "honoured",
        "`true`: the DataFrame's columns the table lacks are added (NULLABLE, or REPEATED; "
        "inside a RECORD too) before the write, by one schema update",
    ),
    ConnectorOption(
        "allowFieldRelaxation", "honoured",
        "`true`: REQUIRED columns the DataFrame gives as nullable, or leaves out, become "
        "NULLABLE before the write, by one schema update",
    ),
    ConnectorOption(
        "bigQueryJobLabel", "ignored",
        "labels the connector's load and query jobs; an append runs none",
    ),
    ConnectorOption(
        "queryJobPriority", "ignored",
        "the priority of the connector's query jobs; an append runs none",
    ),
    ConnectorOption(
        "bigQueryJobTimeoutInMinutes", "ignored",
        "the connector's job timeout; an append runs no job (`retry.deadline_s` bounds "
        "how long a write retries)",
    ),
    ConnectorOption(
        "httpMaxRetry", "honoured differently",
        "retries are bounded by time, not count: `retry.deadline_s` (300 s)",
    ),
    ConnectorOption(
        "httpConnectTimeout", "honoured differently",
        "retries are bounded by time, not count: `retry.deadline_s` (300 s)",
    ),
    ConnectorOption(
        "httpReadTimeout", "ignored", "a read option; a write has nothing to do with it"
    ),
    ConnectorOption(
        "traceApplicationName", "ignored",
        "the connector's trace id on read and write sessions; Onceover's runs are traced "
        "by run id and job name (the control plane, OpenLineage)",
    ),
    ConnectorOption("traceJobId", "ignored", "as `traceApplicationName`"),
    ConnectorOption(
        "bigNumericDefaultPrecision", "ignored",
        "a BIGNUMERIC column takes any decimal that fits it; the DataFrame's precision "
        "is checked against the column's",
    ),
    ConnectorOption("bigNumericDefaultScale", "ignored", "as `bigNumericDefaultPrecision`"),
    *(
        ConnectorOption(name, "ignored", _READ_ONLY)
        for name in (
            "maxParallelism", "parallelism", "preferredMinParallelism", "viewsEnabled",
            "materializationProject", "materializationDataset",
            "materializationExpirationTimeInMinutes", "readDataFormat",
            "optimizedEmptyProjection", "pushAllFilters", "filter", "query",
            "arrowCompressionCodec", "responseCompressionCodec",
            "cacheExpirationTimeInMinutes", "bqChannelPoolSize",
            "createReadSessionTimeoutInSeconds", "allowMapTypeConversion",
            "enableReadSessionCaching", "readSessionCacheDurationMins",
            "snapshotTimeMillis",
        )
    ),
)  # fmt: skip
"""Every connector option read here that the sink does not take under its own name. The
connection's (``credentialsFile``, ``parentProject``,
``useParentProjectForMetadataOperations``, ``proxyAddress``, ...) are the sink's own, with
the connector's meanings: :mod:`onceover.connection`."""

BY_KEY = {option.name.lower(): option for option in CONNECTOR_OPTIONS}
WIDENING_KEYS = ("allowfieldaddition", "allowfieldrelaxation")
"""Kept for the sink's options: read by onceover_jobs.sink.table.widening."""
KEPT_KEYS = ("path", "table", "dataset", "project", "datepartition", *WIDENING_KEYS)
"""Read by the sink's own options, not translated here (datePartition:
onceover_jobs.sink.table.date_partition)."""
"""By the lower-case name Spark hands the data source."""

_LEGACY_TABLE_RE = re.compile(r"^(?P<project>[^:.]+):(?P<rest>[^:]+)$")


def translate(options: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``options`` (lower-case keys) in the sink's terms, and a note for each option
    ignored; a connector option refused raises :class:`SinkOptionError` naming it."""
    out = dict(options)
    notes: list[str] = []
    for key in sorted(options):
        option = BY_KEY.get(key)
        if option is None or key in KEPT_KEYS:
            continue
        if option.disposition == "refused":
            raise SinkOptionError(option.name, f"{option.here}; nothing was written")
        if option.disposition == "ignored":
            notes.append(f"option {option.name!r} ignored: {option.here}")
        del out[key]
    _write_method(options)
    _at_least_once(options, out)
    table = _table(options)
    for key in ("path", "dataset", "project"):
        out.pop(key, None)
    if table is not None:
        out["table"] = table
    return out, notes


def _write_method(options: Mapping[str, str]) -> None:
    method = options.get("writemethod", "direct").strip().lower()
    if method == "indirect":
        raise SinkOptionError(
            "writeMethod",
            "'indirect' (files in a bucket, then a load job) is not what Onceover does: it "
            "writes through the Storage Write API, exactly once. Leave the option out, or "
            "give 'direct'; temporaryGcsBucket and the other indirect options are ignored. "
            "Nothing was written",
        )
    if method != "direct":
        raise SinkOptionError("writeMethod", f"{method!r} is not one of direct, indirect")


def _at_least_once(options: Mapping[str, str], out: dict[str, str]) -> None:
    text = options.get("writeatleastonce")
    if text is None:
        return
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise SinkOptionError("writeAtLeastOnce", f"{text!r} is not true or false")
    if value == "false":
        return
    mode = options.get("mode", AT_LEAST_ONCE_MODE).strip().lower()
    if mode in MODES and traits_of(mode).exactly_once:
        raise SinkOptionError(
            "writeAtLeastOnce",
            f"'true' asks for at-least-once writes (mode {AT_LEAST_ONCE_MODE!r}), but mode is "
            f"{mode!r}, which writes exactly once; give one of them",
        )
    out["mode"] = mode  # an unknown one is refused with the modes named, as any


def _table(options: Mapping[str, str]) -> str | None:
    """The table the write names, as ``[project.]dataset.table``; None when none is."""
    path = options.get("path", "").strip()
    table = options.get("table", "").strip()
    if path and table and _plain(path) != _plain(table):
        raise SinkOptionError(
            "table", f"{table!r} and save({path!r}) name different tables; give one"
        )
    name = _plain(path or table)
    if not name:
        return None
    parts = name.split(".")
    dataset = options.get("dataset", "").strip()
    project = options.get("project", "").strip()
    if len(parts) == 1:
        if not dataset:
            raise SinkOptionError(
                "table", f"{name!r} names no dataset: give dataset.table, or the 'dataset' option"
            )
        parts = [dataset, *parts]
    if len(parts) == 2 and project:  # dataset.table
        parts = [project, *parts]
    return ".".join(parts)


def _plain(name: str) -> str:
    """``project:dataset.table`` (the connector's older form) as ``project.dataset.table``."""
    match = _LEGACY_TABLE_RE.match(name)
    return f"{match['project']}.{match['rest']}" if match else name
