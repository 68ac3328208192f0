"""A missing table created as the spark-bigquery-connector creates it: from the DataFrame.

``createDisposition`` is ``CREATE_IF_NEEDED`` by default, as the connector's: a write into
a table that does not exist creates it from the DataFrame's schema (non-nullable columns
REQUIRED, arrays REPEATED, structs RECORD: :func:`onceover_jobs.sink.rows.schema.
bigquery_schema_from_arrow`), with the connector's table options:

================================  ==================================================
option                            the table created
================================  ==================================================
``partitionField``                partitioned by this top-level DATE, TIMESTAMP or
                                  DATETIME column (time), or INT64 (integer range)
``partitionType``                 ``HOUR``, ``DAY`` (default with a field),
                                  ``MONTH``, ``YEAR``; without ``partitionField``:
                                  by ingestion time (``_PARTITIONTIME``)
``partitionExpirationMs``         each partition's storage kept this long
``partitionRangeStart``, ``End``, integer-range partitioning of ``partitionField``;
``partitionRangeInterval``        all three, or none
``clusteredFields``               up to four top-level columns, comma-separated
``bigQueryTableLabel.<key>``      a label ``key: value`` on the table (several may)
``destinationTableKmsKeyName``    encrypted with this Cloud KMS key
================================  ==================================================

They shape only a table the write creates; an existing table is written as it is (the
connector does the same). ``CREATE_NEVER`` refuses a missing table, naming it. Two
drivers creating the same table race in ``tables.insert``: one creates it, the other is
answered ALREADY_EXISTS and writes into the table it finds, whose schema is checked
like any table's (:func:`onceover_jobs.sink.rows.schema.plan_write`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from onceover.identifiers import COLUMN_NAME_RE
from onceover_jobs.sink.errors import SinkOptionError, TableNotFoundError

if TYPE_CHECKING:
    import pyarrow as pa
    from google.cloud.bigquery import SchemaField, Table

    from onceover.bigquery import BigQueryConfig

logger = logging.getLogger(__name__)

Disposition = Literal["CREATE_IF_NEEDED", "CREATE_NEVER"]
DISPOSITIONS: tuple[Disposition, ...] = ("CREATE_IF_NEEDED", "CREATE_NEVER")
TIME_PARTITION_TYPES = ("HOUR", "DAY", "MONTH", "YEAR")
MAX_CLUSTERING_COLUMNS = 4
"""BigQuery's limit: "You can specify up to four clustering columns"."""
LABEL_PREFIX = "bigquerytablelabel."
_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
"""Labels' documented form: keys start with a lowercase letter; both at most 63
lowercase letters, digits, underscores and dashes."""
_KMS_RE = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
OPTIONS = frozenset(
    {
        "createdisposition", "partitionfield", "partitiontype", "partitionexpirationms",
        "partitionrangestart", "partitionrangeend", "partitionrangeinterval",
        "clusteredfields", "destinationtablekmskeyname",
    }
)  # fmt: skip
"""The options read here (lower case), besides ``bigQueryTableLabel.<key>``."""


@dataclass(frozen=True)
class IntegerRange:
    start: int
    end: int
    interval: int


@dataclass(frozen=True)
class TableCreation:
    """What a write may do about a missing table, and the table it would create."""

    disposition: Disposition = "CREATE_IF_NEEDED"
    partition_field: str | None = None
    partition_type: str | None = None
    """A time partitioning's granularity; None for an integer range, or none at all."""
    partition_expiration_ms: int | None = None
    integer_range: IntegerRange | None = None
    clustered: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = field(default=())
    kms_key: str | None = None


def is_creation_option(key: str) -> bool:
    """Whether ``key`` (lower case) is one :func:`table_creation` reads."""
    return key in OPTIONS or key.startswith(LABEL_PREFIX)


def table_creation(options: Mapping[str, str]) -> TableCreation:
    """The table options of a write (lower-case keys); a wrong one raises
    :class:`SinkOptionError` naming it. The columns they name are checked against the
    DataFrame when the table is created (:func:`ensure_table`)."""
    disposition = options.get("createdisposition", "CREATE_IF_NEEDED").strip().upper()
    if disposition not in DISPOSITIONS:
        raise SinkOptionError(
            "createDisposition", f"{disposition!r} is not one of {', '.join(DISPOSITIONS)}"
        )
    partition_field = _column(options, "partitionfield", "partitionField")
    partition_type = options.get("partitiontype", "").strip().upper() or None
    if partition_type is not None and partition_type not in TIME_PARTITION_TYPES:
        raise SinkOptionError(
            "partitionType", f"{partition_type!r} is not one of {', '.join(TIME_PARTITION_TYPES)}"
        )
    integer_range = _integer_range(options)
    if integer_range is not None:
        if partition_field is None:
            raise SinkOptionError(
                "partitionRangeStart", "integer-range partitioning needs partitionField (INT64)"
            )
        if partition_type is not None:
            raise SinkOptionError(
                "partitionType", "a table is partitioned by time or by an integer range, not both"
            )
    elif partition_field is not None and partition_type is None:
        partition_type = "DAY"  # the connector's default with a field
    expiration = _positive(options, "partitionexpirationms", "partitionExpirationMs")
    if expiration is not None and partition_type is None:
        raise SinkOptionError(
            "partitionExpirationMs", "applies to a time-partitioned table: give partitionType"
        )
    clustered = tuple(
        name.strip() for name in options.get("clusteredfields", "").split(",") if name.strip()
    )
    if len(clustered) > MAX_CLUSTERING_COLUMNS:
        raise SinkOptionError(
            "clusteredFields",
            f"{len(clustered)} columns: BigQuery clusters by at most {MAX_CLUSTERING_COLUMNS}",
        )
    for name in clustered:
        if not COLUMN_NAME_RE.match(name):
            raise SinkOptionError("clusteredFields", f"{name!r} is not a column name")
    kms_key = options.get("destinationtablekmskeyname", "").strip() or None
    if kms_key is not None and not _KMS_RE.match(kms_key):
        raise SinkOptionError(
            "destinationTableKmsKeyName",
            f"{kms_key!r} is not projects/P/locations/L/keyRings/R/cryptoKeys/K",
        )
    return TableCreation(
        disposition=disposition,
        partition_field=partition_field,
        partition_type=partition_type,
        partition_expiration_ms=expiration,
        integer_range=integer_range,
        clustered=clustered,
        labels=_labels(options),
        kms_key=kms_key,
    )


def ensure_table(
    config: BigQueryConfig, table_id: str, creation: TableCreation, arrow_schema: pa.Schema
) -> list[SchemaField]:
    """The schema of ``table_id``, created first from ``arrow_schema`` when it is missing
    and the disposition allows it."""
    from google.api_core.exceptions import Conflict, NotFound

    from onceover_jobs.sink.rows.schema import rest_client

    client = rest_client(config)
    try:
        return list(client.get_table(table_id).schema)
    except NotFound as exc:
        if creation.disposition == "CREATE_NEVER":
            raise TableNotFoundError(
                f"table {table_id} does not exist ({exc.message}), and createDisposition is "
                "CREATE_NEVER; create it, or leave the option out to have the write create "
                "it from the DataFrame"
            ) from exc
    table = new_table(table_id, creation, arrow_schema)
    try:
        client.create_table(table)
        logger.warning("onceover: created table %s from the DataFrame's schema", table_id)
    except Conflict:
        pass  # another driver created it first: checked below like any table
    except NotFound as exc:
        raise TableNotFoundError(
            f"table {table_id} cannot be created: {exc.message} (the dataset must exist; "
            "the sink creates tables, never datasets)"
        ) from exc
    return list(client.get_table(table_id).schema)


def new_table(table_id: str, creation: TableCreation, arrow_schema: pa.Schema) -> Table:
    """The table :func:`ensure_table` creates: the DataFrame's schema, the options' shape."""
    from google.cloud import bigquery

    from onceover_jobs.sink.rows.schema import bigquery_schema_from_arrow

    schema = bigquery_schema_from_arrow(arrow_schema, table=table_id)
    columns = {column.name.casefold(): column for column in schema}
    table = bigquery.Table(table_id, schema=schema)
    if creation.partition_field is not None:
        column = _top_level(columns, creation.partition_field, "partitionField")
        by_range = creation.integer_range is not None
        kinds = ("INT64", "INTEGER") if by_range else ("DATE", "TIMESTAMP", "DATETIME")
        if column.field_type.upper() not in kinds or column.mode == "REPEATED":
            takes = "an INT64" if by_range else "a DATE, TIMESTAMP or DATETIME"
            raise SinkOptionError(
                "partitionField",
                f"{creation.partition_field!r} is {column.mode} {column.field_type}; "
                f"partitioning by {'an integer range' if by_range else 'time'} takes {takes} "
                "top-level column",
            )
    if creation.integer_range is not None:
        bounds = creation.integer_range
        table.range_partitioning = bigquery.RangePartitioning(
            field=creation.partition_field,
            range_=bigquery.PartitionRange(
                start=bounds.start, end=bounds.end, interval=bounds.interval
            ),
        )
    elif creation.partition_type is not None:
        table.time_partitioning = bigquery.TimePartitioning(
            type_=creation.partition_type,
            field=creation.partition_field,
            expiration_ms=creation.partition_expiration_ms,
        )
    if creation.clustered:
        for name in creation.clustered:
            column = _top_level(columns, name, "clusteredFields")
            if column.mode == "REPEATED" or column.field_type.upper() in _UNCLUSTERABLE:
                raise SinkOptionError(
                    "clusteredFields",
                    f"{name!r} is {column.mode} {column.field_type}: a table is clustered by "
                    "top-level columns that are not repeated, RECORD, JSON, FLOAT64 or RANGE",
                )
        table.clustering_fields = [columns[name.casefold()].name for name in creation.clustered]
    if creation.labels:
        table.labels = dict(creation.labels)
    if creation.kms_key is not None:
        table.encryption_configuration = bigquery.EncryptionConfiguration(
            kms_key_name=creation.kms_key
        )
    return table


_UNCLUSTERABLE = frozenset({"RECORD", "STRUCT", "JSON", "FLOAT64", "FLOAT", "RANGE"})
"""What BigQuery's clustering refuses ("Clustering columns must be top-level,
non-repeated columns" of types other than these)."""


def _top_level(columns: Mapping[str, SchemaField], name: str, option: str) -> SchemaField:
    column = columns.get(name.casefold())
    if column is None:
        raise SinkOptionError(
            option, f"{name!r} is not a column of the DataFrame (the table is created from it)"
        )
    return column


def _column(options: Mapping[str, str], key: str, option: str) -> str | None:
    text = options.get(key, "").strip() or None
    if text is not None and not COLUMN_NAME_RE.match(text):
        raise SinkOptionError(option, f"{text!r} is not a column name")
    return text


def _whole(options: Mapping[str, str], key: str, option: str) -> int | None:
    text = options.get(key, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise SinkOptionError(option, f"{text!r} is not a whole number") from None


def _positive(options: Mapping[str, str], key: str, option: str) -> int | None:
    value = _whole(options, key, option)
    if value is not None and value <= 0:
        raise SinkOptionError(option, f"{value} is not a positive number")
    return value


def _integer_range(options: Mapping[str, str]) -> IntegerRange | None:
    names = {
        "partitionrangestart": "partitionRangeStart",
        "partitionrangeend": "partitionRangeEnd",
        "partitionrangeinterval": "partitionRangeInterval",
    }
    given = {key: _whole(options, key, name) for key, name in names.items()}
    missing = [names[key] for key, value in given.items() if value is None]
    if len(missing) == len(names):
        return None
    if missing:
        raise SinkOptionError(missing[0], "integer-range partitioning needs all three options")
    start, end, interval = (int(given[key] or 0) for key in names)  # none is None here
    if interval <= 0 or end <= start:
        raise SinkOptionError(
            "partitionRangeInterval",
            f"start {start}, end {end}, interval {interval}: the end must be past the start "
            "and the interval positive",
        )
    return IntegerRange(start, end, interval)


def _labels(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    labels: list[tuple[str, str]] = []
    for key, value in sorted(options.items()):
        if not key.startswith(LABEL_PREFIX):
            continue
        name, text = key[len(LABEL_PREFIX) :], value.strip()
        option = f"bigQueryTableLabel.{name}"
        if not _LABEL_KEY_RE.match(name):
            raise SinkOptionError(
                option,
                "a label's key is 1-63 lowercase letters, digits, '_' or '-', a letter first",
            )
        if not _LABEL_VALUE_RE.match(text):
            raise SinkOptionError(
                option,
                f"{text!r}: a label's value is up to 63 lowercase letters, digits, '_' or '-'",
            )
        labels.append((name, text))
    return tuple(labels)
