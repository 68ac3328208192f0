"""Which DataFrame columns fit which BigQuery columns, and the Arrow sent for them.

On the driver, :func:`load_table_schema` reads the target table and :func:`plan_write`
checks the DataFrame against it, naming every problem at once, and returns a
:class:`WritePlan`. On the executors, :func:`to_bigquery_arrow` turns each Arrow batch
Spark hands the sink into the batch sent in ``AppendRowsRequest.arrow_rows``. The load
job's ``--create-table`` uses :func:`bigquery_schema_from_arrow`.

The mapping (Spark type, the Arrow type Spark hands over, the BigQuery column type, the
Arrow type sent; the sent types are those of Google's "Supported Apache Arrow data
types" for the Storage Write API; ``docs/guides/types.md`` has the same table)::

    Spark                 Arrow from Spark        BigQuery     Arrow sent
    string                string / large_string   STRING       string
    binary                binary / large_binary   BYTES        binary
    byte/short/int/long   int8/16/32/64           INT64        int64
    float, double         float32, float64        FLOAT64      float64
    boolean               bool                    BOOL         bool
    decimal(p,s)          decimal128(p,s)         NUMERIC      decimal128(38, 9)
                          (s <= 9, p-s <= 29)
    decimal(p,s)          decimal128(p,s)         BIGNUMERIC   decimal256(76, 38)
    byte/short/int/long   int8/16/32/64           NUMERIC,     as above
                                                  BIGNUMERIC
    date                  date32                  DATE         date32
    timestamp             timestamp[us, tz]       TIMESTAMP    timestamp[us, tz=UTC]
    timestamp_ntz         timestamp[us]           DATETIME     timestamp[us]
    string (DATETIME      string / large_string   DATETIME     timestamp[us], parsed
      text)                                                    when the request is
                                                               encoded
    array<T>              list<T>                 REPEATED T   list<T sent>
    struct<...>           struct<...>             RECORD       struct<...>, recursively
    map<K,V>              map<K, V>               REPEATED     list<struct<key, value>>
                                                  RECORD<key,
                                                  value>
    string (JSON text)    string / large_string   JSON         string
    string (WKT)          string / large_string   GEOGRAPHY    string
    struct<start: T,      struct<start, end>      RANGE<T>     struct<start: T sent,
      end: T>                                                    end: T sent>
    (T: date, timestamp_ntz or timestamp for RANGE<DATE>, <DATETIME>, <TIMESTAMP>)

Rules the checks enforce:

* Names match case-insensitively, as BigQuery's do; the batch sent uses the table's
  spelling and order. Table columns (and RECORD sub-fields) the DataFrame lacks are not
  sent and BigQuery fills them with NULL, unless they are REQUIRED, which fails the plan.
* A nullable DataFrame column may feed a REQUIRED column: BigQuery rejects an actual
  NULL at append time.
* A decimal that could hold values NUMERIC cannot (more than 9 decimal places or 29
  integer digits) fails the plan; BIGNUMERIC takes any Spark decimal.
* ``timestamp`` (an instant) goes only to TIMESTAMP and ``timestamp_ntz`` (a wall-clock
  time) only to DATETIME: anything else would shift values by a time zone silently.
* A string column goes to a DATETIME column as the spark-bigquery-connector takes it: the
  text, read as BigQuery reads a DATETIME literal (``YYYY-[M]M-[D]D[( |T)[H]H:[M]M:[S]S[.F]]``),
  is sent as that civil time, no time zone applied; a text that is none is a row refused,
  named, and set aside with a dead-letter table (``onceover_jobs.sink.rows.datetime_text``).
  Only a whole column: a DATETIME inside a RECORD, an array or a RANGE takes ``timestamp_ntz``.
* Only arrays feed REPEATED columns and arrays feed nothing else. An array of arrays
  has no BigQuery type. A NULL array is sent as an empty one (BigQuery stores NULL
  arrays as empty); a NULL element inside an array cannot be stored and fails the
  batch, naming the column.
* A map goes where Google's spark-bigquery-connector puts one: a REPEATED RECORD with
  the fields ``key`` and ``value`` (matched like any RECORD's fields), one element per
  entry in the map's order; a NULL map is sent as an empty array, as NULL arrays are.
* JSON and GEOGRAPHY columns take text from string columns, which BigQuery parses: JSON
  text and WKT. The text is not parsed here: a Python parse costs ~200 times the
  conversion, would fail the whole batch where a dead-letter table sets only the bad
  rows aside, and could not match BigQuery's rules exactly. BigQuery refuses what does
  not parse when it is appended, and the sink names refused rows (``row_errors``) and,
  with a dead-letter table, sets them aside (``onceover_jobs.sink.rows.dead_letter``).
* A RANGE<T> column takes a struct of exactly the fields ``start`` and ``end``, each of
  a type T takes (the time rules below hold); a NULL bound is an unbounded one.
* Columns of other BigQuery types (TIME, INTERVAL) are not written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from onceover_jobs.sink.errors import SchemaMismatchError, TableNotFoundError
from onceover_jobs.sink.rows import datetime_text
from onceover_jobs.sink.rows.plan import WritePlan

if TYPE_CHECKING:
    from google.cloud import bigquery
    from google.cloud.bigquery import SchemaField

    from onceover.bigquery import BigQueryConfig

NUMERIC = pa.decimal128(38, 9)
BIGNUMERIC = pa.decimal256(76, 38)
NUMERIC_SCALE, NUMERIC_INTEGER_DIGITS = 9, 29
BIGNUMERIC_SCALE, BIGNUMERIC_INTEGER_DIGITS = 38, 38

# The Arrow type each BigQuery column type is sent as.
TARGET_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "BYTES": pa.binary(),
    "INT64": pa.int64(),
    "FLOAT64": pa.float64(),
    "BOOL": pa.bool_(),
    "NUMERIC": NUMERIC,
    "BIGNUMERIC": BIGNUMERIC,
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "DATETIME": pa.timestamp("us"),
    # Text BigQuery parses itself (Google's Arrow ingestion table: JSON and GEOGRAPHY
    # as Utf8, the geography as WKT).
    "JSON": pa.string(),
    "GEOGRAPHY": pa.string(),
}
RANGE_ELEMENTS = ("DATE", "DATETIME", "TIMESTAMP")
"""The element types a BigQuery RANGE can have."""
RANGE_BOUNDS = ("start", "end")
"""A RANGE's fields, as BigQuery's Arrow and proto ingestion name them, in this order."""
MAP_FIELDS = ("key", "value")
"""The RECORD fields a map's entries go to (the spark-bigquery-connector's names)."""

# The REST API reports the legacy names (INTEGER, FLOAT, BOOLEAN, RECORD); DDL and
# users may say either, and DECIMAL/BIGDECIMAL are aliases.
_TYPE_ALIASES = {
    "INTEGER": "INT64",
    "FLOAT": "FLOAT64",
    "BOOLEAN": "BOOL",
    "STRUCT": "RECORD",
    "DECIMAL": "NUMERIC",
    "BIGDECIMAL": "BIGNUMERIC",
}


def load_table_schema(config: BigQueryConfig, table_id: str) -> list[SchemaField]:
    """The schema of ``table_id`` (``project.dataset.table``); it must exist."""
    from google.api_core.exceptions import NotFound

    try:
        table = rest_client(config).get_table(table_id)
    except NotFound as exc:
        raise TableNotFoundError(
            f"table {table_id} does not exist ({exc.message}); create it first, for "
            "example with the load job's --create-table"
        ) from exc
    return list(table.schema)


_rest_clients: dict[tuple[int, BigQueryConfig], bigquery.Client] = {}


def rest_client(config: BigQueryConfig) -> bigquery.Client:
    """The REST client of this process for ``config``, kept: the driver plans each write
    in a Python worker Spark reuses, and a client made per write paid its credentials and
    a new connection every time (docs/journal/profiling.md). Keyed by the process, so a forked
    child makes its own."""
    from onceover.bigquery import bigquery_client

    key = (os.getpid(), config)
    client = _rest_clients.get(key)
    if client is None:
        client = _rest_clients[key] = bigquery_client(config)
    return client


def plan_write(
    table_id: str,
    arrow_schema: pa.Schema,
    table_schema: list[SchemaField],
    *,
    defaults: bool = False,
) -> WritePlan:
    """Check the DataFrame's ``arrow_schema`` against the table's; raise naming every problem.

    Raises :class:`SchemaMismatchError` listing each column at fault (nested ones as
    ``address.city``): REQUIRED columns missing (unless ``defaults``, the write asking
    for the columns' defaults, and the column has one), columns the table lacks, types
    that do not fit, arrays against non-REPEATED columns and the reverse.
    """
    problems: list[str] = []
    fields = _plan_fields(list(arrow_schema), table_schema, "", problems, defaults=defaults)
    if not problems and not fields:
        problems.append("the DataFrame has no columns")
    if problems:
        raise SchemaMismatchError(table_id, problems)
    return WritePlan(table_id, pa.schema(fields).serialize().to_pybytes())


def to_bigquery_arrow(batch: pa.RecordBatch, plan: WritePlan) -> pa.RecordBatch:
    """``batch`` as the request's Arrow: the plan's names and types, column by column.

    Vectorised (Arrow casts and compute kernels only). Raises
    :class:`SchemaMismatchError` for a NULL element inside an array, which no REPEATED
    column can store.
    """
    schema = plan.arrow_schema
    index = {name.casefold(): i for i, name in enumerate(batch.schema.names)}
    columns = []
    for field in schema:
        i = index.get(field.name.casefold())
        if i is None:  # the batch is not of the DataFrame the plan was made for
            raise SchemaMismatchError(plan.table, [f"column {field.name!r} is not in the batch"])
        columns.append(_convert(batch.column(i), field.type, field.name, plan.table))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def bigquery_schema_from_arrow(
    arrow_schema: pa.Schema, *, table: str = "a new table"
) -> list[SchemaField]:
    """The BigQuery schema a table created for this DataFrame gets.

    Non-nullable columns become REQUIRED, arrays REPEATED, structs RECORD; a decimal
    becomes NUMERIC when all its values fit, else BIGNUMERIC. Raises
    :class:`SchemaMismatchError` naming every column BigQuery cannot hold (arrays of
    arrays, maps, ...); ``table`` is the name the message uses.
    """
    problems: list[str] = []
    fields = _schema_fields(list(arrow_schema), "", problems)
    if problems:
        raise SchemaMismatchError(table, problems)
    return fields


# -- planning -----------------------------------------------------------------------


def _plan_fields(
    sources: list[pa.Field],
    table_fields: Sequence[SchemaField],
    prefix: str,
    problems: list[str],
    *,
    defaults: bool = False,
) -> list[pa.Field]:
    """The sent fields for ``sources`` against ``table_fields``, in the table's order."""
    by_name = {f.name.casefold(): f for f in table_fields}
    seen: dict[str, str] = {}
    planned: dict[str, pa.Field] = {}
    for source in sources:
        key, path = source.name.casefold(), prefix + source.name
        if key in seen:
            problems.append(
                f"columns {prefix + seen[key]!r} and {path!r} are the same column to "
                "BigQuery, whose names are case-insensitive"
            )
            continue
        seen[key] = source.name
        column = by_name.get(key)
        if column is None:
            problems.append(f"column {path!r} ({_describe(source.type)}) is not in the table")
            continue
        target = _plan_field(path, source.type, column, problems, whole=not prefix)
        if target is not None:
            # Nullable even for REQUIRED columns, as in Google's Arrow sample: a NULL is
            # BigQuery's to reject, and must not make the batch invalid Arrow.
            planned[key] = pa.field(column.name, target)
            if _bq_type(column) == "DATETIME" and pa.types.is_string(target):
                if datetime_text.parser_missing():
                    problems.append(
                        f"column {path!r} (string) feeds a DATETIME: the text is parsed "
                        "with numpy, which is not installed (pip install numpy on the "
                        "driver and executors), or give the column as timestamp_ntz"
                    )
                    continue
                planned[key] = datetime_text.marked(planned[key])  # sent as DATETIME
    for column in table_fields:
        filled = defaults and bool(getattr(column, "default_value_expression", None))
        if _mode(column) == "REQUIRED" and column.name.casefold() not in seen and not filled:
            problems.append(
                f"column {prefix + column.name!r} is REQUIRED in the table but the "
                "DataFrame does not have it"
            )
    return [planned[key] for key in by_name if key in planned]


def _plan_field(
    path: str, source: pa.DataType, column: SchemaField, problems: list[str], *, whole: bool
) -> pa.DataType | None:
    """The sent type of ``column`` fed by ``source``, or None after adding the problem;
    ``whole``: a column of the table, not a RECORD's field."""
    if _mode(column) == "REPEATED" and pa.types.is_map(source):
        if _bq_type(column) != "RECORD":
            problems.append(
                f"column {path!r} is a map ({_describe(source)}) but the table column is "
                f"REPEATED {_bq_type(column)}; a map goes to a REPEATED RECORD column with "
                "the fields key and value"
            )
            return None
        # Planned as what it is sent as: its entries, an array of key/value structs.
        source = _map_entries_type(source)
    if _mode(column) == "REPEATED":
        if not _is_list(source):
            problems.append(
                f"column {path!r} ({_describe(source)}) is not an array but the table "
                f"column is REPEATED {_bq_type(column)}"
            )
            return None
        if _is_list(source.value_type) or pa.types.is_map(source.value_type):
            problems.append(_array_of_arrays(path, source))
            return None
        element = _plan_value(path, source.value_type, column, problems)
        return None if element is None else pa.list_(element)
    if _is_list(source):
        problems.append(
            f"column {path!r} is an array ({_describe(source)}) but the table column is "
            f"{_bq_type(column)} {_mode(column)}, not REPEATED"
        )
        return None
    return _plan_value(path, source, column, problems, whole=whole)


def _plan_value(
    path: str, source: pa.DataType, column: SchemaField, problems: list[str], *, whole: bool = False
) -> pa.DataType | None:
    bq_type = _bq_type(column)
    if whole and bq_type == "DATETIME" and _is_text(source):
        return pa.string()  # parsed when sent (onceover_jobs.sink.rows.datetime_text)
    if bq_type == "RANGE":
        return _plan_range(path, source, column, problems)
    if bq_type == "RECORD" and pa.types.is_struct(source):
        members = [source.field(i) for i in range(source.num_fields)]
        if not members:
            problems.append(f"column {path!r} is a struct without fields")
            return None
        children = _plan_fields(members, column.fields, f"{path}.", problems)
        return pa.struct(children) if children else None
    why = _unfit(source, bq_type)
    if why is not None:
        problems.append(f"column {path!r}: {_describe(source)} cannot be written to {bq_type}{why}")
        return None
    return TARGET_TYPES[bq_type]


def _plan_range(
    path: str, source: pa.DataType, column: SchemaField, problems: list[str]
) -> pa.DataType | None:
    """``struct<start: T, end: T>`` (T sent as BigQuery's T) for a RANGE<T> column."""
    element = _range_element(column)
    if element not in RANGE_ELEMENTS:
        problems.append(
            f"column {path!r} is a RANGE of {element or 'no element type'}, not of "
            "DATE, DATETIME or TIMESTAMP"
        )
        return None
    name = f"RANGE<{element}>"
    members = (
        [source.field(i) for i in range(source.num_fields)] if pa.types.is_struct(source) else []
    )
    bounds = {member.name.casefold(): member for member in members}
    if len(members) != len(RANGE_BOUNDS) or set(bounds) != set(RANGE_BOUNDS):
        problems.append(
            f"column {path!r}: {_describe(source)} cannot be written to {name}: a RANGE is "
            f"written from a struct of exactly two fields, start and end, of a type "
            f"{element} takes (a NULL bound is unbounded)"
        )
        return None
    fits = True
    for bound in RANGE_BOUNDS:
        member = bounds[bound]
        why = _unfit(member.type, element)
        if why is not None:
            problems.append(
                f"column {path + '.' + member.name!r}: {_describe(member.type)} cannot be "
                f"written to the {bound} of {name}{why}"
            )
            fits = False
    if not fits:
        return None
    return pa.struct([pa.field(bound, TARGET_TYPES[element]) for bound in RANGE_BOUNDS])


_t = pa.types
# The Arrow types Onceover writes to each BigQuery type (checked further for decimals
# and time zones in _unfit).
_ACCEPTS: dict[str, tuple[Callable[[pa.DataType], bool], ...]] = {
    "STRING": (_t.is_string, _t.is_large_string),
    "BYTES": (_t.is_binary, _t.is_large_binary, _t.is_fixed_size_binary),
    "INT64": (_t.is_signed_integer,),
    "FLOAT64": (_t.is_float32, _t.is_float64),
    "BOOL": (_t.is_boolean,),
    "NUMERIC": (_t.is_signed_integer, _t.is_decimal),
    "BIGNUMERIC": (_t.is_signed_integer, _t.is_decimal),
    "DATE": (_t.is_date32, _t.is_date64),
    "TIMESTAMP": (_t.is_timestamp,),
    "DATETIME": (_t.is_timestamp,),
    "JSON": (_t.is_string, _t.is_large_string),
    "GEOGRAPHY": (_t.is_string, _t.is_large_string),
}
_MAP_HINT = (
    ": BigQuery has no map type; a map goes to a REPEATED RECORD column with the fields "
    "key and value"
)
_NEW_MAP_HINT = (
    ": BigQuery has no map type; create the column as a REPEATED RECORD with the fields "
    "key and value, which takes the map as it is, or make it an array of key/value "
    "structs with map_entries()"
)
_TEXT_HINTS = {
    "JSON": ": a JSON column takes JSON text from a string column; to_json() makes it",
    "GEOGRAPHY": ": a GEOGRAPHY column takes WKT text from a string column",
}


def _unfit(source: pa.DataType, bq_type: str) -> str | None:
    """None when an Arrow ``source`` column can be written to ``bq_type``, else why not
    (an empty string when the types simply differ)."""
    if not any(predicate(source) for predicate in _ACCEPTS.get(bq_type, ())):
        return _mismatch_hint(source, bq_type)
    if _t.is_decimal(source):
        return _decimal_unfit(source, bq_type)
    if bq_type == "TIMESTAMP" and source.tz is None:
        return (
            ": timestamp_ntz has no time zone; write it to a DATETIME column, or make "
            "it an instant first (to_utc_timestamp, or cast to timestamp)"
        )
    if bq_type == "DATETIME" and source.tz is not None:
        return (
            ": a timestamp is an instant, DATETIME a wall-clock time; write it to a "
            "TIMESTAMP column, or cast it to timestamp_ntz first"
        )
    return None


def _mismatch_hint(source: pa.DataType, bq_type: str) -> str:
    """What to do when ``source`` is not a type ``bq_type`` takes ("" if nothing helps)."""
    if bq_type not in _ACCEPTS and bq_type != "RECORD":
        return f": Onceover does not write BigQuery {bq_type} columns"
    if bq_type == "JSON" and (_t.is_map(source) or _t.is_struct(source)):
        return (
            ": Onceover does not write BigQuery JSON columns from a map or struct, only "
            "from JSON text in a string column; to_json() makes it"
        )
    if bq_type in _TEXT_HINTS:
        return _TEXT_HINTS[bq_type]
    if bq_type == "DATETIME" and _is_text(source):
        return (
            ": text goes to a DATETIME column of the table, not inside a RECORD, an array "
            "or a RANGE; make it timestamp_ntz first (to_timestamp_ntz())"
        )
    return _MAP_HINT if _t.is_map(source) else ""


def _decimal_unfit(source: pa.DataType, bq_type: str) -> str | None:
    max_scale, max_integer = (
        (NUMERIC_SCALE, NUMERIC_INTEGER_DIGITS)
        if bq_type == "NUMERIC"
        else (BIGNUMERIC_SCALE, BIGNUMERIC_INTEGER_DIGITS)
    )
    scale, integer_digits = source.scale, source.precision - source.scale
    if scale <= max_scale and integer_digits <= max_integer:
        return None
    hint = "; use a BIGNUMERIC column" if bq_type == "NUMERIC" else ""
    return (
        f": {bq_type} holds at most {max_scale} decimal places and {max_integer} integer "
        f"digits, decimal({source.precision},{source.scale}) has {scale} and "
        f"{integer_digits}{hint}"
    )


# -- converting ---------------------------------------------------------------------


def _convert(array: pa.Array, target: pa.DataType, path: str, table: str) -> pa.Array:
    if pa.types.is_struct(target):
        source = array.type
        index = {source.field(i).name.casefold(): i for i in range(source.num_fields)}
        # StructArray.field() is already sliced like the parent; the parent's NULLs
        # are carried over by the mask.
        children = [
            _convert(array.field(index[f.name.casefold()]), f.type, f"{path}.{f.name}", table)
            for f in target
        ]
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        if pa.types.is_map(array.type):
            array = _map_entries(array)
        return _convert_list(array, target, path, table)
    return array if array.type == target else array.cast(target)


def _map_entries(array: pa.MapArray) -> pa.ListArray:
    """``array`` as the list of its entries, structs of ``key`` and ``value``.

    The same buffers seen as a list (a map is a list of entry structs in Arrow): no
    copy, the slice offset and NULL maps kept, and whatever names the map gave its key
    and value replaced by BigQuery's.
    """
    entries = array.values  # every entry, the array's slice offset not applied
    list_type = _map_entries_type(array.type)
    pairs = pa.StructArray.from_arrays(
        [entries.field(0), entries.field(1)], fields=list(list_type.value_type)
    )
    validity, offsets = array.buffers()[:2]
    return pa.Array.from_buffers(
        list_type, len(array), [validity, offsets], array.null_count, array.offset, [pairs]
    )


def _convert_list(array: pa.Array, target: pa.DataType, path: str, table: str) -> pa.Array:
    values = pc.list_flatten(array)  # the elements of the non-NULL arrays, in order
    if values.null_count:
        rows = pc.filter(pc.list_parent_indices(array), values.is_null())
        raise SchemaMismatchError(
            table,
            [
                f"column {path!r} has an array with a NULL element (row {rows[0].as_py()} "
                "of the batch), which a REPEATED column cannot store; drop NULL elements "
                f"first, e.g. with array_compact({path})"
            ],
        )
    # Rebuilt from the lengths rather than reusing the offsets: a sliced or large list
    # and the NULL arrays (sent as empty ones) then all come out as a plain list.
    lengths = pc.fill_null(pc.list_value_length(array), 0).cast(pa.int32())
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths)])
    elements = _convert(values, target.value_type, path, table)
    return pa.ListArray.from_arrays(offsets, elements, type=target)


# -- creating -----------------------------------------------------------------------

# The column type a new table gets, first fit wins: integers are INT64, not NUMERIC.
_CREATE_ORDER = (
    "STRING", "BYTES", "INT64", "FLOAT64", "BOOL", "NUMERIC", "BIGNUMERIC", "DATE",
    "TIMESTAMP", "DATETIME",
)  # fmt: skip


def _schema_fields(fields: list[pa.Field], prefix: str, problems: list[str]) -> list[SchemaField]:
    made: list[SchemaField] = []
    seen: dict[str, str] = {}
    for field in fields:
        key, path = field.name.casefold(), prefix + field.name
        if key in seen:
            problems.append(
                f"columns {prefix + seen[key]!r} and {path!r} are the same column to "
                "BigQuery, whose names are case-insensitive"
            )
            continue
        seen[key] = field.name
        column = _schema_field(path, field, problems)
        if column is not None:
            made.append(column)
    return made


def _schema_field(path: str, field: pa.Field, problems: list[str]) -> SchemaField | None:
    from google.cloud.bigquery import SchemaField

    value_type, mode = field.type, ("NULLABLE" if field.nullable else "REQUIRED")
    if _is_list(value_type):
        if _is_list(value_type.value_type):
            problems.append(_array_of_arrays(path, value_type))
            return None
        value_type, mode = value_type.value_type, "REPEATED"
    if pa.types.is_struct(value_type):
        members = [value_type.field(i) for i in range(value_type.num_fields)]
        if not members:
            problems.append(f"column {path!r} is a struct without fields")
            return None
        children = _schema_fields(members, f"{path}.", problems)
        return SchemaField(field.name, "RECORD", mode=mode, fields=children)
    for bq_type in _CREATE_ORDER:
        if _unfit(value_type, bq_type) is None:
            return SchemaField(field.name, bq_type, mode=mode)
    if pa.types.is_decimal(value_type):
        why = _unfit(value_type, "BIGNUMERIC") or ""
    elif pa.types.is_map(value_type):
        why = _NEW_MAP_HINT
    elif pa.types.is_null(value_type):
        why = ": every value is NULL and Spark gave it no type; cast it to one"
    else:
        why = ""
    problems.append(f"column {path!r}: {_describe(value_type)} has no BigQuery type{why}")
    return None


# -- naming -------------------------------------------------------------------------


def _bq_type(column: SchemaField) -> str:
    name = str(column.field_type).upper()
    return _TYPE_ALIASES.get(name, name)


def standard_type(column: SchemaField) -> str:
    """A column's type by its standard SQL name (``INT64``, not the REST API's ``INTEGER``)."""
    return _bq_type(column)


def _range_element(column: SchemaField) -> str | None:
    """The element type of a RANGE column (``rangeElementType`` in the REST API)."""
    element = getattr(column.range_element_type, "element_type", None)
    return None if element is None else str(element).upper()


def _map_entries_type(map_type: pa.MapType) -> pa.ListType:
    """The type a map is sent as: a list of ``struct<key, value>``."""
    key, value = MAP_FIELDS
    return pa.list_(
        pa.struct([pa.field(key, map_type.key_type, nullable=False),
                   pa.field(value, map_type.item_type)])
    )  # fmt: skip


def _mode(column: SchemaField) -> str:
    return str(column.mode or "NULLABLE").upper()


def _is_text(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def _is_list(arrow_type: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_list(arrow_type) or t.is_large_list(arrow_type))


def _array_of_arrays(path: str, source: pa.DataType) -> str:
    if pa.types.is_map(source.value_type):
        return (
            f"column {path!r} is an array of maps ({_describe(source)}), which BigQuery "
            "cannot hold: a map is a REPEATED RECORD and a REPEATED field's elements cannot "
            "be repeated (wrap each map in a struct)"
        )
    return (
        f"column {path!r} is an array of arrays ({_describe(source)}), which BigQuery "
        "cannot hold: a REPEATED field's elements cannot be arrays (wrap the inner "
        "array in a struct)"
    )


def _describe(arrow_type: pa.DataType) -> str:
    """``Spark decimal(10,2) (Arrow decimal128(10, 2))``: both names, for messages."""
    return f"Spark {_spark_name(arrow_type)} (Arrow {arrow_type})"


_SPARK_NAMES = {
    "int8": "byte",
    "int16": "short",
    "int32": "int",
    "int64": "long",
    "float": "float",
    "double": "double",
    "bool": "boolean",
    "string": "string",
    "large_string": "string",
    "binary": "binary",
    "large_binary": "binary",
    "date32[day]": "date",
    "null": "void",
}


def _spark_name(arrow_type: pa.DataType) -> str:
    t = pa.types
    if t.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if t.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz is not None else "timestamp_ntz"
    if _is_list(arrow_type):
        return f"array<{_spark_name(arrow_type.value_type)}>"
    if t.is_map(arrow_type):
        return f"map<{_spark_name(arrow_type.key_type)},{_spark_name(arrow_type.item_type)}>"
    if t.is_struct(arrow_type):
        members = (arrow_type.field(i) for i in range(arrow_type.num_fields))
        return "struct<" + ",".join(f"{f.name}:{_spark_name(f.type)}" for f in members) + ">"
    return _SPARK_NAMES.get(str(arrow_type), str(arrow_type))
