"""Proto rows for the Storage Write API (``row_format=proto``), encoded straight from Arrow.

The sink's default is ``arrow_rows``; this module serves BigQuery projects without
Arrow ingestion. It builds the writer schema (a self-contained proto2
``DescriptorProto``, RECORDs as nested types) and one serialized message per row,
written column by column in the protobuf wire format from the Arrow buffers, with
no Python object per value.

The input batch is already converted per BigQuery column type (DATETIME text from a
string column arrives parsed, as ``timestamp[us]``: :mod:`onceover_jobs.sink.rows.datetime_text`,
which wraps this encoder); the mapping follows
Google's "Supported protocol buffer data types" for the Storage Write API::

    BigQuery     Arrow in                  proto field   wire value
    STRING       string / large_string     string        UTF-8 bytes
    BYTES        binary / large_binary     bytes         raw bytes
    INT64        int64                     int64         varint (negatives: 10 bytes)
    FLOAT64      float64                   double        fixed64, IEEE bits (NaN, inf kept)
    BOOL         bool                      bool          varint 0/1
    NUMERIC      decimal128(38, 9)         string        plain decimal text "-1.500000000"
    BIGNUMERIC   decimal256(76, 38)        string        plain decimal text
    DATE         date32                    int32         days since 1970-01-01
    TIMESTAMP    timestamp[us, tz=...]     int64         microseconds since the epoch (UTC)
    DATETIME     timestamp[us]             string        "YYYY-MM-DD HH:MM:SS.ffffff"
    RECORD       struct<...>               message       nested type, fields numbered 1..k
    REPEATED T   list<T> / large_list<T>   repeated T    one tagged value per element
    JSON         string / large_string     string        the JSON text, parsed by BigQuery
    GEOGRAPHY    string / large_string     string        the WKT text, parsed by BigQuery
    RANGE<T>     struct<start, end>        message       nested type with the fields start
                                                         and end, each encoded as T above;
                                                         a NULL bound is absent: unbounded

Every field is proto2 ``optional`` (``repeated`` for REPEATED), REQUIRED columns
too: a NULL is an absent field, and BigQuery rejects it on a REQUIRED column.
Field names are the Arrow column names and numbers follow the column order.
NUMERIC is sent as text rather than the packed ``BigDecimalByteStringEncoder`` bytes,
which the docs also allow: the local BigQuery reads only the text form. Text from
Arrow's decimal cast can be in exponent form ("1E-9"), so it is built from the
unscaled digits instead. DATETIME is the documented civil-time literal, not the
packed int64 of ``CivilTimeEncoder``, for the same reason.

Strings, bytes and RECORDs are length-delimited fields; repeated fields are unpacked,
as the proto2 descriptor declares them. Each column becomes pieces of its rows' bytes
(nothing where the value is NULL): varint and fixed64 fields as numpy byte matrices,
strings and nested messages as Arrow binary arrays. A row's pieces are put together
with one mask selection per run of fixed-width fields and Arrow's
``binary_join_element_wise``; list elements are joined by ``binary_join`` over the list
offsets, so RECORD and REPEATED columns take the same vectorised path. The one
Python object per row is the ``bytes`` that ``ProtoRows.serialized_rows`` holds.
``python -m onceover_tools.bench.proto_rows`` measures it against a message per row
(several times faster; the figures: docs/journal/notes.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types
from google.protobuf import descriptor_pb2

from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.rows.schema import RANGE_BOUNDS, RANGE_ELEMENTS
from onceover_jobs.sink.wire.messages import tag

__all__ = ["proto_data", "proto_schema", "serialize_rows"]

ROOT_MESSAGE = "Row"
"""Name of the writer schema's message; RECORD types are nested inside it."""

_FieldProto = descriptor_pb2.FieldDescriptorProto
_VARINT, _FIXED64, _DELIMITED = 0, 1, 2

# REST and DDL spell some types two ways; the table below knows one name each.
_CANONICAL_TYPES = {
    "INTEGER": "INT64",
    "FLOAT": "FLOAT64",
    "BOOLEAN": "BOOL",
    "STRUCT": "RECORD",
    "BIGDECIMAL": "BIGNUMERIC",
}

# A proto field name; BigQuery's flexible column names ("a-b", "ä") are not, and would
# need the ``column_name`` field annotation, which the local BigQuery does not read.
_PROTO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Fragments use 64-bit offsets throughout so that joining never needs a cast.
_FRAGMENT = pa.large_binary()
_EMPTY = pa.scalar(b"", _FRAGMENT)


@dataclass(frozen=True)
class _Field:
    """How one column (or RECORD member) is declared and encoded."""

    name: str
    number: int
    bq_type: str
    repeated: bool
    children: tuple[_Field, ...] = ()

    @property
    def element(self) -> _Field:
        """The same field as one element of its list (same name and number)."""
        return _Field(self.name, self.number, self.bq_type, False, self.children)


def proto_schema(
    fields: Sequence[bigquery.SchemaField], arrow_schema: pa.Schema
) -> types.ProtoSchema:
    """The writer schema for rows of ``arrow_schema`` going to a table of ``fields``.

    Raises ``SinkOptionError`` (option ``row_format``) for a column proto rows cannot
    carry and ``TypeError`` when a column's Arrow type is not the one its BigQuery
    type is converted to.
    """
    plan = _plan(fields, list(arrow_schema), path="")
    return types.ProtoSchema(proto_descriptor=_descriptor(ROOT_MESSAGE, plan))


def serialize_rows(batch: pa.RecordBatch, fields: Sequence[bigquery.SchemaField]) -> list[bytes]:
    """One serialized proto2 message per row of ``batch``, matching :func:`proto_schema`.

    Raises ``ValueError`` for a NULL inside an array (BigQuery has no such value),
    and what :func:`proto_schema` raises.
    """
    plan = _plan(fields, list(batch.schema), path="")
    return _serialize(batch, plan)


def proto_data(
    batch: pa.RecordBatch, fields: Sequence[bigquery.SchemaField]
) -> types.AppendRowsRequest.ProtoData:
    """Writer schema and rows of ``batch``, ready for ``AppendRowsRequest.proto_rows``."""
    plan = _plan(fields, list(batch.schema), path="")
    return types.AppendRowsRequest.ProtoData(
        writer_schema=types.ProtoSchema(proto_descriptor=_descriptor(ROOT_MESSAGE, plan)),
        rows=types.ProtoRows(serialized_rows=_serialize(batch, plan)),
    )


# -- the plan: BigQuery fields matched to Arrow fields -------------------------------


def _plan(
    bq_fields: Sequence[bigquery.SchemaField], arrow_fields: Sequence[pa.Field], path: str
) -> tuple[_Field, ...]:
    # BigQuery column names are case-insensitive; the Arrow names are the ones sent.
    by_name = {f.name.lower(): f for f in bq_fields}
    plan = []
    for number, arrow_field in enumerate(arrow_fields, start=1):
        name = arrow_field.name
        where = f"{path}{name}"
        bq_field = by_name.get(name.lower())
        if bq_field is None:
            raise TypeError(f"column {where!r} is not in the table's schema")
        if not _PROTO_NAME.match(name):
            raise SinkOptionError(
                "row_format", f"column {where!r} is not a valid proto field name; use arrow"
            )
        bq_type = _CANONICAL_TYPES.get(bq_field.field_type.upper(), bq_field.field_type.upper())
        kind = _KINDS.get(bq_type)
        if kind is None:
            raise SinkOptionError(
                "row_format", f"column {where!r} of type {bq_type} is not supported by proto"
            )
        repeated = bq_field.mode.upper() == "REPEATED"
        arrow_type = arrow_field.type
        if repeated:
            if not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
                raise TypeError(f"column {where!r}: REPEATED wants a list, got {arrow_type}")
            arrow_type = arrow_type.value_type
        if not kind.accepts(arrow_type):
            raise TypeError(f"column {where!r}: {bq_type} cannot be encoded from {arrow_type}")
        children: tuple[_Field, ...] = ()
        if bq_type == "RECORD":
            members = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
            children = _plan(bq_field.fields, members, path=f"{where}.")
        elif bq_type == "RANGE":
            children = _range_bounds(bq_field, arrow_type, where)
        plan.append(_Field(name, number, bq_type, repeated, children))
    return tuple(plan)


def _range_bounds(
    bq_field: bigquery.SchemaField, arrow_type: pa.DataType, where: str
) -> tuple[_Field, ...]:
    """The fields of a RANGE<T> column's message: ``start`` and ``end``, each a T.

    Planned from the Arrow struct's members, in their order, as a RECORD's are, so that
    the members line up with the fields when the rows are encoded.
    """
    element_type = getattr(bq_field.range_element_type, "element_type", None)
    element = str(element_type).upper() if element_type is not None else ""
    if element not in RANGE_ELEMENTS:
        raise TypeError(f"column {where!r}: a RANGE of {element or 'no element type'}")
    members = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    if sorted(m.name.lower() for m in members) != sorted(RANGE_BOUNDS):
        raise TypeError(
            f"column {where!r}: RANGE<{element}> wants a struct of start and end, got {arrow_type}"
        )
    kind = _KINDS[element]
    for member in members:
        if not kind.accepts(member.type):
            raise TypeError(
                f"column {where + '.' + member.name!r}: {element} cannot be encoded from "
                f"{member.type}"
            )
    return tuple(
        _Field(m.name.lower(), number, element, False) for number, m in enumerate(members, 1)
    )


def _descriptor(name: str, plan: Sequence[_Field]) -> descriptor_pb2.DescriptorProto:
    message = descriptor_pb2.DescriptorProto(name=name)
    taken = {f.name for f in plan}
    for field in plan:
        proto = message.field.add(
            name=field.name,
            number=field.number,
            type=_KINDS[field.bq_type].proto_type,
            label=_FieldProto.LABEL_REPEATED if field.repeated else _FieldProto.LABEL_OPTIONAL,
        )
        if field.children:
            # A nested type shares its scope with the fields of its parent.
            type_name = f"{field.name}_Record"
            while type_name in taken:
                type_name += "_"
            taken.add(type_name)
            message.nested_type.append(_descriptor(type_name, field.children))
            # Relative, resolved in the parent's scope: the descriptor stays self-contained.
            proto.type_name = type_name
    return message


# -- the wire format, one column at a time ------------------------------------------
#
# An encoder turns a column into pieces of its rows' bytes. Tags, varints and fixed64
# values are fixed-width blocks: an (n, width) byte matrix of which each row keeps a
# prefix (nothing where the value is NULL). Variable-length payloads (strings, nested
# messages) are Arrow ``large_binary`` arrays, empty where absent. A message is its
# pieces in field order: each run of blocks becomes bytes with one mask selection
# (row-major, so row by row and field by field), then Arrow joins the runs and the
# payloads per row.


@dataclass(frozen=True)
class _Block:
    """Fixed-width piece: row ``i`` is the first ``sizes[i]`` bytes of ``data[i]``."""

    data: npt.NDArray[np.uint8]
    sizes: npt.NDArray[np.int64]


_Piece: TypeAlias = _Block | pa.Array  # pa.Array: a large_binary payload


def _serialize(batch: pa.RecordBatch, plan: Sequence[_Field]) -> list[bytes]:
    if not plan:
        return [b""] * batch.num_rows
    pieces = [p for i, f in enumerate(plan) for p in _encode(f, batch.column(i))]
    serialized: list[bytes] = _message(pieces).to_pylist()
    return serialized


def _message(pieces: Sequence[_Piece]) -> pa.Array:
    """Per row, the concatenation of ``pieces``: a null-free ``large_binary`` array."""
    arrays: list[pa.Array] = []
    run: list[_Block] = []
    for piece in pieces:
        if isinstance(piece, _Block):
            run.append(piece)
            continue
        if run:
            arrays.append(_block_bytes(run))
            run = []
        arrays.append(piece)
    if run:
        arrays.append(_block_bytes(run))
    if len(arrays) == 1:
        return arrays[0]
    return pc.binary_join_element_wise(*arrays, _EMPTY)


def _block_bytes(run: Sequence[_Block]) -> pa.Array:
    data = run[0].data if len(run) == 1 else np.hstack([b.data for b in run])
    keep = np.hstack([np.take(_prefixes(b.data.shape[1]), b.sizes, axis=0) for b in run])
    return _fragments(np.sum([b.sizes for b in run], axis=0), data[keep])


def _encode(field: _Field, column: pa.Array) -> list[_Piece]:
    """The pieces of ``field`` in its message: tag(s) and value per row, or nothing."""
    if field.repeated:
        return [_list(field, column)]
    kind = _KINDS[field.bq_type]
    return kind.encode(field, tag(field.number, kind.wire_type), column)


def _int64s(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    values = column.view(pa.int64()).fill_null(0).to_numpy()
    return [_varints(tag, values.view(np.uint64), _present(column))]


def _dates(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    # int32 on the wire is the sign-extended int64 varint: negatives take 10 bytes.
    days = column.view(pa.int32()).fill_null(0).to_numpy().astype(np.int64)
    return [_varints(tag, days.view(np.uint64), _present(column))]


def _bools(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    flags = column.fill_null(False).to_numpy(zero_copy_only=False)
    return [_varints(tag, flags.astype(np.uint64), _present(column))]


def _doubles(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    doubles = column.fill_null(0.0).to_numpy().astype("<f8", copy=False)
    return [_fixed64(tag, doubles.view(np.uint8).reshape(-1, 8), _present(column))]


def _blobs(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    return _delimited(tag, column.cast(_FRAGMENT))


def _decimals(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    return _delimited(tag, _decimal_text(column).cast(_FRAGMENT))


def _datetimes(_field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    # With microsecond timestamps %S prints "SS.ffffff", and %Y pads to four digits.
    text = pc.strftime(column, format="%Y-%m-%d %H:%M:%S")
    return _delimited(tag, text.cast(_FRAGMENT))


def _records(field: _Field, tag: bytes, column: pa.Array) -> list[_Piece]:
    members = column.flatten()  # struct nulls and slice offset applied to the members
    payload = _message([p for i, f in enumerate(field.children) for p in _encode(f, members[i])])
    # A NULL record is absent; a record of NULLs is present and empty.
    return _delimited(tag, pc.if_else(column.is_valid(), payload, pa.scalar(None, _FRAGMENT)))


def _list(field: _Field, column: pa.Array) -> pa.Array:
    """Unpacked repeated field: every element tagged, the elements of a row joined."""
    offsets = column.offsets.to_numpy().astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    elements = column.values.slice(first, last - first)
    # Elements under a NULL list may be NULL harmlessly; flatten() leaves those out.
    if elements.null_count and column.flatten().null_count:
        raise ValueError(f"column {field.name!r}: an ARRAY cannot hold NULL in BigQuery")
    encoded = _message(_encode(field.element, elements))
    lists = pa.LargeListArray.from_arrays(
        pa.array(offsets - first, pa.int64()), encoded, mask=column.is_null()
    )
    return pc.binary_join(lists, _EMPTY).fill_null(_EMPTY)


@dataclass(frozen=True)
class _Kind:
    """Everything this module knows about one BigQuery type."""

    proto_type: int
    wire_type: int
    accepts: Callable[[pa.DataType], bool]
    encode: Callable[[_Field, bytes, pa.Array], list[_Piece]]


def _is_us_timestamp(t: pa.DataType, *, zoned: bool) -> bool:
    return bool(pa.types.is_timestamp(t) and t.unit == "us" and (t.tz is not None) == zoned)


def _is_decimal(t: pa.DataType) -> bool:
    # The text comes from the Arrow scale, so any non-negative scale is exact; the
    # unscaled reading in _decimal_text knows the 128- and 256-bit layouts only.
    wide = pa.types.is_decimal128(t) or pa.types.is_decimal256(t)
    return bool(wide and t.scale >= 0)


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_blob(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


_F = _FieldProto
_KINDS: dict[str, _Kind] = {
    "STRING": _Kind(_F.TYPE_STRING, _DELIMITED, _is_text, _blobs),
    "BYTES": _Kind(_F.TYPE_BYTES, _DELIMITED, _is_blob, _blobs),
    "INT64": _Kind(_F.TYPE_INT64, _VARINT, pa.types.is_int64, _int64s),
    "FLOAT64": _Kind(_F.TYPE_DOUBLE, _FIXED64, pa.types.is_float64, _doubles),
    "BOOL": _Kind(_F.TYPE_BOOL, _VARINT, pa.types.is_boolean, _bools),
    "NUMERIC": _Kind(_F.TYPE_STRING, _DELIMITED, _is_decimal, _decimals),
    "BIGNUMERIC": _Kind(_F.TYPE_STRING, _DELIMITED, _is_decimal, _decimals),
    "DATE": _Kind(_F.TYPE_INT32, _VARINT, pa.types.is_date32, _dates),
    "TIMESTAMP": _Kind(_F.TYPE_INT64, _VARINT, lambda t: _is_us_timestamp(t, zoned=True), _int64s),
    "DATETIME": _Kind(
        _F.TYPE_STRING, _DELIMITED, lambda t: _is_us_timestamp(t, zoned=False), _datetimes
    ),
    "RECORD": _Kind(_F.TYPE_MESSAGE, _DELIMITED, pa.types.is_struct, _records),
    # Google's proto table: JSON and GEOGRAPHY are strings, RANGE<T> a nested message
    # whose absent start or end is an unbounded bound, as a NULL member is absent here.
    "JSON": _Kind(_F.TYPE_STRING, _DELIMITED, _is_text, _blobs),
    "GEOGRAPHY": _Kind(_F.TYPE_STRING, _DELIMITED, _is_text, _blobs),
    "RANGE": _Kind(_F.TYPE_MESSAGE, _DELIMITED, pa.types.is_struct, _records),
}


def _present(column: pa.Array) -> npt.NDArray[np.bool_]:
    if column.null_count == 0:
        return np.ones(len(column), dtype=np.bool_)
    valid: npt.NDArray[np.bool_] = column.is_valid().to_numpy(zero_copy_only=False)
    return valid


# A varint takes one byte per 7 bits: 2**7 and up take two, ..., 2**63 and up ten.
_VARINT_STEPS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _varints(tag: bytes, values: npt.NDArray[np.uint64], present: npt.NDArray[np.bool_]) -> _Block:
    """``tag`` and the varint of ``values[i]`` per present row."""
    n, t = len(values), len(tag)
    sizes = np.searchsorted(_VARINT_STEPS, values, side="right") + 1
    width = int(sizes.max(initial=1))  # no wider than the column needs
    data = np.empty((n, t + width), dtype=np.uint8)
    data[:, :t] = np.frombuffer(tag, dtype=np.uint8)
    for k in range(width):
        group = (values >> np.uint64(7 * k)).astype(np.uint8) & 0x7F
        data[:, t + k] = group | ((sizes > k + 1).view(np.uint8) << 7)  # more to come
    return _Block(data, np.where(present, sizes + t, 0))


def _fixed64(tag: bytes, values: npt.NDArray[np.uint8], present: npt.NDArray[np.bool_]) -> _Block:
    """``tag`` and the 8 little-endian bytes ``values[i]`` per present row."""
    n, t = len(values), len(tag)
    data = np.empty((n, t + 8), dtype=np.uint8)
    data[:, :t] = np.frombuffer(tag, dtype=np.uint8)
    data[:, t:] = values
    return _Block(data, present * np.int64(t + 8))


def _delimited(tag: bytes, payload: pa.Array) -> list[_Piece]:
    """``tag``, the varint length and ``payload[i]`` per row where it is not NULL."""
    present = _present(payload)
    lengths = pc.binary_length(payload).fill_null(0).to_numpy().astype(np.uint64)
    return [_varints(tag, lengths, present), payload.fill_null(_EMPTY)]


@functools.cache
def _prefixes(width: int) -> npt.NDArray[np.bool_]:
    """Row ``s`` keeps the first ``s`` of ``width`` bytes (a table lookup beats comparing)."""
    prefixes: npt.NDArray[np.bool_] = np.arange(width) < np.arange(width + 1)[:, None]
    return prefixes


def _fragments(sizes: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]) -> pa.Array:
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(
        _FRAGMENT,
        len(sizes),
        [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data, dtype=np.uint8))],
    )


def _decimal_text(column: pa.Array) -> pa.Array:
    """Plain decimal text ("-0.000000001", never "1E-9") of a decimal column."""
    t = column.type
    if t.scale == 0:
        return pc.cast(column, pa.string())
    # The same buffers read with scale 0 are the unscaled integers, whose text is
    # always plain; the point goes in before the last ``scale`` digits.
    unscaled_type = (pa.decimal256 if pa.types.is_decimal256(t) else pa.decimal128)(t.precision, 0)
    unscaled = pa.Array.from_buffers(
        unscaled_type, len(column), column.buffers(), column.null_count, column.offset
    )
    digits = pc.cast(unscaled, pa.string())
    negative = pc.starts_with(digits, "-")
    magnitude = pc.utf8_lpad(pc.utf8_ltrim(digits, "-"), t.scale + 1, "0")
    whole = pc.utf8_slice_codeunits(magnitude, 0, -t.scale)
    fraction = pc.utf8_slice_codeunits(magnitude, -t.scale)
    sign = pc.if_else(negative, "-", "")
    return pc.binary_join_element_wise(pc.binary_join_element_wise(sign, whole, ""), fraction, ".")
