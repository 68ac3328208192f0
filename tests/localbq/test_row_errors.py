"""The ``row_errors`` launcher patch: AppendRows refuses bad rows as BigQuery does.

``storage.proto``, ``AppendRowsResponse.row_errors``: "If a request failed due to
corrupted rows, no rows in the batch will be appended. The API will return row level
error info, so that the caller can remove the bad rows and retry the request."
``RowError``: "index: Index of the malformed row in the request"; ``FIELDS_ERROR``: "One
or more fields in the row has errors." The column rules are ``TableFieldSchema``'s
(``maxLength``, ``precision``/``scale``, ``roundingMode``, ``mode``), enforced "when
writing a value to a parameterized column" (GoogleSQL data types).

bqemulator 1.4.0 dropped ``maxLength``, ``precision``, ``scale`` and ``roundingMode`` from
the schema of tables.insert (kept ``mode``) and appended every row unchecked: a STRING(5)
column took 7 characters, a NUMERIC(5, 2) column took 12345.67, a REQUIRED column took
NULL. Every test talks to the session's local BigQuery over REST and gRPC.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onceover_tools.localbq import LocalBigQuery, limits, patches
from onceover_tools.localbq.admin import write_streams
from onceover_tools.localbq.limits import limited
from onceover_tools.localbq.patches.row_errors import ROW_ERRORS_MESSAGE

from onceover.errors import ConfigurationError
from tests.helpers.writeapi import acknowledged_offset, append_all, create_stream, table_path

COMMITTED = types.WriteStream.Type.COMMITTED
PENDING = types.WriteStream.Type.PENDING
BUFFERED = types.WriteStream.Type.BUFFERED
FIELDS_ERROR = types.RowError.RowErrorCode.FIELDS_ERROR
OK, INVALID_ARGUMENT, OUT_OF_RANGE = 0, 3, 11

SCHEMA = [
    bigquery.SchemaField("id", "INT64"),  # the key
    bigquery.SchemaField("code", "STRING", max_length=5),  # STRING(5)
    bigquery.SchemaField("amount", "NUMERIC", precision=5, scale=2),  # NUMERIC(5, 2)
    bigquery.SchemaField("who", "STRING", mode="REQUIRED"),
]
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("code", pa.string()),
        ("amount", pa.decimal128(38, 9)),  # BigQuery's Arrow type of NUMERIC
        ("who", pa.string()),
    ]
)

BAD = {
    2: "Field code: STRING(5) value is 7 characters long, longer than its maximum length 5",
    5: "Field amount: NUMERIC(5, 2) value 1234.5 is out of range [-999.99, 999.99]",
    8: "Field who: REQUIRED field has no value (NULL or missing)",
}
"""The bad rows of :func:`ten_rows` and BigQuery's row error for each (this launcher's
wording: ``Field <column>: <rule broken>``)."""


def ten_rows(good_only: bool = False) -> list[dict[str, Any]]:
    """Ten rows, three of them (:data:`BAD`) breaking a rule each; the good ones sit on
    the edges of the rules: 5 characters (6 UTF-8 bytes), ±999.99."""
    rows: list[dict[str, Any]] = [
        {"id": i, "code": f"c{i}", "amount": Decimal(i) / 4, "who": f"w{i}"} for i in range(10)
    ]
    rows[1].update(code="héllo", amount=Decimal("999.99"))
    rows[3].update(code=None, amount=Decimal("-999.99"))
    rows[2]["code"] = "toolong"
    rows[5]["amount"] = Decimal("1234.5")
    rows[8]["who"] = None
    return [row for i, row in enumerate(rows) if i not in BAD] if good_only else rows


def make_table(rest: bigquery.Client, dataset: str, schema: Sequence[bigquery.SchemaField]) -> str:
    table_id = f"{dataset}.rules"
    rest.create_table(bigquery.Table(table_id, schema=list(schema)))
    return table_id


def arrow_request(
    stream: str, rows: list[dict[str, Any]], offset: int | None, schema: pa.Schema = ARROW
) -> types.AppendRowsRequest:
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    fields: dict[str, Any] = {
        "write_stream": stream,
        "arrow_rows": types.AppendRowsRequest.ArrowData(
            writer_schema=types.ArrowSchema(serialized_schema=schema.serialize().to_pybytes()),
            rows=types.ArrowRecordBatch(serialized_record_batch=batch.serialize().to_pybytes()),
        ),
    }
    if offset is not None:
        fields["offset"] = offset
    return types.AppendRowsRequest(**fields)


def proto_request(
    stream: str, rows: list[dict[str, Any]], offset: int | None
) -> types.AppendRowsRequest:
    """Proto rows of :data:`SCHEMA`: proto2 optional fields, NUMERIC as its decimal text
    (the Storage Write API's STRING encoding of NUMERIC); a NULL is an absent field."""
    descriptor = descriptor_pb2.DescriptorProto(name="Row")
    kinds = {"id": descriptor_pb2.FieldDescriptorProto.TYPE_INT64}
    for number, name in enumerate(("id", "code", "amount", "who"), start=1):
        descriptor.field.add(
            name=name,
            number=number,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            type=kinds.get(name, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto(name="row.proto", message_type=[descriptor]))
    row_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("Row"))
    serialized = [
        row_class(
            **{
                name: str(value) if name == "amount" else value
                for name, value in row.items()
                if value is not None
            }
        ).SerializeToString()
        for row in rows
    ]
    fields: dict[str, Any] = {
        "write_stream": stream,
        "proto_rows": types.AppendRowsRequest.ProtoData(
            writer_schema=types.ProtoSchema(proto_descriptor=descriptor),
            rows=types.ProtoRows(serialized_rows=serialized),
        ),
    }
    if offset is not None:
        fields["offset"] = offset
    return types.AppendRowsRequest(**fields)


def row_errors(response: types.AppendRowsResponse) -> list[tuple[int, int, str]]:
    return [(e.index, e.code, e.message) for e in response.row_errors]


def stored(rest: bigquery.Client, table_id: str) -> list[tuple[Any, ...]]:
    query = f"SELECT id, code, amount, who FROM `{table_id}` ORDER BY id"
    return [tuple(row.values()) for row in rest.query_and_wait(query)]


def expected_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["id"], r["code"], r["amount"], r["who"]) for r in rows]


def next_offset(local_bigquery: LocalBigQuery, table_id: str) -> dict[str, tuple[int, int]]:
    """Each stream of the table: (next offset, rows taken), from the admin endpoint."""
    return {
        s["name"]: (s["nextOffset"], s["rowCount"])
        for s in write_streams(local_bigquery.rest_url, table_id)
    }


# -- the table keeps its column rules ---------------------------------------------------


def test_tables_keep_max_length_precision_scale_rounding_mode_and_required(
    rest: bigquery.Client, dataset: str
) -> None:
    """TableFieldSchema: ``maxLength`` (STRING, BYTES), ``precision``/``scale`` and
    ``roundingMode`` (NUMERIC, BIGNUMERIC) and ``mode`` are part of the table's schema,
    answered by tables.get; bqemulator kept only ``mode``."""
    schema = [
        *SCHEMA,
        bigquery.SchemaField("blob", "BYTES", max_length=3),
        bigquery.SchemaField(
            "even", "NUMERIC", precision=4, scale=1, rounding_mode="ROUND_HALF_EVEN"
        ),
        bigquery.SchemaField(
            "address", "RECORD", fields=[bigquery.SchemaField("zip", "STRING", max_length=5)]
        ),
    ]
    table_id = make_table(rest, dataset, schema)

    fetched = {f.name: f for f in rest.get_table(table_id).schema}

    assert fetched["code"].max_length == 5
    assert (fetched["amount"].precision, fetched["amount"].scale) == (5, 2)
    assert fetched["who"].mode == "REQUIRED"
    assert fetched["blob"].max_length == 3
    assert fetched["even"].rounding_mode == "ROUND_HALF_EVEN"
    assert fetched["address"].fields[0].max_length == 5
    assert fetched["id"].max_length is None
    assert fetched["id"].precision is None


# -- a request with bad rows is refused whole ---------------------------------------------


def test_bad_rows_refuse_the_whole_request_and_the_good_rows_can_be_sent_again(
    local_bigquery: LocalBigQuery, rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """AppendRowsResponse.row_errors: "If a request failed due to corrupted rows, no rows
    in the batch will be appended ... so that the caller can remove the bad rows and
    retry the request." Ten Arrow rows, three bad (too long for STRING(5), out of
    NUMERIC(5, 2)'s range, NULL in a REQUIRED column): the answer is INVALID_ARGUMENT with
    BigQuery's message and one FIELDS_ERROR per bad row; nothing is stored and the
    stream's offset stays, so a request at offset 10 is OUT_OF_RANGE; the seven good
    rows sent again at offset 0 are taken. All on one connection, which stays open."""
    table_id = make_table(rest, dataset, SCHEMA)
    stream = create_stream(write, table_id, COMMITTED).name

    refused, gap, again = append_all(write, [
        arrow_request(stream, ten_rows(), offset=0),
        arrow_request(stream, ten_rows(good_only=True), offset=10),
        arrow_request(stream, ten_rows(good_only=True), offset=0),
    ])  # fmt: skip

    assert refused.error.code == INVALID_ARGUMENT
    assert refused.error.message == ROW_ERRORS_MESSAGE.format(stream=stream)
    assert refused.error.message.startswith("Errors found while processing rows.")
    assert row_errors(refused) == [(i, FIELDS_ERROR, message) for i, message in BAD.items()]
    assert "append_result" not in refused
    assert gap.error.code == OUT_OF_RANGE  # the refused rows took no offsets
    assert (again.error.code, acknowledged_offset(again)) == (OK, 0)
    assert not again.row_errors
    assert stored(rest, table_id) == expected_rows(ten_rows(good_only=True))
    assert next_offset(local_bigquery, table_id) == {stream: (7, 7)}


def test_nothing_is_stored_and_the_offset_stays_after_a_refusal(
    local_bigquery: LocalBigQuery, rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "no rows in the batch will be appended": right after the refusal the table is
    empty and the stream's next offset is still 0."""
    table_id = make_table(rest, dataset, SCHEMA)
    stream = create_stream(write, table_id, COMMITTED).name

    (refused,) = append_all(write, [arrow_request(stream, ten_rows(), offset=0)])

    assert refused.error.code == INVALID_ARGUMENT
    assert next(iter(rest.query_and_wait(f"SELECT COUNT(*) AS n FROM `{table_id}`")))["n"] == 0
    assert next_offset(local_bigquery, table_id) == {stream: (0, 0)}


def test_proto_rows_on_the_default_stream_are_checked_alike(
    local_bigquery: LocalBigQuery, rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """The rules hold for every append, whatever carries the rows (ProtoData as well as
    ArrowData) and whatever the stream (here ``_default``, without offsets): the same
    three rows are refused, a REQUIRED field left out of the message counting as NULL;
    nothing is appended; the good rows sent again are."""
    table_id = make_table(rest, dataset, SCHEMA)
    default = f"{table_path(write, table_id)}/streams/_default"

    refused, taken = append_all(write, [
        proto_request(default, ten_rows(), offset=None),
        proto_request(default, ten_rows(good_only=True), offset=None),
    ])  # fmt: skip

    assert refused.error.code == INVALID_ARGUMENT
    assert refused.error.message == ROW_ERRORS_MESSAGE.format(stream=default)
    assert row_errors(refused) == [(i, FIELDS_ERROR, message) for i, message in BAD.items()]
    assert taken.error.code == OK
    assert stored(rest, table_id) == expected_rows(ten_rows(good_only=True))
    assert next_offset(local_bigquery, table_id) == {default: (7, 7)}


@pytest.mark.parametrize("kind", [PENDING, BUFFERED], ids=["PENDING", "BUFFERED"])
def test_pending_and_buffered_streams_refuse_bad_rows_alike(
    kind: int,
    local_bigquery: LocalBigQuery,
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    dataset: str,
) -> None:
    """Every stream type checks the rows of each append: a PENDING or BUFFERED stream
    takes none of a refused request (its row count and offset stay), then the good rows
    at the same offset."""
    table_id = make_table(rest, dataset, SCHEMA)
    stream = create_stream(write, table_id, kind).name

    refused, taken = append_all(write, [
        arrow_request(stream, ten_rows(), offset=0),
        arrow_request(stream, ten_rows(good_only=True), offset=0),
    ])  # fmt: skip

    assert [e.index for e in refused.row_errors] == list(BAD)
    assert (taken.error.code, acknowledged_offset(taken)) == (OK, 0)
    assert next_offset(local_bigquery, table_id) == {stream: (7, 7)}


def test_the_offset_answer_comes_before_the_rows_are_looked_at(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A request the stream would not take at its offset is answered as before
    (ALREADY_EXISTS for a retry of an acknowledged offset, OUT_OF_RANGE for a gap),
    bad rows or not: the offset says it is not the next append."""
    table_id = make_table(rest, dataset, SCHEMA)
    stream = create_stream(write, table_id, COMMITTED).name

    responses = append_all(write, [
        arrow_request(stream, ten_rows(good_only=True), offset=0),
        arrow_request(stream, ten_rows(), offset=0),
        arrow_request(stream, ten_rows(), offset=20),
    ])  # fmt: skip

    assert [(r.error.code, len(r.row_errors)) for r in responses] == [
        (OK, 0),
        (6, 0),  # ALREADY_EXISTS
        (OUT_OF_RANGE, 0),
    ]


# -- the rules -----------------------------------------------------------------------------


def test_nested_record_members_are_checked_where_the_record_has_a_value(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """A RECORD's members have their own rules (TableFieldSchema.fields): a REQUIRED
    member needs a value when the RECORD has one (a NULL RECORD is fine), a STRING(3)
    member is checked in a REPEATED RECORD's every element; the message names the
    member by its path."""
    schema = [
        bigquery.SchemaField("id", "INT64"),
        bigquery.SchemaField(
            "address",
            "RECORD",
            fields=[
                bigquery.SchemaField("city", "STRING"),
                bigquery.SchemaField("country", "STRING", mode="REQUIRED"),
            ],
        ),
        bigquery.SchemaField(
            "items",
            "RECORD",
            mode="REPEATED",
            fields=[bigquery.SchemaField("sku", "STRING", max_length=3)],
        ),
    ]
    arrow = pa.schema(
        [
            ("id", pa.int64()),
            ("address", pa.struct([("city", pa.string()), ("country", pa.string())])),
            ("items", pa.list_(pa.struct([("sku", pa.string())]))),
        ]
    )
    rows: list[dict[str, Any]] = [
        {"id": 0, "address": {"city": "Lyon", "country": "FR"}, "items": [{"sku": "abc"}]},
        {"id": 1, "address": None, "items": None},  # NULL RECORD, NULL array: fine
        {"id": 2, "address": {"city": "Oslo", "country": None}, "items": []},
        {"id": 3, "address": None, "items": [{"sku": "ab"}, {"sku": "abcd"}]},
    ]
    table_id = make_table(rest, dataset, schema)
    stream = create_stream(write, table_id, COMMITTED).name

    refused, taken = append_all(write, [
        arrow_request(stream, rows, offset=0, schema=arrow),
        arrow_request(stream, rows[:2], offset=0, schema=arrow),
    ])  # fmt: skip

    assert row_errors(refused) == [
        (2, FIELDS_ERROR, "Field address.country: REQUIRED field has no value (NULL or missing)"),
        (
            3,
            FIELDS_ERROR,
            "Field items.sku: STRING(3) value is 4 characters long, longer than its maximum "
            "length 3",
        ),
    ]
    assert taken.error.code == OK
    assert [row["id"] for row in rest.query_and_wait(f"SELECT id FROM `{table_id}`")] == [0, 1]


def test_numeric_values_are_rounded_to_the_scale_then_range_checked(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """RoundingMode (BigQuery REST reference): ROUND_HALF_AWAY_FROM_ZERO (the default)
    and ROUND_HALF_EVEN are applied "when applying precision and scale upon writing of
    NUMERIC and BIGNUMERIC values"; TableFieldSchema.precision: values "must be in this
    range ... [-10^(P-S) + 10^(-S), 10^(P-S) - 10^(-S)]", precision without scale meaning
    scale 0. So 999.994 is stored as 999.99 in NUMERIC(5, 2), and 999.995 rounds to
    1000.00: out of range."""
    schema = [
        bigquery.SchemaField("id", "INT64"),
        bigquery.SchemaField("away", "NUMERIC", precision=5, scale=2),
        bigquery.SchemaField(
            "even", "NUMERIC", precision=5, scale=2, rounding_mode="ROUND_HALF_EVEN"
        ),
        bigquery.SchemaField("whole", "NUMERIC", precision=3),
    ]
    arrow = pa.schema(
        [
            ("id", pa.int64()),
            ("away", pa.decimal128(38, 9)),
            ("even", pa.decimal128(38, 9)),
            ("whole", pa.decimal128(38, 9)),
        ]
    )
    d = Decimal
    good = [
        {"id": 0, "away": d("2.345"), "even": d("2.345"), "whole": d("1.5")},
        {"id": 1, "away": d("-2.345"), "even": d("2.355"), "whole": d("-998.5")},
        {"id": 2, "away": d("999.994"), "even": d("-999.994"), "whole": d("999.4")},
    ]
    bad = [
        {"id": 3, "away": d("999.995"), "even": d("0"), "whole": d("0")},
        {"id": 4, "away": d("0"), "even": d("-999.995"), "whole": d("0")},
        {"id": 5, "away": d("0"), "even": d("0"), "whole": d("999.5")},
    ]
    table_id = make_table(rest, dataset, schema)
    stream = create_stream(write, table_id, COMMITTED).name

    refused, taken = append_all(write, [
        arrow_request(stream, good + bad, offset=0, schema=arrow),
        arrow_request(stream, good, offset=0, schema=arrow),
    ])  # fmt: skip

    assert row_errors(refused) == [
        (3, FIELDS_ERROR, "Field away: NUMERIC(5, 2) value 999.995 is out of range "
         "[-999.99, 999.99]"),
        (4, FIELDS_ERROR, "Field even: NUMERIC(5, 2) value -999.995 is out of range "
         "[-999.99, 999.99]"),
        (5, FIELDS_ERROR, "Field whole: NUMERIC(3) value 999.5 is out of range [-999, 999]"),
    ]  # fmt: skip
    assert taken.error.code == OK
    query = f"SELECT id, away, even, whole FROM `{table_id}` ORDER BY id"
    assert [tuple(row.values()) for row in rest.query_and_wait(query)] == [
        (0, d("2.35"), d("2.34"), d("2")),
        (1, d("-2.35"), d("2.36"), d("-999")),
        (2, d("999.99"), d("-999.99"), d("999")),
    ]


def test_bytes_max_length_counts_bytes_and_string_max_length_counts_characters(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """TableFieldSchema.maxLength: for BYTES "the maximum number of bytes"; STRING(L)
    holds L characters: "héllo" (6 UTF-8 bytes) fits STRING(5), 4 bytes do not fit
    BYTES(3). Each bad row gets one error, its first rule broken in column order."""
    schema = [
        bigquery.SchemaField("code", "STRING", max_length=5),
        bigquery.SchemaField("blob", "BYTES", max_length=3),
    ]
    arrow = pa.schema([("code", pa.string()), ("blob", pa.binary())])
    rows = [
        {"code": "héllo", "blob": b"abc"},
        {"code": "ok", "blob": b"abcd"},
        {"code": "héllo!", "blob": b"abcd"},  # two rules broken: the first is named
    ]
    table_id = make_table(rest, dataset, schema)
    stream = create_stream(write, table_id, COMMITTED).name

    (refused,) = append_all(write, [arrow_request(stream, rows, offset=0, schema=arrow)])

    assert row_errors(refused) == [
        (1, FIELDS_ERROR, "Field blob: BYTES(3) value is 4 bytes long, longer than its "
         "maximum length 3"),
        (2, FIELDS_ERROR, "Field code: STRING(5) value is 6 characters long, longer than "
         "its maximum length 5"),
    ]  # fmt: skip


# -- the setting --------------------------------------------------------------------------


def test_with_the_patch_off_bad_rows_are_taken_as_bqemulator_took_them(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """``row_errors="off"`` (ONCEOVER_LOCALBQ_ROW_ERRORS=off) shows what the patch
    changes: the same request is then accepted whole, bad rows stored, no row_errors,
    which is not what BigQuery does."""
    table_id = make_table(rest, dataset, SCHEMA)
    stream = create_stream(write, table_id, COMMITTED).name

    with limited(row_errors="off"):
        (taken,) = append_all(write, [arrow_request(stream, ten_rows(), offset=0)])

    assert (taken.error.code, acknowledged_offset(taken), list(taken.row_errors)) == (OK, 0, [])
    kept = {row[0]: row for row in stored(rest, table_id)}
    assert len(kept) == 10
    assert (kept[2][1], kept[5][2], kept[8][3]) == ("toolong", Decimal("1234.5"), None)


def test_the_setting_comes_from_onceover_localbq_row_errors() -> None:
    """A separately launched local BigQuery reads ONCEOVER_LOCALBQ_ROW_ERRORS (on / off,
    any case) when the patches are installed; another word is a configuration error."""
    assert limits.WRITE_API_LIMITS.row_errors == "on"  # the default: BigQuery's behaviour
    assert limits.from_environment({"ONCEOVER_LOCALBQ_ROW_ERRORS": " OFF "}) == {
        "row_errors": "off"
    }
    with pytest.raises(ConfigurationError, match="ONCEOVER_LOCALBQ_ROW_ERRORS='no'"):
        limits.from_environment({"ONCEOVER_LOCALBQ_ROW_ERRORS": "no"})


def test_row_errors_is_installed_once() -> None:
    assert patches.install().count("row_errors") == 1
