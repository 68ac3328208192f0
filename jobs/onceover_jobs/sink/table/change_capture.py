"""A CDC write checked on the driver: a DataFrame with ``_CHANGE_TYPE`` is one.

BigQuery applies changes (UPSERT and DELETE by the table's primary key) under its rules
("Stream table updates with change data capture"): only on the ``_default`` stream, only
in the protobuf format ("The Apache Arrow format isn't supported"), only into a table
that declares a primary key ("Composite primary keys containing up to 16 columns are
supported"). Each is checked here, before a row is sent, and refused naming the option
or the column; what a row must be (its key columns set, its change type, its sequence
number) each task checks of its rows (onceover_jobs.sink.rows.change_capture).

The mode: the connector's ``writeAtLeastOnce=true`` (or ``mode=default``). It is at least
once on the wire, and the sink's sequence numbers make a replay converge to the same
table (the exactly-once *effect*); no mode is chosen for the user, so that a job moved
from the connector reads as it did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceover.modes import AT_LEAST_ONCE_MODE, traits_of
from onceover_jobs.sink.errors import SinkOptionError, TableNotFoundError
from onceover_jobs.sink.rows.change_capture import (
    CHANGE_SEQUENCE_NUMBER,
    CHANGE_TYPE,
    MAX_KEY_COLUMNS,
    ChangeCapture,
    pseudo_columns,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pyarrow as pa

    from onceover.bigquery import BigQueryConfig

NOTHING_WRITTEN = "Nothing was written"


def change_capture_of(
    config: BigQueryConfig,
    table_id: str,
    arrow_schema: pa.Schema,
    raw_options: Mapping[str, str],
    *,
    mode: str,
    date_partition: str | None,
    overwrite: bool,
) -> tuple[ChangeCapture | None, pa.Schema]:
    """The write's CDC (None for a plain append) and the DataFrame's schema without the
    pseudo-columns, which are no columns of the table (nor of one the write creates)."""
    import pyarrow as pa

    found = pseudo_columns(arrow_schema.names)
    if not found:
        return None, arrow_schema
    if CHANGE_TYPE not in found:
        raise SinkOptionError(
            found[CHANGE_SEQUENCE_NUMBER],
            f"a {CHANGE_SEQUENCE_NUMBER} without {CHANGE_TYPE}: a change data capture write "
            f"needs each row's {CHANGE_TYPE} (UPSERT or DELETE). {NOTHING_WRITTEN}",
        )
    for pseudo, column in found.items():
        if not pa.types.is_string(arrow_schema.field(column).type) and not (
            pa.types.is_large_string(arrow_schema.field(column).type)
        ):
            raise SinkOptionError(column, f"{pseudo} must be a string column. {NOTHING_WRITTEN}")
    _check_write(mode, date_partition, raw_options, overwrite=overwrite)
    key = _primary_key(config, table_id)
    names = {name.casefold(): name for name in arrow_schema.names}
    missing = [column for column in key if column.casefold() not in names]
    if missing:
        raise SinkOptionError(
            missing[0],
            f"{table_id}'s primary key is ({', '.join(key)}); the DataFrame lacks "
            f"{', '.join(missing)}: every change names its row by the whole key. "
            f"{NOTHING_WRITTEN}",
        )
    capture = ChangeCapture(
        key=key,
        change_type=found[CHANGE_TYPE],
        sequence_number=found.get(CHANGE_SEQUENCE_NUMBER),
    )
    kept = [f for f in arrow_schema if f.name not in found.values()]
    return capture, pa.schema(kept, metadata=arrow_schema.metadata)


def _check_write(
    mode: str, date_partition: str | None, raw: Mapping[str, str], *, overwrite: bool
) -> None:
    if traits_of(mode).stream_type != "DEFAULT":
        raise SinkOptionError(
            "writeAtLeastOnce",
            f"the DataFrame has {CHANGE_TYPE}: a change data capture write, which BigQuery "
            f"applies only on the table's _default stream, not in mode {mode!r}. "
            "Give .option('writeAtLeastOnce', 'true') (or "
            f".option('mode', '{AT_LEAST_ONCE_MODE}')): the sink's sequence numbers make a "
            f"retry or a replay change nothing twice. {NOTHING_WRITTEN}",
        )
    if overwrite:
        raise SinkOptionError(
            "mode",
            f"mode('overwrite') with {CHANGE_TYPE}: changes are applied to the rows there, "
            f"not a replacement of them; write them with mode('append'). {NOTHING_WRITTEN}",
        )
    if date_partition is not None:
        raise SinkOptionError("datePartition", f"not with {CHANGE_TYPE}. {NOTHING_WRITTEN}")
    given = {key.lower(): value for key, value in raw.items()}.get("row_format")
    if given is not None and given.strip().lower() == "arrow":
        raise SinkOptionError(
            "row_format",
            "'arrow' with change data capture: BigQuery takes changes only as proto rows "
            f'("The Apache Arrow format isn\'t supported"); leave the option out. '
            f"{NOTHING_WRITTEN}",
        )


def _primary_key(config: BigQueryConfig, table_id: str) -> tuple[str, ...]:
    """The table's primary key columns; refused when the table has none (or is missing)."""
    from google.api_core.exceptions import NotFound

    from onceover_jobs.sink.rows.schema import rest_client

    try:
        table = rest_client(config).get_table(table_id)
    except NotFound as exc:
        raise TableNotFoundError(
            f"table {table_id} does not exist ({exc.message}): a change data capture write "
            "needs a table with a primary key; create it first, e.g. CREATE TABLE ... "
            f"(..., PRIMARY KEY (id) NOT ENFORCED). {NOTHING_WRITTEN}"
        ) from exc
    constraints = table.table_constraints
    key = constraints.primary_key if constraints is not None else None
    columns = tuple(key.columns) if key is not None and key.columns else ()
    if not columns:
        raise SinkOptionError(
            "table",
            f"{table_id} has no primary key, which BigQuery applies changes by: "
            f"ALTER TABLE `{table_id}` ADD PRIMARY KEY (<columns>) NOT ENFORCED. "
            f"{NOTHING_WRITTEN}",
        )
    if len(columns) > MAX_KEY_COLUMNS:
        raise SinkOptionError(
            "table",
            f"{table_id}'s primary key has {len(columns)} columns; BigQuery applies changes "
            f"by a key of at most {MAX_KEY_COLUMNS}. {NOTHING_WRITTEN}",
        )
    by_name = {field.name.casefold(): field.name for field in table.schema}
    unknown = [c for c in columns if c.casefold() not in by_name]
    if unknown:
        raise SinkOptionError(
            "table", f"{table_id}'s primary key names {', '.join(unknown)}, not its columns"
        )
    return tuple(by_name[c.casefold()] for c in columns)
