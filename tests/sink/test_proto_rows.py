"""Proto rows from Arrow: the wire bytes parse back to the input, and BigQuery stores it.

The pure tests parse every row with a message class built from the writer schema (as
BigQuery does) and check the bytes are protobuf's own canonical encoding. The others
append proto rows with offsets to a COMMITTED stream of the local BigQuery and read
the table back.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.rows.proto_rows import (
    ROOT_MESSAGE,
    proto_data,
    proto_schema,
    serialize_rows,
)

from tests.helpers.writeapi import acknowledged_offset, append_all, create_stream

COMMITTED = types.WriteStream.Type.COMMITTED

F = bigquery.SchemaField
SCALAR_FIELDS = [
    F("k", "INT64"),
    F("s", "STRING"),
    F("i", "INT64"),
    F("f", "FLOAT64"),
    F("b", "BOOL"),
    F("n", "NUMERIC"),
    F("d", "DATE"),
    F("ts", "TIMESTAMP"),
    F("dt", "DATETIME"),
    F("by", "BYTES"),
    F("ri", "INT64", mode="REPEATED"),
]
RECORD_FIELDS = [
    F("k", "INT64"),
    F("r", "RECORD", fields=[F("x", "STRING"), F("y", "INT64")]),
    F("rr", "RECORD", mode="REPEATED", fields=[F("x", "STRING"), F("y", "INT64")]),
]
# The local BigQuery cannot create a BIGNUMERIC table (DuckDB DECIMAL stops at 38
# digits), so BIGNUMERIC is checked on the wire only.
ALL_FIELDS = [*SCALAR_FIELDS, F("bn", "BIGNUMERIC"), *RECORD_FIELDS[1:]]

XY = pa.struct([("x", pa.string()), ("y", pa.int64())])
D = Decimal
MIN_TS = datetime(1, 1, 1, tzinfo=UTC)
MAX_TS = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)

# Five rows: everyday values, maxima, minima, all NULL, and the awkward ones.
COLUMNS: dict[str, pa.Array] = {
    "k": pa.array([0, 1, 2, 3, 4], pa.int64()),
    "s": pa.array(["a", "x" * 200, "", None, "ünïcødé 🦆 \x00 end"], pa.string()),
    "i": pa.array([-1, 2**63 - 1, -(2**63), None, 300], pa.int64()),
    "f": pa.array([1.5, float("inf"), float("-inf"), None, float("nan")], pa.float64()),
    "b": pa.array([True, True, False, None, False], pa.bool_()),
    "n": pa.array(
        [
            D("-1.25"),
            D("99999999999999999999999999999.999999999"),
            D("-99999999999999999999999999999.999999999"),
            None,
            D("0.000000001"),
        ],
        pa.decimal128(38, 9),
    ),
    "d": pa.array(
        [date(2024, 2, 29), date(9999, 12, 31), date(1, 1, 1), None, date(1969, 12, 31)],
        pa.date32(),
    ),
    "ts": pa.array(
        [
            datetime(2024, 2, 29, 12, 30, tzinfo=UTC),
            MAX_TS,
            MIN_TS,
            None,
            datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        ],
        pa.timestamp("us", tz="UTC"),
    ),
    "dt": pa.array(
        [
            datetime(2024, 2, 29, 12, 30, 0, 5),
            datetime(9999, 12, 31, 23, 59, 59, 999999),
            datetime(1, 1, 1),
            None,
            datetime(1969, 12, 31, 23, 59, 59),
        ],
        pa.timestamp("us"),
    ),
    "by": pa.array([b"\x00\xff", b"\x01" * 300, b"", None, b"\x80"], pa.binary()),
    "ri": pa.array([[1, -1], [2**63 - 1], [-(2**63), 0], None, []], pa.list_(pa.int64())),
    "bn": pa.array(
        [
            D("-1.25"),
            D("99999999999999999999999999999999999999.99999999999999999999999999999999999999"),
            D("0.00000000000000000000000000000000000001"),
            None,
            D(0),
        ],
        pa.decimal256(76, 38),
    ),
    "r": pa.array(
        [
            {"x": "q", "y": -5},
            {"x": None, "y": None},
            {"x": "", "y": 0},
            None,
            {"x": "z", "y": None},
        ],
        XY,
    ),
    "rr": pa.array(
        [
            [{"x": "a", "y": 1}, {"x": None, "y": None}],
            [],
            None,
            [{"x": "b", "y": -1}],
            [{"x": "c", "y": None}],
        ],
        pa.list_(XY),
    ),
}


def batch_of(fields: Sequence[bigquery.SchemaField]) -> pa.RecordBatch:
    return pa.record_batch({f.name: COLUMNS[f.name] for f in fields})


def message_class(schema: types.ProtoSchema) -> Any:
    """The message class BigQuery would build from the writer schema (a file of its own)."""
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="row.proto", syntax="proto2")
    file.message_type.add().CopyFrom(types.ProtoSchema.pb(schema).proto_descriptor)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(ROOT_MESSAGE))


def from_message(message: Any, fields: Sequence[bigquery.SchemaField]) -> dict[str, Any]:
    """The Python value of every field, read the way BigQuery reads the proto types."""
    row: dict[str, Any] = {}
    for field in fields:
        if field.mode == "REPEATED":
            row[field.name] = [from_wire(v, field) for v in getattr(message, field.name)]
        elif message.HasField(field.name):
            row[field.name] = from_wire(getattr(message, field.name), field)
        else:
            row[field.name] = None
    return row


def from_wire(value: Any, field: bigquery.SchemaField) -> Any:
    kind = field.field_type
    if kind == "RECORD":
        return from_message(value, field.fields)
    if kind in ("NUMERIC", "BIGNUMERIC"):
        assert "E" not in value, f"{field.name}: {value!r} is not plain decimal text"
        return Decimal(value)
    if kind == "DATE":
        return date(1970, 1, 1) + timedelta(days=value)
    if kind == "TIMESTAMP":
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value)
    if kind == "DATETIME":
        assert len(value) == len("YYYY-MM-DD HH:MM:SS.ffffff"), value
        return datetime.fromisoformat(value)
    return value


def same(actual: Any, expected: Any) -> bool:
    """Equality where floats compare by their bits (NaN equals NaN, -0.0 is not 0.0)."""
    if isinstance(expected, float) and isinstance(actual, float):
        return struct.pack("<d", actual) == struct.pack("<d", expected)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k]) for k in expected
        )
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    return bool(actual == expected)


def expected_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = batch.to_pylist()
    for row in rows:  # BigQuery has no NULL array; a NULL list arrives as an empty one.
        for name, value in row.items():
            if value is None and pa.types.is_list(batch.schema.field(name).type):
                row[name] = []
    return rows


# -- on the wire ---------------------------------------------------------------------


def test_rows_parse_back_to_the_input_in_protobufs_canonical_encoding() -> None:
    batch = batch_of(ALL_FIELDS)
    row_class = message_class(proto_schema(ALL_FIELDS, batch.schema))

    serialized = serialize_rows(batch, ALL_FIELDS)

    assert len(serialized) == batch.num_rows
    for wire, expected in zip(serialized, expected_rows(batch), strict=True):
        message = row_class.FromString(wire)
        actual = from_message(message, ALL_FIELDS)
        assert same(actual, expected), (actual, expected)
        # protobuf writes the parsed message back byte for byte: field order,
        # minimal varints, 10-byte negatives and unpacked repeated fields all agree.
        assert message.SerializeToString() == wire


def test_nulls_are_absent_fields_and_an_empty_record_is_present() -> None:
    batch = batch_of(ALL_FIELDS)
    row_class = message_class(proto_schema(ALL_FIELDS, batch.schema))

    all_null = row_class.FromString(serialize_rows(batch, ALL_FIELDS)[3])
    record_of_nulls = row_class.FromString(serialize_rows(batch, ALL_FIELDS)[1])

    assert [f.name for f, _ in all_null.ListFields()] == ["k", "rr"]
    assert record_of_nulls.HasField("r")
    assert record_of_nulls.r.ListFields() == []


def test_the_writer_schema_follows_the_documented_mapping() -> None:
    batch = batch_of(ALL_FIELDS)
    descriptor = types.ProtoSchema.pb(proto_schema(ALL_FIELDS, batch.schema)).proto_descriptor
    p = descriptor_pb2.FieldDescriptorProto

    declared = {f.name: (f.number, f.type, f.label) for f in descriptor.field}

    optional, repeated = p.LABEL_OPTIONAL, p.LABEL_REPEATED
    assert declared == {
        "k": (1, p.TYPE_INT64, optional),
        "s": (2, p.TYPE_STRING, optional),
        "i": (3, p.TYPE_INT64, optional),
        "f": (4, p.TYPE_DOUBLE, optional),
        "b": (5, p.TYPE_BOOL, optional),
        "n": (6, p.TYPE_STRING, optional),
        "d": (7, p.TYPE_INT32, optional),
        "ts": (8, p.TYPE_INT64, optional),
        "dt": (9, p.TYPE_STRING, optional),
        "by": (10, p.TYPE_BYTES, optional),
        "ri": (11, p.TYPE_INT64, repeated),
        "bn": (12, p.TYPE_STRING, optional),
        "r": (13, p.TYPE_MESSAGE, optional),
        "rr": (14, p.TYPE_MESSAGE, repeated),
    }
    # Self-contained: every message type is nested in the one descriptor.
    assert [t.name for t in descriptor.nested_type] == ["r_Record", "rr_Record"]


def test_a_slice_encodes_like_the_same_rows_of_the_whole() -> None:
    batch = batch_of(ALL_FIELDS)

    assert serialize_rows(batch.slice(1, 3), ALL_FIELDS) == serialize_rows(batch, ALL_FIELDS)[1:4]
    assert serialize_rows(batch.slice(5), ALL_FIELDS) == []


def test_random_rows_are_byte_for_byte_what_protobuf_writes() -> None:
    """Every varint width (1 to 10 bytes), length prefixes of 1 and 2 bytes, NULLs."""
    rng = np.random.default_rng(11)
    n = 2000
    ints = (rng.integers(0, 2**63, n) >> rng.integers(0, 63, n)) * rng.choice([-1, 1], n)
    days = rng.integers(-719162, 2932897, n)
    lists = [rng.integers(-(2**62), 2**62, rng.integers(0, 4)).tolist() for _ in range(n)]
    texts = ["ü" * int(k) for k in rng.integers(0, 200, n)]
    values: dict[str, list[Any]] = {
        "i": ints.tolist(),
        "f": rng.normal(0, 1e9, n).tolist(),
        "s": texts,
        "d": days.tolist(),
        "b": (rng.random(n) < 0.5).tolist(),
    }
    for column in values.values():  # about one NULL in five
        for i in np.flatnonzero(rng.random(n) < 0.2):
            column[i] = None
    fields = [F("i", "INT64"), F("f", "FLOAT64"), F("s", "STRING"), F("d", "DATE"),
              F("b", "BOOL"), F("ri", "INT64", mode="REPEATED")]  # fmt: skip
    batch = pa.record_batch({
        "i": pa.array(values["i"], pa.int64()),
        "f": pa.array(values["f"], pa.float64()),
        "s": pa.array(values["s"], pa.string()),
        "d": pa.array(values["d"], pa.int32()).cast(pa.date32()),
        "b": pa.array(values["b"], pa.bool_()),
        "ri": pa.array(lists, pa.list_(pa.int64())),
    })  # fmt: skip
    row_class = message_class(proto_schema(fields, batch.schema))

    serialized = serialize_rows(batch, fields)

    for row, wire in enumerate(serialized):
        present = {name: column[row] for name, column in values.items()}
        message = row_class(ri=lists[row], **{k: v for k, v in present.items() if v is not None})
        assert wire == message.SerializeToString(), row


def test_field_numbers_past_15_take_two_byte_tags() -> None:
    fields = [F(f"c{i}", "INT64") for i in range(20)]
    batch = pa.record_batch({f.name: pa.array([-7, None], pa.int64()) for f in fields})
    row_class = message_class(proto_schema(fields, batch.schema))

    first, second = serialize_rows(batch, fields)

    assert row_class.FromString(first).c19 == -7
    assert second == b""
    assert len(first) == 15 * (1 + 10) + 5 * (2 + 10)


def test_large_strings_and_case_insensitive_names() -> None:
    fields = [F("Name", "STRING")]
    batch = pa.record_batch({"name": pa.array(["é" * 100, None], pa.large_string())})
    row_class = message_class(proto_schema(fields, batch.schema))

    rows = [row_class.FromString(wire) for wire in serialize_rows(batch, fields)]

    assert rows[0].name == "é" * 100
    assert not rows[1].HasField("name")


def test_datetime_text_goes_as_the_civil_time_literal_and_a_bad_one_is_named() -> None:
    """A string column planned for a DATETIME column (the connector's PR #1153) is sent
    in proto rows as BigQuery's ``YYYY-MM-DD HH:MM:SS.ffffff``, read from any form of the
    literal; a text that is none is named for the row-error handler."""
    from onceover_jobs.sink.rows.datetime_text import DatetimeTextEncoder, sent_schema
    from onceover_jobs.sink.rows.proto_encoder import ProtoEncoder
    from onceover_jobs.sink.rows.schema import plan_write

    fields = [F("k", "INT64"), F("dt", "DATETIME")]
    texts = ["2024-2-29T7:05:09.25", "0001-01-01", None, "2024-02-29 25:00:00"]
    given = pa.record_batch({"k": pa.array(range(4), pa.int64()), "dt": pa.array(texts)})
    planned = plan_write("p.d.t", given.schema, fields).arrow_schema
    inner = ProtoEncoder(fields, sent_schema(planned))
    encoder = DatetimeTextEncoder(inner, planned)
    row_class = message_class(types.ProtoSchema(proto_descriptor=inner.schema_pb.proto_descriptor))

    encoded = encoder.encode(pa.record_batch(given.columns, schema=planned))

    rows = [row_class.FromString(wire) for wire in encoded.parts[:4]]
    assert rows[0].dt == "2024-02-29 07:05:09.250000"
    assert rows[1].dt == "0001-01-01 00:00:00.000000"
    assert not rows[2].HasField("dt")
    assert [index for index, _ in encoded.refused] == [3]
    assert encoded.refused[0][1].startswith("Field dt: '2024-02-29 25:00:00' is no DATETIME")


def test_a_null_inside_an_array_is_refused() -> None:
    fields = [F("ri", "INT64", mode="REPEATED")]
    batch = pa.record_batch({"ri": pa.array([[1], [2, None]], pa.list_(pa.int64()))})

    with pytest.raises(ValueError, match="'ri'"):
        serialize_rows(batch, fields)


@pytest.mark.parametrize(
    ("field", "arrow_type", "error"),
    [
        (F("t", "TIME"), pa.time64("us"), SinkOptionError),
        (F("a-b", "STRING"), pa.string(), SinkOptionError),
        (F("ts", "TIMESTAMP"), pa.timestamp("us"), TypeError),
        (F("dt", "DATETIME"), pa.timestamp("ns"), TypeError),
        (F("i", "INT64"), pa.int32(), TypeError),
        (F("ri", "INT64", mode="REPEATED"), pa.int64(), TypeError),
    ],
)
def test_columns_proto_rows_cannot_carry_are_refused_by_name(
    field: bigquery.SchemaField, arrow_type: pa.DataType, error: type[Exception]
) -> None:
    schema = pa.schema([(field.name, arrow_type)])

    with pytest.raises(error, match=repr(field.name)):
        proto_schema([field], schema)


# -- through the local BigQuery -------------------------------------------------------


def append_and_read(
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    dataset: str,
    fields: Sequence[bigquery.SchemaField],
) -> tuple[list[int], list[dict[str, Any]]]:
    """Append the rows of ``fields`` in two requests with offsets to a COMMITTED stream;
    return the acknowledged offsets and the table's rows by ``k``."""
    table_id = f"{dataset}.proto_rows"
    rest.create_table(bigquery.Table(table_id, schema=list(fields)))
    stream = create_stream(write, table_id, COMMITTED).name
    batch = batch_of(fields)
    first, rest_of_it = batch.slice(0, 2), batch.slice(2)
    # The writer schema goes with the first request of the connection only.
    requests = [
        types.AppendRowsRequest(
            write_stream=stream, offset=0, proto_rows=proto_data(first, fields)
        ),
        types.AppendRowsRequest(
            write_stream=stream,
            offset=first.num_rows,
            proto_rows=types.AppendRowsRequest.ProtoData(
                rows=types.ProtoRows(serialized_rows=serialize_rows(rest_of_it, fields))
            ),
        ),
    ]

    responses = append_all(write, requests)

    assert [r.error.code for r in responses] == [0, 0], [r.error for r in responses]
    offsets = [acknowledged_offset(r) for r in responses]
    table = rest.query_and_wait(f"SELECT * FROM `{table_id}` ORDER BY k")
    return offsets, [dict(row) for row in table]


def test_every_scalar_and_repeated_type_round_trips_through_bigquery(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    offsets, stored = append_and_read(rest, write, dataset, SCALAR_FIELDS)

    assert offsets == [0, 2]
    expected = expected_rows(batch_of(SCALAR_FIELDS))
    for actual, wanted in zip(stored, expected, strict=True):
        assert same(actual, wanted), (actual, wanted)


def test_records_round_trip_through_bigquery(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    offsets, stored = append_and_read(rest, write, dataset, RECORD_FIELDS)

    assert offsets == [0, 2]
    expected = expected_rows(batch_of(RECORD_FIELDS))
    for actual, wanted in zip(stored, expected, strict=True):
        assert same(actual, wanted), (actual, wanted)
