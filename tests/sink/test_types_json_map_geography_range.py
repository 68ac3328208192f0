"""JSON, GEOGRAPHY, RANGE and map columns, and DATETIME from text: what the sink sends
and what BigQuery keeps.

BigQuery's Arrow ingestion takes JSON and GEOGRAPHY (WKT) as Utf8 text, RANGE<T> as a
struct of ``start`` and ``end`` and REPEATED columns as lists; Google's
spark-bigquery-connector writes a Spark map to a REPEATED RECORD of ``key`` and
``value``. Each is written here through the sink (``df.write.format("onceover")``, with
``arrow_rows`` and with proto rows) into the local BigQuery and read back, and the
exact Arrow batches :func:`to_bigquery_arrow` makes are checked on their own.

What the local BigQuery (bqemulator 1.4.0 as patched by onceover_tools.localbq) holds,
measured on 2026-11-25: JSON, RANGE<DATE|DATETIME|TIMESTAMP> and REPEATED RECORD
columns are created, appended to and read back. A GEOGRAPHY column is created and
appended to (DuckDB 1.5's own GEOMETRY parses the WKT), but reading the column itself
answers 500: bqemulator turns the stored WKB back into WKT with DuckDB's spatial
extension, which it would download and the launcher does not load. ``ST_ASTEXT(place)``
needs no extension, so the geography is read back through it. Text it cannot parse
(JSON or WKT) fails the whole request with the database's conversion error (UNKNOWN)
instead of BigQuery's ``row_errors``: on a PENDING stream, the sink's default, only at
``BatchCommitWriteStreams``. A RANGE whose start is after its end is stored (BigQuery
refuses it), so that is not tested here.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery import SchemaField
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onceover_jobs.sink.errors import SchemaMismatchError
from onceover_jobs.sink.rows.proto_rows import ROOT_MESSAGE, proto_schema, serialize_rows
from onceover_jobs.sink.rows.schema import plan_write, to_bigquery_arrow
from pyspark.sql import DataFrame, SparkSession

TABLE = "onceover-local.d.t"
UTC = dt.UTC
F = SchemaField
MAP_FIELDS = [F("key", "STRING", "REQUIRED"), F("value", "INT64")]
"""The spark-bigquery-connector's column for a map<string, int> (nullable values)."""

TABLE_SCHEMA = [
    F("id", "INT64", "REQUIRED"),
    F("doc", "JSON"),
    F("props", "RECORD", "REPEATED", fields=MAP_FIELDS),
    F("place", "GEOGRAPHY"),
    F("period", "RANGE", range_element_type="DATE"),
    F("span", "RANGE", range_element_type="DATETIME"),
    F("during", "RANGE", range_element_type="TIMESTAMP"),
]
SPARK_SCHEMA = (
    "id long, doc string, props map<string,int>, place string, "
    "period struct<start:date,end:date>, "
    "span struct<start:timestamp_ntz,end:timestamp_ntz>, "
    "during struct<start:timestamp,end:timestamp>"
)
DOC = '{"name": "Ada", "tags": ["x", "y"], "n": 1.5, "ok": true, "none": null, "deep": {"a": [1]}}'
T0 = dt.datetime(2024, 2, 29, 12, 34, 56, 123456)
T1 = dt.datetime(2024, 3, 1, 0, 0, 0, 1)
ROWS: list[tuple[Any, ...]] = [
    (
        0,
        DOC,
        {"a": 1, "b": None},
        "POINT(1 2)",
        (dt.date(2024, 1, 1), dt.date(2024, 2, 1)),
        (T0, T1),
        (T0.replace(tzinfo=UTC), T1.replace(tzinfo=UTC)),
    ),
    # Scalars as JSON, an empty map, unbounded ends and starts.
    (1, '"just text"', {}, "LINESTRING(0 0, 1 1.5)", (None, dt.date(2024, 1, 1)),
     (T0, None), (None, None)),
    (2, "[1, -2.5e3, \"ü\"]", None, None, None, None, None),
    (3, None, {"z": -7}, "POLYGON((0 0, 1 0, 1 1, 0 0))", None, None, None),
]  # fmt: skip


def wkt(text: str | None) -> str | None:
    """WKT without the optional spaces (the local BigQuery prints ``POINT (1 2)``)."""
    return None if text is None else re.sub(r"\s*([(),])\s*", r"\1", text)


def bounds(pair: tuple[Any, Any] | None) -> dict[str, Any] | None:
    return None if pair is None else {"start": pair[0], "end": pair[1]}


def expected_rows() -> list[dict[str, Any]]:
    """What BigQuery holds for :data:`ROWS`: JSON parsed, NULL maps empty."""
    return [
        {
            "id": i,
            "doc": None if doc is None else json.loads(doc),
            "props": [{"key": k, "value": v} for k, v in (props or {}).items()],
            "place": wkt(place),
            "period": bounds(period),
            "span": bounds(span),
            "during": bounds(during),
        }
        for i, doc, props, place, period, span, during in ROWS
    ]


def read_back(rest: bigquery.Client, table: str) -> list[dict[str, Any]]:
    # ST_ASTEXT: the local BigQuery cannot read a GEOGRAPHY column out as it is (module doc).
    query = (
        "SELECT id, doc, props, ST_ASTEXT(place) AS place, period, span, during "
        f"FROM `{table}` ORDER BY id"
    )
    rows = [dict(row.items()) for row in rest.query_and_wait(query)]
    for row in rows:
        row["place"] = wkt(row["place"])
    return rows


def write(df: DataFrame, table: str, ledger: Path, **options: str) -> None:
    writer = df.write.format("onceover").mode("append").option("table", table)
    writer = writer.option("ledger", str(ledger))
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


# -- through the sink into the local BigQuery ---------------------------------------


@pytest.mark.parametrize("row_format", ["arrow", "proto"])
def test_each_type_reads_back_from_bigquery_as_written(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, row_format: str
) -> None:
    table = f"{dataset}.t"
    rest.create_table(bigquery.Table(table, schema=TABLE_SCHEMA))
    df = spark.createDataFrame(ROWS, SPARK_SCHEMA).coalesce(1)

    write(df, table, tmp_path, row_format=row_format, run_id=f"types-{row_format}")

    assert read_back(rest, table) == expected_rows()


@pytest.mark.parametrize(
    ("bq_type", "bad", "error"),
    [
        ("JSON", '{"a": 1', "Malformed JSON"),
        ("GEOGRAPHY", "POINT(1", "Failed to parse geometry"),
    ],
)
def test_text_bigquery_cannot_parse_fails_the_write_and_lands_nothing(
    spark: SparkSession,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    bq_type: str,
    bad: str,
    error: str,
) -> None:
    # Not parsed by the sink (onceover_jobs.sink.rows.schema): BigQuery refuses such rows with
    # row_errors; the local BigQuery fails the PENDING streams' commit (module doc).
    table = f"{dataset}.t"
    rest.create_table(bigquery.Table(table, schema=[F("id", "INT64"), F("v", bq_type)]))
    good = '{"a": 1}' if bq_type == "JSON" else "POINT(1 2)"
    df = spark.createDataFrame([(0, good), (1, bad)], "id long, v string").coalesce(1)

    with pytest.raises(Exception, match=re.escape(error)):
        write(df, table, tmp_path, run_id="bad-text")

    rows = rest.query_and_wait(f"SELECT COUNT(*) AS n FROM `{table}`")
    assert [row["n"] for row in rows] == [0]


def test_a_datetime_column_takes_text_and_sets_aside_text_that_is_none(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """As the spark-bigquery-connector takes it (its PR #1153): a string column feeds a
    DATETIME column, any form of BigQuery's DATETIME literal, no time zone applied; a
    text that is none is a row refused, here set aside in the dead-letter table."""
    table, dead_letter = f"{dataset}.t", f"{dataset}.refused"
    rest.create_table(bigquery.Table(table, schema=[F("id", "INT64"), F("at", "DATETIME")]))
    texts = ["2024-02-29 12:34:56.123456", "2024-2-29T1:02:03", "2024-02-29", None, "2024-02-30"]
    df = spark.createDataFrame(list(enumerate(texts)), "id long, at string").coalesce(1)

    write(df, table, tmp_path, run_id="datetime-text", key="id", dead_letter=dead_letter)

    rows = rest.query_and_wait(f"SELECT id, `at` FROM `{table}` ORDER BY id")
    assert [(row["id"], row["at"]) for row in rows] == [
        (0, T0),
        (1, dt.datetime(2024, 2, 29, 1, 2, 3)),
        (2, dt.datetime(2024, 2, 29)),
        (3, None),
    ]
    aside = rest.query_and_wait(f"SELECT `key`, `column`, `row` FROM `{dead_letter}`")
    assert [(r["key"], r["column"], json.loads(r["row"])) for r in aside] == [
        ("4", "at", {"id": 4, "at": "2024-02-30"})
    ]


# -- the Arrow batches sent ---------------------------------------------------------


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema the sink plans with on the driver (as onceover_jobs.sink.datasource)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def converted(batch: pa.RecordBatch, table_schema: list[SchemaField]) -> pa.RecordBatch:
    return to_bigquery_arrow(batch, plan_write(TABLE, batch.schema, table_schema))


def range_of(arrow_type: pa.DataType) -> pa.StructType:
    return pa.struct([("start", arrow_type), ("end", arrow_type)])


def test_spark_batches_become_the_documented_arrow(spark: SparkSession) -> None:
    df = spark.createDataFrame(ROWS, SPARK_SCHEMA)
    plan = plan_write(TABLE, arrow_schema_of(df), TABLE_SCHEMA)

    batches = [to_bigquery_arrow(batch, plan) for batch in df.toArrow().to_batches()]
    sent = pa.Table.from_batches(batches, schema=plan.arrow_schema)

    assert sent.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("doc", pa.string()),
            ("props", pa.list_(pa.struct([("key", pa.string()), ("value", pa.int64())]))),
            ("place", pa.string()),
            ("period", range_of(pa.date32())),
            ("span", range_of(pa.timestamp("us"))),
            ("during", range_of(pa.timestamp("us", tz="UTC"))),
        ]
    )
    # The text exactly as Spark had it (BigQuery parses it), the map's entries in order.
    assert sent.to_pylist() == [
        {
            "id": i,
            "doc": doc,
            "props": [{"key": k, "value": v} for k, v in (props or {}).items()],
            "place": place,
            "period": bounds(period),
            "span": bounds(span),
            "during": bounds(during),
        }
        for i, doc, props, place, period, span, during in ROWS
    ]


def test_maps_of_any_layout_become_key_value_lists() -> None:
    # Arrow lets a map name its key and value anything; BigQuery's are key and value.
    named = pa.map_(pa.field("k", pa.string(), nullable=False), pa.field("v", pa.int32()))
    nested = pa.map_(pa.string(), pa.struct([("n", pa.int8()), ("xs", pa.list_(pa.int16()))]))
    maps = pa.map_(pa.string(), pa.map_(pa.string(), pa.int64()))
    source = pa.schema(
        [
            ("id", pa.int32()),
            ("m", named),
            ("deep", nested),
            ("s", pa.struct([("inner", pa.map_(pa.int64(), pa.large_string()))])),
            ("mm", maps),
        ]
    )
    batch = pa.record_batch(
        [
            pa.array([1, 2, 3, 4], pa.int32()),
            pa.array([[("a", 1)], None, [], [("b", None), ("c", 3)]], named),
            pa.array([[("x", {"n": 1, "xs": [1, 2]})], [("y", {"n": None, "xs": None})],
                      None, [("z", None)]], nested),
            pa.array([{"inner": [(7, "seven")]}, {"inner": None}, None, {"inner": []}],
                     source.field("s").type),
            pa.array([[("p", [("q", 1), ("r", 2)])], [("p", None)], [("p", [])], None], maps),
        ],
        schema=source,
    )  # fmt: skip
    table_schema = [
        F("id", "INT64"),
        F("m", "RECORD", "REPEATED", fields=MAP_FIELDS),
        F("deep", "RECORD", "REPEATED", fields=[
            F("key", "STRING", "REQUIRED"),
            F("value", "RECORD", fields=[F("n", "INT64"), F("xs", "INT64", "REPEATED")]),
        ]),
        F("s", "RECORD", fields=[
            F("inner", "RECORD", "REPEATED", fields=[F("KEY", "INT64"), F("Value", "STRING")]),
        ]),
        F("mm", "RECORD", "REPEATED", fields=[
            F("key", "STRING"), F("value", "RECORD", "REPEATED", fields=MAP_FIELDS),
        ]),
    ]  # fmt: skip

    whole = converted(batch, table_schema)

    assert whole.schema.field("m").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.int64())])
    )
    # The table's spelling of the RECORD's fields, as for any RECORD.
    assert whole.schema.field("s").type == pa.struct(
        [("inner", pa.list_(pa.struct([("KEY", pa.int64()), ("Value", pa.string())])))]
    )
    assert whole.to_pylist() == [
        {"id": 1, "m": [{"key": "a", "value": 1}],
         "deep": [{"key": "x", "value": {"n": 1, "xs": [1, 2]}}],
         "s": {"inner": [{"KEY": 7, "Value": "seven"}]},
         "mm": [{"key": "p", "value": [{"key": "q", "value": 1}, {"key": "r", "value": 2}]}]},
        {"id": 2, "m": [], "deep": [{"key": "y", "value": {"n": None, "xs": []}}],
         "s": {"inner": []}, "mm": [{"key": "p", "value": []}]},
        {"id": 3, "m": [], "deep": [], "s": None, "mm": [{"key": "p", "value": []}]},
        {"id": 4, "m": [{"key": "b", "value": None}, {"key": "c", "value": 3}],
         "deep": [{"key": "z", "value": None}], "s": {"inner": []}, "mm": []},
    ]  # fmt: skip
    plan = plan_write(TABLE, source, table_schema)
    for start, length in [(1, 2), (2, 2), (3, 1)]:
        sliced = to_bigquery_arrow(batch.slice(start, length), plan)
        assert sliced.to_pylist() == whole.to_pylist()[start : start + length]


def test_json_and_geography_text_is_sent_as_utf8() -> None:
    source = pa.schema([("doc", pa.large_string()), ("place", pa.large_string())])
    batch = pa.record_batch(
        [pa.array(["{}", None], pa.large_string()), pa.array([None, "POINT(0 0)"],
                                                              pa.large_string())],
        schema=source,
    )  # fmt: skip

    sent = converted(batch, [F("doc", "JSON"), F("place", "GEOGRAPHY")])

    assert sent.schema == pa.schema([("doc", pa.string()), ("place", pa.string())])
    assert sent.to_pylist() == [{"doc": "{}", "place": None}, {"doc": None, "place": "POINT(0 0)"}]


def test_range_bounds_are_sent_as_their_element_type() -> None:
    paris = pa.timestamp("us", tz="Europe/Paris")
    source = pa.schema(
        [
            ("during", pa.struct([("END", paris), ("Start", paris)])),
            ("days", pa.list_(range_of(pa.date32()))),
        ]
    )
    noon_paris = dt.datetime(2024, 7, 1, 12, tzinfo=UTC) - dt.timedelta(hours=2)
    batch = pa.record_batch(
        [
            pa.array([{"END": None, "Start": noon_paris}, None], source.field("during").type),
            pa.array([[{"start": dt.date(2024, 1, 1), "end": None}], None],
                     source.field("days").type),
        ],
        schema=source,
    )  # fmt: skip
    table_schema = [
        F("during", "RANGE", range_element_type="TIMESTAMP"),
        F("days", "RANGE", "REPEATED", range_element_type="DATE"),
    ]

    sent = converted(batch, table_schema)

    # start before end, whatever the struct's order; instants in UTC.
    assert sent.schema == pa.schema(
        [
            ("during", range_of(pa.timestamp("us", tz="UTC"))),
            ("days", pa.list_(range_of(pa.date32()))),
        ]
    )
    assert sent.to_pylist() == [
        {"during": {"start": noon_paris, "end": None},
         "days": [{"start": dt.date(2024, 1, 1), "end": None}]},
        {"during": None, "days": []},
    ]  # fmt: skip


def test_integers_become_bignumeric_arrow() -> None:
    # The one row of docs/guides/types.md nothing else checked (no BIGNUMERIC in the local
    # BigQuery).
    source = pa.schema([("b", pa.int8()), ("n", pa.int64())])
    batch = pa.record_batch(
        [pa.array([-128, None], pa.int8()), pa.array([2**63 - 1, -(2**63)], pa.int64())],
        schema=source,
    )

    sent = converted(batch, [F("b", "BIGNUMERIC"), F("n", "BIGNUMERIC")])

    assert sent.schema == pa.schema([("b", pa.decimal256(76, 38)), ("n", pa.decimal256(76, 38))])
    assert sent.to_pylist() == [
        {"b": Decimal(-128), "n": Decimal(2**63 - 1)},
        {"b": None, "n": Decimal(-(2**63))},
    ]


# -- the plan's refusals ------------------------------------------------------------


def problems_of(source: pa.Schema, table_schema: list[SchemaField]) -> list[str]:
    with pytest.raises(SchemaMismatchError) as caught:
        plan_write(TABLE, source, table_schema)
    return caught.value.problems


def test_what_does_not_fit_is_named_with_the_way_out() -> None:
    string_map = pa.map_(pa.string(), pa.string())
    dates = range_of(pa.date32())
    source = pa.schema(
        [
            ("tags", string_map),
            ("attrs", string_map),
            ("labels", string_map),
            ("doc", pa.struct([("a", pa.int64())])),
            ("count", pa.int64()),
            ("place", pa.binary()),
            ("day", pa.date32()),
            ("window", pa.struct([("from", pa.date32()), ("to", pa.date32())])),
            ("span", range_of(pa.timestamp("us", tz="UTC"))),
            ("lists", pa.list_(string_map)),
            ("period", dates),
        ]
    )
    table_schema = [
        F("tags", "RECORD", fields=MAP_FIELDS),
        F("attrs", "STRING", "REPEATED"),
        F("labels", "RECORD", "REPEATED", fields=[F("name", "STRING"), F("value", "STRING")]),
        F("doc", "JSON"),
        F("count", "JSON"),
        F("place", "GEOGRAPHY"),
        F("day", "RANGE", range_element_type="DATE"),
        F("window", "RANGE", range_element_type="DATE"),
        F("span", "RANGE", range_element_type="DATETIME"),
        F("lists", "RECORD", "REPEATED", fields=MAP_FIELDS),
        F("period", "RANGE"),
    ]

    problems = problems_of(source, table_schema)

    assert [p.split(" ")[1].strip(":") for p in problems] == [
        "'tags'", "'attrs'", "'labels.key'", "'doc'", "'count'", "'place'", "'day'",
        "'window'", "'span.start'", "'span.end'", "'lists'", "'period'",
    ]  # fmt: skip
    tags, attrs, labels, doc, count, place, day, window, start, end, lists, period = problems
    assert tags.endswith("a map goes to a REPEATED RECORD column with the fields key and value")
    assert "is a map (Spark map<string,string>" in attrs
    assert "REPEATED STRING; a map goes to a REPEATED RECORD column" in attrs
    assert labels.startswith("column 'labels.key' (Spark string (Arrow string)) is not in")
    assert "does not write BigQuery JSON columns from a map or struct" in doc
    assert "to_json() makes it" in doc
    assert count.startswith("column 'count': Spark long (Arrow int64) cannot be written to JSON")
    assert "takes JSON text from a string column" in count
    assert "GEOGRAPHY column takes WKT text from a string column" in place
    assert "cannot be written to RANGE<DATE>: a RANGE is written from a struct" in day
    assert "exactly two fields, start and end" in window
    assert "cannot be written to the start of RANGE<DATETIME>" in start
    assert "cast it to timestamp_ntz" in start
    assert "cannot be written to the end of RANGE<DATETIME>" in end
    assert "is an array of maps" in lists
    assert (
        period
        == "column 'period' is a RANGE of no element type, not of DATE, DATETIME or TIMESTAMP"
    )


# -- proto rows ---------------------------------------------------------------------


def message_class(schema: Any) -> Any:
    """The message class BigQuery would build from the writer schema (a file of its own)."""
    from google.cloud.bigquery_storage_v1 import types

    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="row.proto", syntax="proto2")
    file.message_type.add().CopyFrom(types.ProtoSchema.pb(schema).proto_descriptor)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(ROOT_MESSAGE))


def test_proto_rows_carry_json_geography_and_range_as_google_documents() -> None:
    table_schema = [
        F("doc", "JSON"),
        F("place", "GEOGRAPHY"),
        F("period", "RANGE", range_element_type="DATE"),
        F("during", "RANGE", range_element_type="TIMESTAMP"),
        F("span", "RANGE", range_element_type="DATETIME"),
    ]
    utc = pa.timestamp("us", tz="UTC")
    source = pa.schema(
        [
            ("doc", pa.large_string()),
            ("place", pa.string()),
            ("period", range_of(pa.date32())),
            ("during", pa.struct([("END", utc), ("Start", utc)])),
            ("span", range_of(pa.timestamp("us"))),
        ]
    )
    batch = pa.record_batch(
        [
            pa.array(['{"a": [1]}', None], pa.large_string()),
            pa.array(["POINT(1 2)", None]),
            pa.array([{"start": dt.date(1970, 1, 2), "end": None}, None],
                     source.field("period").type),
            pa.array([{"END": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "Start": None},
                      None], source.field("during").type),
            pa.array([{"start": T0, "end": T1}, None], source.field("span").type),
        ],
        schema=source,
    )  # fmt: skip
    sent = converted(batch, table_schema)  # what the proto encoder is given

    schema = proto_schema(table_schema, sent.schema)
    rows = [message_class(schema).FromString(row) for row in serialize_rows(sent, table_schema)]

    descriptor = schema.proto_descriptor
    proto = descriptor_pb2.FieldDescriptorProto
    assert [(f.name, f.type) for f in descriptor.field] == [
        ("doc", proto.TYPE_STRING), ("place", proto.TYPE_STRING),
        ("period", proto.TYPE_MESSAGE), ("during", proto.TYPE_MESSAGE),
        ("span", proto.TYPE_MESSAGE),
    ]  # fmt: skip
    # RANGE<T>: a nested message of start and end, each T's proto type (Google's table).
    assert [[(f.name, f.number, f.type) for f in nested.field]
            for nested in descriptor.nested_type] == [
        [("start", 1, proto.TYPE_INT32), ("end", 2, proto.TYPE_INT32)],
        [("start", 1, proto.TYPE_INT64), ("end", 2, proto.TYPE_INT64)],
        [("start", 1, proto.TYPE_STRING), ("end", 2, proto.TYPE_STRING)],
    ]  # fmt: skip
    first, second = rows
    assert (first.doc, first.place) == ('{"a": [1]}', "POINT(1 2)")
    assert first.period.start == 1
    assert not first.period.HasField("end")  # unbounded
    assert first.during.end == 1_000_000
    assert not first.during.HasField("start")
    assert (first.span.start, first.span.end) == (
        "2024-02-29 12:34:56.123456", "2024-03-01 00:00:00.000001"
    )  # fmt: skip
    assert not any(second.HasField(name) for name in ("doc", "place", "period", "during", "span"))


def test_proto_rows_refuse_a_range_that_is_not_start_and_end() -> None:
    source = pa.schema([("window", pa.struct([("from", pa.date32()), ("to", pa.date32())]))])

    with pytest.raises(TypeError, match="column 'window': RANGE<DATE> wants a struct of start"):
        proto_schema([F("window", "RANGE", range_element_type="DATE")], source)
