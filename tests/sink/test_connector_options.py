"""The spark-bigquery-connector's write options, as its users write them
(``onceover_jobs.sink.job.connector_options``): the table named by ``save(path)``, the
options honoured, ignored with a note, or refused naming the option and the fix."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.connector_options import BY_KEY, CONNECTOR_OPTIONS
from onceover_jobs.sink.job.options import parse_options

from onceover.connection import OPTIONS as CONNECTION_OPTIONS

PROJECT = "my-project"


def parsed(**options: str) -> object:
    return parse_options(options, default_project=PROJECT, streaming=False)


@pytest.mark.parametrize(
    ("options", "table"),
    [
        ({"path": "sales.orders"}, "my-project.sales.orders"),
        ({"path": "other-project.sales.orders"}, "other-project.sales.orders"),
        ({"path": "other-project:sales.orders"}, "other-project.sales.orders"),
        ({"table": "other-project:sales.orders"}, "other-project.sales.orders"),
        ({"path": "sales.orders", "table": "sales.orders"}, "my-project.sales.orders"),
        ({"table": "orders", "dataset": "sales"}, "my-project.sales.orders"),
        ({"path": "orders", "dataset": "sales", "project": "p-1234"}, "p-1234.sales.orders"),
        ({"table": "sales.orders", "project": "p-1234"}, "p-1234.sales.orders"),
    ],
)
def test_the_table_is_named_as_the_connector_names_it(options: dict[str, str], table: str) -> None:
    assert parse_options(options, default_project=PROJECT, streaming=False).table == table


@pytest.mark.parametrize(
    ("options", "option", "words"),
    [
        ({}, "table", 'save("dataset.table")'),
        ({"path": "orders"}, "table", "names no dataset"),
        ({"path": "sales.orders", "table": "sales.other"}, "table", "name different tables"),
        ({"path": "sales.orders", "writeMethod": "indirect"}, "writeMethod", "Storage Write API"),
        ({"path": "sales.orders", "writeMethod": "fast"}, "writeMethod", "not one of direct"),
        ({"path": "sales.orders", "writeAtLeastOnce": "yes"}, "writeAtLeastOnce", "true or false"),
        (
            {"path": "sales.orders", "writeAtLeastOnce": "true", "mode": "pending"},
            "writeAtLeastOnce",
            "but mode is 'pending'",
        ),
        ({"path": "sales.orders", "datePartition": "2026-11-02"}, "datePartition", "YYYYMMDD"),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_the_option(
    options: dict[str, str], option: str, words: str
) -> None:
    with pytest.raises(SinkOptionError) as refused:
        parse_options(options, default_project=PROJECT, streaming=False)
    assert f"onceover option {option!r}" in str(refused.value)
    assert words in str(refused.value)


def test_the_connectors_readme_write_options_run_unchanged() -> None:
    """README 0.45's write examples, with only the format changed: direct, at least
    once, a bucket set for the indirect method (ignored), a read option shared."""
    direct = parse_options(
        {"writeMethod": "direct", "path": "dataset.table"}, default_project=PROJECT,
        streaming=False,
    )  # fmt: skip
    assert (direct.table, direct.mode, direct.ignored) == (
        "my-project.dataset.table",
        "pending",
        (),
    )
    at_least_once = parse_options(
        {"path": "dataset.table", "writeMethod": "direct", "writeAtLeastOnce": "true"},
        default_project=PROJECT, streaming=False,
    )  # fmt: skip
    assert at_least_once.mode == "default"
    indirect_bucket = parse_options(
        {"temporaryGcsBucket": "some-bucket", "path": "dataset.table", "viewsEnabled": "true"},
        default_project=PROJECT, streaming=False,
    )  # fmt: skip
    assert [note.split(":")[0] for note in indirect_bucket.ignored] == [
        "option 'temporaryGcsBucket' ignored",
        "option 'viewsEnabled' ignored",
    ]
    streamed = parse_options(
        {"temporaryGcsBucket": "b", "checkpointLocation": "/ckpt", "table": "dataset.table"},
        default_project=PROJECT, streaming=True,
    )  # fmt: skip
    assert streamed.table == "my-project.dataset.table"


CONNECTOR_WRITE_OPTIONS = (
    # Every option README 0.45's "Properties" marks Write or Read/Write.
    "table", "dataset", "project", "parentProject", "bigQueryTableLabel", "createDisposition",
    "writeMethod", "writeAtLeastOnce", "temporaryGcsBucket", "persistentGcsBucket",
    "persistentGcsPath", "intermediateFormat", "useAvroLogicalTypes", "datePartition",
    "partitionField", "partitionExpirationMs", "partitionType", "partitionRangeStart",
    "partitionRangeEnd", "partitionRangeInterval", "clusteredFields", "allowFieldAddition",
    "allowFieldRelaxation", "proxyAddress", "proxyUsername", "proxyPassword", "httpMaxRetry",
    "httpConnectTimeout", "enableModeCheckForSchemaFields", "enableListInference",
    "queryJobPriority", "destinationTableKmsKeyName", "bigQueryJobTimeoutInMinutes",
    "bigNumericDefaultPrecision", "bigNumericDefaultScale", "credentialsFile", "credentials",
    "gcpAccessToken", "gcpImpersonationServiceAccount", "bigQueryStorageGrpcEndpoint",
    "bigQueryHttpEndpoint",
)  # fmt: skip
TABLE_CREATION = frozenset(
    {
        "createdisposition", "partitionfield", "partitiontype", "partitionexpirationms",
        "partitionrangestart", "partitionrangeend", "partitionrangeinterval",
        "clusteredfields", "bigquerytablelabel", "destinationtablekmskeyname",
    }
)  # fmt: skip


def test_every_write_option_of_the_connector_has_a_home() -> None:
    """Read here (the vocabulary or the connection), or at table creation."""
    homeless = [
        name
        for name in CONNECTOR_WRITE_OPTIONS
        if name.lower() not in BY_KEY
        and name.lower() not in CONNECTION_OPTIONS
        and name.lower() not in TABLE_CREATION
    ]
    assert homeless == []
    assert len(BY_KEY) == len(CONNECTOR_OPTIONS)  # one line each
