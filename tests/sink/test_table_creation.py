"""A missing table created as the spark-bigquery-connector creates it
(``onceover_jobs.sink.table.creation``): from the DataFrame's schema, shaped by the
connector's table options, once when drivers race; asked of the local BigQuery."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink.errors import SinkOptionError, TableNotFoundError
from onceover_jobs.sink.table.creation import ensure_table, new_table, table_creation

from onceover.bigquery import BigQueryConfig

ORDERS = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        ("day", pa.date32()),
        ("placed_at", pa.timestamp("us", tz="UTC")),
        ("currency", pa.string()),
        ("amount", pa.float64()),
        ("tags", pa.list_(pa.string())),
    ]
)


def test_a_missing_table_is_created_from_the_dataframe_with_the_connectors_options(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table_id = f"{dataset}.orders"
    creation = table_creation(
        {
            "partitionfield": "day",
            "partitionexpirationms": "7776000000",
            "clusteredfields": "currency, order_id",
            "bigquerytablelabel.team": "billing",
            "bigquerytablelabel.cost-center": "cc-42",
        }
    )
    fields = ensure_table(bq_config, table_id, creation, ORDERS)
    table = rest.get_table(table_id)
    assert [(f.name, f.field_type, f.mode) for f in table.schema] == [
        ("order_id", "INT64", "REQUIRED"),
        ("day", "DATE", "NULLABLE"),
        ("placed_at", "TIMESTAMP", "NULLABLE"),
        ("currency", "STRING", "NULLABLE"),
        ("amount", "FLOAT64", "NULLABLE"),
        ("tags", "STRING", "REPEATED"),
    ]
    assert [f.name for f in fields] == [f.name for f in table.schema]
    assert table.time_partitioning is not None
    assert (table.time_partitioning.type_, table.time_partitioning.field) == ("DAY", "day")
    assert table.time_partitioning.expiration_ms == 7_776_000_000
    assert table.clustering_fields == ["currency", "order_id"]
    assert table.labels == {"team": "billing", "cost-center": "cc-42"}


@pytest.mark.parametrize(
    ("options", "partitioned"),
    [
        ({"partitiontype": "HOUR"}, ("HOUR", None)),  # by ingestion time
        ({"partitionfield": "placed_at", "partitiontype": "MONTH"}, ("MONTH", "placed_at")),
        (
            {"partitionfield": "order_id", "partitionrangestart": "0",
             "partitionrangeend": "1000000", "partitionrangeinterval": "1000"},
            ("range", "order_id"),
        ),
    ],
)  # fmt: skip
def test_each_partitioning_the_connector_creates(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    options: dict[str, str],
    partitioned: tuple[str, str | None],
) -> None:
    table_id = f"{dataset}.orders"
    ensure_table(bq_config, table_id, table_creation(options), ORDERS)
    table = rest.get_table(table_id)
    if partitioned[0] == "range":
        assert table.range_partitioning is not None
        bounds = table.range_partitioning.range_
        assert (table.range_partitioning.field, bounds.start, bounds.end, bounds.interval) == (
            "order_id", 0, 1_000_000, 1_000,
        )  # fmt: skip
    else:
        assert table.time_partitioning is not None
        assert (table.time_partitioning.type_, table.time_partitioning.field) == partitioned


def test_an_existing_table_is_written_as_it_is(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    """The options shape a table the write creates, never one it finds (the connector's
    rule): the table's own schema comes back, unpartitioned as it was."""
    table_id = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table_id, schema=[bigquery.SchemaField("order_id", "INT64")]))
    fields = ensure_table(bq_config, table_id, table_creation({"partitionfield": "day"}), ORDERS)
    assert [f.name for f in fields] == ["order_id"]
    assert rest.get_table(table_id).time_partitioning is None


def test_create_never_refuses_a_missing_table_naming_the_option(
    bq_config: BigQueryConfig, dataset: str
) -> None:
    creation = table_creation({"createdisposition": "create_never"})
    with pytest.raises(TableNotFoundError) as refused:
        ensure_table(bq_config, f"{dataset}.missing", creation, ORDERS)
    assert f"{dataset}.missing does not exist" in str(refused.value)
    assert "createDisposition is CREATE_NEVER" in str(refused.value)


def test_a_missing_dataset_is_named_and_never_created(bq_config: BigQueryConfig) -> None:
    table_id = f"{bq_config.project}.no_such_dataset.orders"
    with pytest.raises(TableNotFoundError, match="the dataset must exist"):
        ensure_table(bq_config, table_id, table_creation({}), ORDERS)


def test_drivers_racing_to_create_a_table_create_it_once_and_all_write_into_it(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table_id = f"{dataset}.raced"
    creation = table_creation({"partitionfield": "day"})
    start = threading.Barrier(4)
    results: list[list[str]] = []
    failures: list[BaseException] = []

    def driver() -> None:
        start.wait(timeout=30)
        try:
            results.append([f.name for f in ensure_table(bq_config, table_id, creation, ORDERS)])
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=driver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert results == [[f.name for f in ORDERS]] * 4
    assert [t.table_id for t in rest.list_tables(dataset)] == ["raced"]


@pytest.mark.parametrize(
    ("options", "option", "words"),
    [
        ({"partitionfield": "currency"}, "partitionField", "takes a DATE, TIMESTAMP or DATETIME"),
        ({"partitionfield": "nope"}, "partitionField", "not a column of the DataFrame"),
        (
            {"partitionfield": "day", "partitionrangestart": "0", "partitionrangeend": "9",
             "partitionrangeinterval": "1"},
            "partitionField", "takes an INT64",
        ),
        ({"clusteredfields": "amount"}, "clusteredFields", "FLOAT64"),
        ({"clusteredfields": "tags"}, "clusteredFields", "REPEATED"),
    ],
)  # fmt: skip
def test_a_column_the_table_cannot_be_shaped_by_is_refused_naming_the_option(
    options: dict[str, str], option: str, words: str
) -> None:
    with pytest.raises(SinkOptionError) as refused:
        new_table("p.d.orders", table_creation(options), ORDERS)
    assert f"onceover option {option!r}" in str(refused.value)
    assert words in str(refused.value)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"createdisposition": "WRITE_APPEND"}, "createDisposition"),
        ({"partitiontype": "WEEK"}, "partitionType"),
        ({"partitionrangestart": "0", "partitionrangeend": "10"}, "partitionRangeInterval"),
        ({"partitionfield": "id", "partitionrangestart": "5", "partitionrangeend": "1",
          "partitionrangeinterval": "1"}, "partitionRangeInterval"),
        ({"partitionexpirationms": "-1", "partitiontype": "DAY"}, "partitionExpirationMs"),
        ({"partitionexpirationms": "1000"}, "partitionExpirationMs"),
        ({"clusteredfields": "a,b,c,d,e"}, "clusteredFields"),
        ({"bigquerytablelabel.Team": "x"}, "bigQueryTableLabel.Team"),
        ({"bigquerytablelabel.team": "Billing Dept"}, "bigQueryTableLabel.team"),
        ({"destinationtablekmskeyname": "my-key"}, "destinationTableKmsKeyName"),
    ],
)  # fmt: skip
def test_a_wrong_table_option_is_refused_naming_it(options: dict[str, str], option: str) -> None:
    with pytest.raises(SinkOptionError) as refused:
        table_creation(options)
    assert f"onceover option {option!r}" in str(refused.value)


def test_the_kms_key_is_asked_for_in_the_table_created() -> None:
    """No Cloud KMS here: the table resource the sink sends names the key
    (``encryptionConfiguration.kmsKeyName``, the Table resource)."""
    key = "projects/p/locations/eu/keyRings/ring/cryptoKeys/orders"
    table = new_table("p.d.orders", table_creation({"destinationtablekmskeyname": key}), ORDERS)
    assert table.to_api_repr()["encryptionConfiguration"] == {"kmsKeyName": key}
