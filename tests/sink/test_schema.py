"""Schema checks and Arrow conversion: real Spark batches, appended to the local BigQuery.

Each supported type goes the sink's way: Spark makes the rows, ``df.toArrow()`` gives the
batches a ``DataSourceArrowWriter`` receives, :func:`to_bigquery_arrow` converts them,
they are appended with offsets to a COMMITTED stream, and BigQuery's own rows are
compared with the inputs.

One gap of the local BigQuery (bqemulator 1.4.0, as patched by onceover_tools.localbq) is
pinned here as a strict xfail (:func:`known_gap`): the test turns red if it is ever
fixed, and the gap must then go. BIGNUMERIC columns: DuckDB decimals stop at 38
digits, so ``tables.insert`` answers 500 for a BIGNUMERIC(76, 38) column (DDL creates
one that reports NUMERIC and keeps 5 decimal places). Its conversion is checked on the
Arrow batches themselves. (RECORD columns, once a gap too, work since the launcher's
``record_columns`` patch.)
"""

from __future__ import annotations

import datetime as dt
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from google.api_core.exceptions import InternalServerError
from google.api_core.retry import Retry
from google.cloud import bigquery
from google.cloud.bigquery import SchemaField
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from onceover_jobs.sink.errors import SchemaMismatchError, TableNotFoundError
from onceover_jobs.sink.rows.plan import WritePlan
from onceover_jobs.sink.rows.schema import (
    bigquery_schema_from_arrow,
    load_table_schema,
    plan_write,
    to_bigquery_arrow,
)

from onceover.bigquery import BigQueryConfig, bigquery_client
from tests.helpers.writeapi import append_all, append_request, create_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

COMMITTED = types.WriteStream.Type.COMMITTED
UTC = dt.UTC
TABLE = "onceover-local.d.t"
NO_RETRY = Retry(predicate=lambda _exc: False)


@dataclass(frozen=True)
class Gap:
    """A known gap of the local BigQuery: the error it raises and why."""

    error: type[Exception]
    reason: str


NO_BIGNUMERIC = Gap(InternalServerError, "DuckDB cannot create a DECIMAL(76, 38) column")


@contextmanager
def known_gap(gap: Gap | None) -> Iterator[None]:
    """A strict xfail for ``gap``: its error xfails the test, success fails it.

    Imperative rather than a marker, and without a traceback, because pytest renders a
    marked xfail's traceback with ``ast.parse`` while the local BigQuery's threads log
    the same failure's traceback: on CPython 3.11.7 two threads parsing at once can
    raise SystemError (gh-106905) and end the whole session with INTERNALERROR.
    """
    if gap is None:
        yield
        return
    try:
        yield
    except gap.error as exc:
        reason = f"local BigQuery: {gap.reason} ({type(exc).__name__})"
        raise pytest.xfail.Exception(reason, pytrace=False) from None
    pytest.fail(f"the local BigQuery no longer fails ({gap.reason}): drop the gap", pytrace=False)


# -- helpers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A table of the test's own in the local BigQuery, and the clients to reach it."""

    config: BigQueryConfig
    rest: bigquery.Client
    write: BigQueryWriteClient
    table_id: str

    def create(self, fields: list[SchemaField]) -> None:
        # A client of its own and no retries: the local BigQuery answers 500 for a
        # BIGNUMERIC column, which the default retry repeats for minutes, and the
        # connection it then drops must not be one a later test reuses.
        client = bigquery_client(self.config)
        try:
            client.create_table(bigquery.Table(self.table_id, schema=fields), retry=NO_RETRY)
        finally:
            client.close()


@pytest.fixture
def target(
    bq_config: BigQueryConfig, rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> Target:
    return Target(bq_config, rest, write, f"{dataset}.t")


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """The Arrow schema the sink plans with on the driver (as onceover_jobs.sink.datasource)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def write_through_sink(target: Target, df: DataFrame) -> list[dict[str, Any]]:
    """Plan, convert Spark's batches, append them with offsets; BigQuery's rows by id."""
    table_id, write = target.table_id, target.write
    plan = plan_write(table_id, arrow_schema_of(df), load_table_schema(target.config, table_id))
    batches = [to_bigquery_arrow(batch, plan) for batch in df.toArrow().to_batches()]
    assert all(batch.schema == plan.arrow_schema for batch in batches)
    stream = create_stream(write, table_id, COMMITTED)
    requests, offset = [], 0
    for i, batch in enumerate(batches):
        requests.append(append_request(stream.name, batch, offset, with_schema=i == 0))
        offset += batch.num_rows
    responses = append_all(write, requests)
    assert [(r.error.code, r.error.message) for r in responses] == [(0, "")] * len(requests)
    result = target.rest.query_and_wait(f"SELECT * FROM `{table_id}` ORDER BY id")
    return [dict(row.items()) for row in result]


def converted_table(df: DataFrame, plan: WritePlan) -> pa.Table:
    """Spark's batches of ``df`` converted as the executors would, as one table."""
    batches = [to_bigquery_arrow(batch, plan) for batch in df.toArrow().to_batches()]
    return pa.Table.from_batches(batches, schema=plan.arrow_schema)


def problems_of(arrow_schema: pa.Schema, table_schema: list[SchemaField]) -> list[str]:
    with pytest.raises(SchemaMismatchError) as caught:
        plan_write(TABLE, arrow_schema, table_schema)
    assert caught.value.table == TABLE
    return caught.value.problems


def schema(*fields: tuple[str, pa.DataType] | pa.Field) -> pa.Schema:
    return pa.schema(list(fields))


# -- every type, through the local BigQuery -----------------------------------------


@dataclass(frozen=True)
class Case:
    spark_type: str
    column: SchemaField
    values: list[Any]
    read_back: list[Any] | None = None
    """What BigQuery returns when it is not ``values`` (NULL arrays read as empty)."""
    gap: Gap | None = None


def case(spark_type: str, bq_type: str, values: list[Any], **kwargs: Any) -> Any:
    read_back = kwargs.pop("read_back", None)
    gap = kwargs.pop("gap", None)
    column = SchemaField("v", bq_type, **kwargs)
    return pytest.param(
        Case(spark_type, column, values, read_back, gap),
        id=f"{spark_type}->{kwargs.get('mode', '')}{bq_type}",
    )


# Written out: negating a Decimal rounds it to the context's 28 digits.
NUMERIC_MAX = Decimal("99999999999999999999999999999.999999999")
NUMERIC_MIN = Decimal("-99999999999999999999999999999.999999999")
CITY = [
    SchemaField("zip", "INT64"),
    SchemaField("city", "STRING"),
    SchemaField("country", "STRING"),
]
CASES = [
    case("string", "STRING", ["plain", "", "ünïcødé ✓ 𝄞", None]),
    case("byte", "INT64", [-128, 127, 0, None]),
    case("short", "INT64", [-32768, 32767, None]),
    case("int", "INT64", [-(2**31), 2**31 - 1, None]),
    case("long", "INT64", [-(2**63), 2**63 - 1, 0, None]),
    case("float", "FLOAT64", [1.5, -0.25, 3.4028234663852886e38, None]),
    case("double", "FLOAT64", [0.1, -2.5e-308, 1.7976931348623157e308, None]),
    case("boolean", "BOOL", [True, False, None]),
    case("decimal(10,2)", "NUMERIC", [Decimal("12345678.91"), Decimal("-0.01"), Decimal(0), None]),
    case("decimal(38,9)", "NUMERIC", [NUMERIC_MAX, NUMERIC_MIN, Decimal("-1E-9"), None]),
    case("long", "NUMERIC", [-(2**63), 2**63 - 1, None]),
    case(
        "decimal(38,38)",
        "BIGNUMERIC",
        [Decimal("0.12345678901234567890123456789012345678"), Decimal("-0." + "9" * 38), None],
        gap=NO_BIGNUMERIC,
    ),
    case("decimal(38,0)", "BIGNUMERIC", [Decimal("-" + "9" * 38), None], gap=NO_BIGNUMERIC),
    case(
        "date",
        "DATE",
        [
            dt.date(1, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(2024, 2, 29),
            dt.date(9999, 12, 31),
            None,
        ],
    ),
    case(
        "timestamp",
        "TIMESTAMP",
        [
            dt.datetime(2024, 2, 29, 12, 34, 56, 123456, tzinfo=UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            dt.datetime(1, 1, 1, tzinfo=UTC),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            None,
        ],
    ),
    case(
        "timestamp_ntz",
        "DATETIME",
        [
            dt.datetime(2024, 2, 29, 12, 34, 56, 123456),
            dt.datetime(1969, 12, 31, 23, 59, 59, 1),
            None,
        ],
    ),
    case("binary", "BYTES", [b"\x00\xff\x10", b"", None]),
    case(
        "array<string>",
        "STRING",
        [["a", "b"], [], None],
        mode="REPEATED",
        read_back=[["a", "b"], [], []],
    ),
    case("array<long>", "INT64", [[1, -2, 2**62], [0]], mode="REPEATED"),
    case(
        "array<decimal(10,2)>",
        "NUMERIC",
        [[Decimal("1.50"), Decimal("-2.25")], []],
        mode="REPEATED",
    ),
    case(
        "array<timestamp>",
        "TIMESTAMP",
        [[dt.datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=UTC)], []],
        mode="REPEATED",
    ),
    case(
        "struct<City:string,ZIP:int>",
        "RECORD",
        [("Paris", 75001), (None, None), None],
        fields=CITY,
        read_back=[
            {"zip": 75001, "city": "Paris", "country": None},
            {"zip": None, "city": None, "country": None},
            None,
        ],
    ),
    case(
        "struct<name:string,address:struct<city:string,lines:array<string>>>",
        "RECORD",
        [("Ada", ("London", ["12 St James's Sq", "SW1"])), ("Bob", None)],
        fields=[
            SchemaField("name", "STRING"),
            SchemaField(
                "address",
                "RECORD",
                fields=[SchemaField("city", "STRING"), SchemaField("lines", "STRING", "REPEATED")],
            ),
        ],
        read_back=[
            {"name": "Ada", "address": {"city": "London", "lines": ["12 St James's Sq", "SW1"]}},
            {"name": "Bob", "address": None},
        ],
    ),
    case(
        "array<struct<sku:string,qty:int>>",
        "RECORD",
        [[("a-1", 2), ("b-2", -1)], []],
        mode="REPEATED",
        fields=[SchemaField("sku", "STRING"), SchemaField("qty", "INT64")],
        read_back=[[{"sku": "a-1", "qty": 2}, {"sku": "b-2", "qty": -1}], []],
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_each_type_reads_back_from_bigquery_as_written(
    case: Case,
    spark: SparkSession,
    target: Target,
) -> None:
    df = spark.createDataFrame(list(enumerate(case.values)), f"id long, v {case.spark_type}")

    with known_gap(case.gap):
        target.create([SchemaField("id", "INT64"), case.column])
        rows = write_through_sink(target, df)

        assert [row["id"] for row in rows] == list(range(len(case.values)))
        expected = case.values if case.read_back is None else case.read_back
        assert [row["v"] for row in rows] == expected


def test_columns_go_by_the_tables_spelling_and_absent_ones_read_null(
    spark: SparkSession,
    target: Target,
) -> None:
    fields = [
        SchemaField("id", "INT64", "REQUIRED"),
        SchemaField("note", "STRING"),
        SchemaField("Name", "STRING"),
    ]
    target.create(fields)
    df = spark.createDataFrame([("Ada", 1), ("Bob", 2)], "NAME string, ID long")

    rows = write_through_sink(target, df)

    assert rows == [
        {"id": 1, "note": None, "Name": "Ada"},
        {"id": 2, "note": None, "Name": "Bob"},
    ]


def test_several_batches_append_at_consecutive_offsets(
    spark: SparkSession,
    target: Target,
) -> None:
    fields = [
        SchemaField("id", "INT64"),
        SchemaField("amount", "NUMERIC"),
        SchemaField("pair", "INT64", "REPEATED"),
    ]
    target.create(fields)
    df = spark.range(0, 300, numPartitions=3).selectExpr(
        "id", "CAST(id * 1.25 AS DECIMAL(10, 2)) AS amount", "array(id, -id) AS pair"
    )
    assert len(df.toArrow().to_batches()) > 1

    rows = write_through_sink(target, df)

    assert rows == [
        {"id": i, "amount": Decimal(i) * Decimal("1.25"), "pair": [i, -i]} for i in range(300)
    ]


def test_a_table_created_from_the_dataframe_takes_its_rows(
    spark: SparkSession,
    target: Target,
) -> None:
    df = spark.createDataFrame(
        [(1, "a", Decimal("1.50"), dt.date(2024, 1, 2), [1.5], b"\x01")],
        "id long NOT NULL, s string, d decimal(12,2), day date, xs array<double>, raw binary",
    )
    fields = bigquery_schema_from_arrow(arrow_schema_of(df))
    target.create(fields)

    rows = write_through_sink(target, df)

    assert rows == [
        {"id": 1, "s": "a", "d": Decimal("1.5"), "day": dt.date(2024, 1, 2), "xs": [1.5],
         "raw": b"\x01"}
    ]  # fmt: skip
    assert [(f.name, f.mode) for f in target.rest.get_table(target.table_id).schema] == [
        ("id", "REQUIRED"), ("s", "NULLABLE"), ("d", "NULLABLE"), ("day", "NULLABLE"),
        ("xs", "REPEATED"), ("raw", "NULLABLE"),
    ]  # fmt: skip


# -- conversions the local BigQuery cannot take yet, checked on the Arrow -----------


def test_structs_are_rebuilt_with_the_tables_names_order_and_nulls(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [
            (1, ("Paris", 75001), [(2, "a-1")]),
            (2, None, None),
            (3, (None, 1), []),
        ],
        "id long, Address struct<City:string,ZIP:int>, items array<struct<qty:int,SKU:string>>",
    )
    table_schema = [
        SchemaField("id", "INT64"),
        SchemaField("address", "RECORD", fields=CITY),
        SchemaField(
            "items",
            "RECORD",
            "REPEATED",
            fields=[SchemaField("sku", "STRING"), SchemaField("qty", "INT64")],
        ),
    ]
    plan = plan_write(TABLE, arrow_schema_of(df), table_schema)

    converted = converted_table(df, plan)

    assert converted.schema == schema(
        ("id", pa.int64()),
        ("address", pa.struct([("zip", pa.int64()), ("city", pa.string())])),
        ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int64())]))),
    )
    assert converted.to_pylist() == [
        {"id": 1, "address": {"zip": 75001, "city": "Paris"}, "items": [{"sku": "a-1", "qty": 2}]},
        {"id": 2, "address": None, "items": []},
        {"id": 3, "address": {"zip": 1, "city": None}, "items": []},
    ]


def test_decimals_become_bignumeric_arrow_without_losing_a_digit(spark: SparkSession) -> None:
    values = [Decimal("0.12345678901234567890123456789012345678"), Decimal("-0." + "9" * 38)]
    df = spark.createDataFrame([(v,) for v in [*values, None]], "v decimal(38,38)")
    plan = plan_write(TABLE, arrow_schema_of(df), [SchemaField("v", "BIGNUMERIC")])

    converted = converted_table(df, plan)

    assert converted.schema == schema(("v", pa.decimal256(76, 38)))
    assert converted.column("v").to_pylist() == [*values, None]


def test_a_null_element_in_an_array_fails_the_batch_naming_column_and_row(
    spark: SparkSession,
) -> None:
    df = spark.createDataFrame([(["a"],), (["b", None],)], "Tags array<string>").coalesce(1)
    plan = plan_write(TABLE, arrow_schema_of(df), [SchemaField("tags", "STRING", "REPEATED")])
    [batch] = df.toArrow().to_batches()

    with pytest.raises(SchemaMismatchError) as caught:
        to_bigquery_arrow(batch, plan)

    [problem] = caught.value.problems
    assert "'tags'" in problem
    assert "NULL element (row 1 " in problem


def test_sliced_batches_convert_like_whole_ones() -> None:
    source = schema(
        ("id", pa.int32()),
        ("xs", pa.large_list(pa.int32())),
        ("s", pa.struct([("a", pa.int8())])),
    )
    batch = pa.record_batch(
        [
            pa.array([1, 2, 3, 4], pa.int32()),
            pa.array([[1], None, [2, 3], []], pa.large_list(pa.int32())),
            pa.array([{"a": 1}, None, {"a": 3}, {"a": None}], source.field("s").type),
        ],
        schema=source,
    )
    table_schema = [
        SchemaField("id", "INT64"),
        SchemaField("xs", "INT64", "REPEATED"),
        SchemaField("s", "RECORD", fields=[SchemaField("a", "INT64")]),
    ]
    plan = plan_write(TABLE, source, table_schema)

    whole = to_bigquery_arrow(batch, plan).to_pylist()

    assert whole[1] == {"id": 2, "xs": [], "s": None}
    assert to_bigquery_arrow(batch.slice(1, 2), plan).to_pylist() == whole[1:3]
    assert to_bigquery_arrow(batch.slice(2), plan).to_pylist() == whole[2:]


# -- the plan -----------------------------------------------------------------------


def test_plan_sends_the_documented_arrow_type_for_each_bigquery_type() -> None:
    source = schema(
        ("s", pa.string()), ("b", pa.binary()), ("i", pa.int8()), ("f", pa.float32()),
        ("t", pa.bool_()), ("n", pa.decimal128(10, 2)), ("bn", pa.decimal128(38, 38)),
        ("d", pa.date32()), ("ts", pa.timestamp("us", tz="Europe/Paris")),
        ("dt", pa.timestamp("us")), ("xs", pa.list_(pa.field("element", pa.int32()))),
    )  # fmt: skip
    table_schema = [
        SchemaField("s", "STRING"), SchemaField("b", "BYTES"), SchemaField("i", "INTEGER"),
        SchemaField("f", "FLOAT"), SchemaField("t", "BOOLEAN"), SchemaField("n", "NUMERIC"),
        SchemaField("bn", "BIGNUMERIC"), SchemaField("d", "DATE"),
        SchemaField("ts", "TIMESTAMP"), SchemaField("dt", "DATETIME"),
        SchemaField("xs", "INT64", "REPEATED"),
    ]  # fmt: skip

    plan = plan_write(TABLE, source, table_schema)

    assert plan.arrow_schema == schema(
        ("s", pa.string()), ("b", pa.binary()), ("i", pa.int64()), ("f", pa.float64()),
        ("t", pa.bool_()), ("n", pa.decimal128(38, 9)), ("bn", pa.decimal256(76, 38)),
        ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("dt", pa.timestamp("us")),
        ("xs", pa.list_(pa.int64())),
    )  # fmt: skip


# -- DATETIME from text (the spark-bigquery-connector's PR #1153) ----------------------

CIVIL = [
    # (text, the civil time BigQuery reads from it)
    ("2024-02-29 13:05:09.123456", dt.datetime(2024, 2, 29, 13, 5, 9, 123456)),
    ("2024-02-29T13:05:09", dt.datetime(2024, 2, 29, 13, 5, 9)),
    ("2024-2-9t3:5:9.5", dt.datetime(2024, 2, 9, 3, 5, 9, 500000)),
    ("2024-02-29", dt.datetime(2024, 2, 29)),
    ("2000-02-29 00:00:00.000001", dt.datetime(2000, 2, 29, 0, 0, 0, 1)),
    ("0001-01-01 00:00:00", dt.datetime(1, 1, 1)),
    ("1969-12-31 23:59:59.999999", dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    ("9999-12-31 23:59:59.999999", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
]
NOT_A_LITERAL = [
    "", "2024/02/29", "24-02-29", "2024-02-29 13:05", "2024-02-29 13:05:09Z",
    "2024-02-29 13:05:09+01:00", "2024-02-29 13:05:09.1234567", " 2024-02-29",
    "2024-02-29  13:05:09", "2024-002-29", "yesterday",
]  # fmt: skip
NO_SUCH_TIME = [
    "2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "2024-01-00",
    "0000-01-01", "2024-01-01 24:00:00", "2024-01-01 12:60:00", "2024-01-01 12:00:60",
]  # fmt: skip


def test_a_string_column_feeds_a_datetime_column_as_text_marked_for_sending() -> None:
    from onceover_jobs.sink.rows.datetime_text import is_datetime_text, sent_schema

    source = schema(("id", pa.int64()), ("at", pa.large_string()))
    plan = plan_write(TABLE, source, [SchemaField("id", "INT64"), SchemaField("at", "DATETIME")])

    assert plan.arrow_schema == schema(("id", pa.int64()), ("at", pa.string()))
    assert is_datetime_text(plan.arrow_schema.field("at"))
    assert not is_datetime_text(plan.arrow_schema.field("id"))
    assert sent_schema(plan.arrow_schema) == schema(("id", pa.int64()), ("at", pa.timestamp("us")))
    batch = pa.record_batch([pa.array([1]), pa.array(["2024-1-2"], pa.large_string())], source)
    # The rows keep the text as given (a refused row is set aside as it was).
    assert to_bigquery_arrow(batch, plan).to_pylist() == [{"id": 1, "at": "2024-1-2"}]
    assert is_datetime_text(pickle.loads(pickle.dumps(plan)).arrow_schema.field("at"))


def test_text_goes_only_to_a_whole_datetime_column() -> None:
    problems = problems_of(
        schema(
            ("r", pa.struct([("at", pa.string())])),
            ("ats", pa.list_(pa.string())),
            ("span", pa.struct([("start", pa.string()), ("end", pa.string())])),
        ),
        [
            SchemaField("r", "RECORD", fields=[SchemaField("at", "DATETIME")]),
            SchemaField("ats", "DATETIME", "REPEATED"),
            SchemaField("span", "RANGE", range_element_type="DATETIME"),
        ],
    )
    assert [p.split(":")[0] for p in problems] == [
        "column 'r.at'", "column 'ats'", "column 'span.start'", "column 'span.end'",
    ]  # fmt: skip
    assert all("make it timestamp_ntz first" in p for p in problems)


def test_datetime_text_is_read_as_bigquery_reads_a_datetime_literal() -> None:
    from onceover_jobs.sink.rows.datetime_text import parse

    texts = [text for text, _ in CIVIL]
    sent, unformed, unreal = parse(pa.array([*texts, None]))

    assert sent.type == pa.timestamp("us")
    assert sent.to_pylist() == [*(civil for _, civil in CIVIL), None]
    assert not unformed.any()
    assert not unreal.any()


def test_text_that_is_no_datetime_is_told_apart_from_a_day_that_does_not_exist() -> None:
    from onceover_jobs.sink.rows.datetime_text import parse

    sent, unformed, unreal = parse(pa.array([*NOT_A_LITERAL, *NO_SUCH_TIME]))

    assert sent.null_count == len(sent)
    assert unformed.tolist() == [True] * len(NOT_A_LITERAL) + [False] * len(NO_SUCH_TIME)
    assert unreal.tolist() == [False] * len(NOT_A_LITERAL) + [True] * len(NO_SUCH_TIME)


def test_the_encoder_sends_datetime_and_names_each_row_holding_none() -> None:
    from onceover_jobs.sink.rows.datetime_text import DatetimeTextEncoder, sent_schema
    from onceover_jobs.sink.wire.requests import ArrowEncoder

    source = schema(("id", pa.int64()), ("at", pa.string()))
    plan = plan_write(TABLE, source, [SchemaField("id", "INT64"), SchemaField("at", "DATETIME")])
    encoder = DatetimeTextEncoder(ArrowEncoder(sent_schema(plan.arrow_schema)), plan.arrow_schema)
    texts = ["2024-02-29 13:05:09.5", "2024-02-30 00:00:00", None, "noon", "2024-1-1"]
    batch = pa.record_batch([pa.array(range(5), pa.int64()), pa.array(texts)], plan.arrow_schema)

    encoded = encoder.encode(batch)

    assert encoded.rows == 5
    assert [index for index, _ in encoded.refused] == [1, 3]
    assert encoded.refused[0][1].startswith("Field at: '2024-02-30 00:00:00' is no DATETIME")
    assert encoded.refused[1][1].startswith("Field at: 'noon' is not a DATETIME literal")
    sent = pa.ipc.read_record_batch(encoded.parts[0], sent_schema(plan.arrow_schema))
    assert sent.column("at").to_pylist() == [
        dt.datetime(2024, 2, 29, 13, 5, 9, 500000),
        None,
        None,
        None,
        dt.datetime(2024, 1, 1),
    ]
    # Two requests differing only in a refused text are not identical (invariant 7).
    other = pa.record_batch(
        [batch.column(0), pa.array([*texts[:3], "midday", texts[4]])], plan.arrow_schema
    )
    assert encoder.encode(other).digest != encoded.digest
    good = encoder.encode(batch.take(pa.array([0, 2, 4])))
    assert good.refused == ()
    assert good.digest == ArrowEncoder(sent_schema(plan.arrow_schema)).encode(
        pa.record_batch([pa.array([0, 2, 4]), sent.column("at").take(pa.array([0, 2, 4]))],
                        sent_schema(plan.arrow_schema))
    ).digest  # fmt: skip


def test_plan_pickles_for_the_executors() -> None:
    plan = plan_write(TABLE, schema(("n", pa.decimal128(5, 1))), [SchemaField("n", "NUMERIC")])

    copy = pickle.loads(pickle.dumps(plan))

    assert isinstance(copy, WritePlan)
    assert copy == plan
    assert copy.arrow_schema == schema(("n", pa.decimal128(38, 9)))
    assert copy.serialized_schema == plan.arrow_schema.serialize().to_pybytes()


def test_names_match_case_insensitively_and_the_plan_uses_the_tables() -> None:
    table_schema = [SchemaField("user_id", "INT64"), SchemaField("Email", "STRING")]

    plan = plan_write(TABLE, schema(("EMAIL", pa.string()), ("User_ID", pa.int64())), table_schema)

    assert plan.arrow_schema.names == ["user_id", "Email"]


def test_two_columns_differing_only_in_case_are_one_problem() -> None:
    [problem] = problems_of(
        schema(("email", pa.string()), ("EMAIL", pa.string())), [SchemaField("email", "STRING")]
    )

    assert "'email' and 'EMAIL'" in problem


def test_missing_required_column_is_named() -> None:
    table_schema = [SchemaField("id", "INT64", "REQUIRED"), SchemaField("note", "STRING")]

    [problem] = problems_of(schema(("note", pa.string())), table_schema)

    assert problem == "column 'id' is REQUIRED in the table but the DataFrame does not have it"


def test_unknown_column_is_named() -> None:
    [problem] = problems_of(
        schema(("id", pa.int64()), ("colour", pa.string())), [SchemaField("id", "INT64")]
    )

    assert problem == "column 'colour' (Spark string (Arrow string)) is not in the table"


def test_incompatible_type_names_the_spark_and_bigquery_types() -> None:
    [problem] = problems_of(schema(("id", pa.string())), [SchemaField("id", "INTEGER")])

    assert problem == "column 'id': Spark string (Arrow string) cannot be written to INT64"


@pytest.mark.parametrize(
    ("precision", "scale", "fits"),
    [(38, 9, True), (29, 0, True), (10, 10, False), (30, 0, False), (38, 10, False)],
)
def test_numeric_takes_decimals_of_at_most_9_places_and_29_integer_digits(
    precision: int, scale: int, fits: bool
) -> None:
    source = schema(("amount", pa.decimal128(precision, scale)))
    numeric = [SchemaField("amount", "NUMERIC")]

    if fits:
        assert plan_write(TABLE, source, numeric).arrow_schema == schema(
            ("amount", pa.decimal128(38, 9))
        )
    else:
        [problem] = problems_of(source, numeric)
        assert problem.startswith(
            f"column 'amount': Spark decimal({precision},{scale}) "
            f"(Arrow decimal128({precision}, {scale})) cannot be written to NUMERIC"
        )
        assert "use a BIGNUMERIC column" in problem
    # BIGNUMERIC takes every Spark decimal.
    plan_write(TABLE, source, [SchemaField("amount", "BIGNUMERIC")])


def test_timestamps_keep_their_meaning() -> None:
    problems = problems_of(
        schema(("at", pa.timestamp("us", tz="UTC")), ("wall", pa.timestamp("us"))),
        [SchemaField("at", "DATETIME"), SchemaField("wall", "TIMESTAMP")],
    )

    assert [p.split(":")[0] for p in problems] == ["column 'at'", "column 'wall'"]
    assert "cast it to timestamp_ntz" in problems[0]
    assert "write it to a DATETIME column" in problems[1]


def test_arrays_feed_repeated_columns_and_nothing_else() -> None:
    problems = problems_of(
        schema(
            ("tags", pa.string()),
            ("scores", pa.list_(pa.int64())),
            ("grid", pa.list_(pa.list_(pa.int64()))),
        ),
        [
            SchemaField("tags", "STRING", "REPEATED"),
            SchemaField("scores", "INT64"),
            SchemaField("grid", "INT64", "REPEATED"),
        ],
    )

    assert problems == [
        "column 'tags' (Spark string (Arrow string)) is not an array but the table column "
        "is REPEATED STRING",
        "column 'scores' is an array (Spark array<long> (Arrow list<item: int64>)) but the "
        "table column is INT64 NULLABLE, not REPEATED",
        "column 'grid' is an array of arrays (Spark array<array<long>> (Arrow list<item: "
        "list<item: int64>>)), which BigQuery cannot hold: a REPEATED field's elements "
        "cannot be arrays (wrap the inner array in a struct)",
    ]


def test_nested_problems_are_named_by_their_path() -> None:
    source = schema(
        ("address", pa.struct([("city", pa.int64()), ("zip_code", pa.string())])),
        ("items", pa.list_(pa.struct([("sku", pa.bool_())]))),
    )
    table_schema = [
        SchemaField(
            "address",
            "RECORD",
            fields=[SchemaField("city", "STRING"), SchemaField("country", "STRING", "REQUIRED")],
        ),
        SchemaField("items", "RECORD", "REPEATED", fields=[SchemaField("sku", "STRING")]),
    ]

    problems = problems_of(source, table_schema)

    assert problems == [
        "column 'address.city': Spark long (Arrow int64) cannot be written to STRING",
        "column 'address.zip_code' (Spark string (Arrow string)) is not in the table",
        "column 'address.country' is REQUIRED in the table but the DataFrame does not have it",
        "column 'items.sku': Spark boolean (Arrow bool) cannot be written to STRING",
    ]


def test_every_problem_is_named_at_once() -> None:
    source = schema(
        ("id", pa.string()),
        ("extra", pa.int64()),
        ("tags", pa.string()),
        ("price", pa.decimal128(38, 12)),
        ("props", pa.map_(pa.string(), pa.string())),
    )
    table_schema = [
        SchemaField("id", "INT64"),
        SchemaField("tags", "STRING", "REPEATED"),
        SchemaField("price", "NUMERIC"),
        SchemaField("props", "JSON"),
        SchemaField("created", "TIMESTAMP", "REQUIRED"),
    ]

    with pytest.raises(SchemaMismatchError) as caught:
        plan_write(TABLE, source, table_schema)

    problems = caught.value.problems
    assert [p.split(" ")[1].strip(":") for p in problems] == [
        "'id'", "'extra'", "'tags'", "'price'", "'props'", "'created'",
    ]  # fmt: skip
    assert "does not write BigQuery JSON columns" in problems[4]
    assert str(caught.value).startswith(f"schema of the DataFrame does not fit {TABLE}: ")
    assert all(p in str(caught.value) for p in problems)


def test_a_nullable_column_may_feed_a_required_one() -> None:
    nullable = schema(pa.field("id", pa.int64(), nullable=True))

    plan = plan_write(TABLE, nullable, [SchemaField("id", "INT64", "REQUIRED")])

    assert plan.arrow_schema.names == ["id"]


# -- the schema of a new table ------------------------------------------------------


def test_new_table_schema_follows_the_dataframe(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [],
        "id long NOT NULL, s string, b byte, f float, ok boolean, small decimal(18,4), "
        "wide decimal(38,0), fine decimal(20,12), day date, at timestamp, "
        "wall timestamp_ntz, raw binary, tags array<string>, "
        "address struct<City:string,zip:int NOT NULL>, items array<struct<sku:string>>",
    )

    fields = bigquery_schema_from_arrow(arrow_schema_of(df))

    assert fields == [
        SchemaField("id", "INT64", "REQUIRED"),
        SchemaField("s", "STRING"),
        SchemaField("b", "INT64"),
        SchemaField("f", "FLOAT64"),
        SchemaField("ok", "BOOL"),
        SchemaField("small", "NUMERIC"),
        SchemaField("wide", "BIGNUMERIC"),
        SchemaField("fine", "BIGNUMERIC"),
        SchemaField("day", "DATE"),
        SchemaField("at", "TIMESTAMP"),
        SchemaField("wall", "DATETIME"),
        SchemaField("raw", "BYTES"),
        SchemaField("tags", "STRING", "REPEATED"),
        SchemaField(
            "address",
            "RECORD",
            fields=[SchemaField("City", "STRING"), SchemaField("zip", "INT64", "REQUIRED")],
        ),
        SchemaField("items", "RECORD", "REPEATED", fields=[SchemaField("sku", "STRING")]),
    ]
    # The DataFrame fits the table made for it.
    plan_write(TABLE, arrow_schema_of(df), fields)


def test_new_table_schema_names_what_bigquery_cannot_hold(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [],
        "id long, grid array<array<int>>, props map<string,int>, s struct<deep:array<array<int>>>",
    )

    with pytest.raises(SchemaMismatchError) as caught:
        bigquery_schema_from_arrow(arrow_schema_of(df), table=TABLE)

    problems = caught.value.problems
    assert [p.split(" ")[1].strip(":") for p in problems] == ["'grid'", "'props'", "'s.deep'"]
    assert "array of arrays" in problems[0]
    assert "map_entries()" in problems[1]
    assert caught.value.table == TABLE


# -- the table's schema -------------------------------------------------------------


def test_load_table_schema_reads_the_table(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table_id = f"{dataset}.t"
    rest.create_table(bigquery.Table(table_id, schema=[
        SchemaField("id", "INTEGER", "REQUIRED"),
        SchemaField("tags", "STRING", "REPEATED"),
        SchemaField("address", "RECORD", fields=[SchemaField("city", "STRING")]),
    ]))  # fmt: skip

    fields = load_table_schema(bq_config, table_id)

    assert [(f.name, f.field_type, f.mode) for f in fields] == [
        ("id", "INTEGER", "REQUIRED"),
        ("tags", "STRING", "REPEATED"),
        ("address", "RECORD", "NULLABLE"),
    ]
    assert [f.name for f in fields[2].fields] == ["city"]


@pytest.mark.parametrize("missing", ["table", "dataset"])
def test_a_missing_table_is_named_with_how_to_create_it(
    missing: str, bq_config: BigQueryConfig, dataset: str
) -> None:
    table_id = f"{dataset}.nope" if missing == "table" else f"{bq_config.resolved_project()}.nope.t"

    with pytest.raises(TableNotFoundError) as caught:
        load_table_schema(bq_config, table_id)

    assert str(caught.value).startswith(f"table {table_id} does not exist")
    assert "--create-table" in str(caught.value)
