"""Where the ledger goes: a checkpoint or a ``ledger`` option on a disk or in a bucket, and
what no store serves, refused before any write naming the option."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.options import parse_options

TABLE = "my-project.sales.orders"


@pytest.mark.parametrize(
    ("checkpoint", "ledger"),
    [
        ("gs://bucket/ckpt", "gs://bucket/ckpt/onceover"),
        ("s3a://bucket/ckpt/", "s3a://bucket/ckpt/onceover"),
        ("s3://bucket/ckpt", "s3://bucket/ckpt/onceover"),
        (
            "abfss://lake@acct.dfs.core.windows.net/ckpt",
            "abfss://lake@acct.dfs.core.windows.net/ckpt/onceover",
        ),
    ],
)
def test_a_checkpoint_in_a_bucket_keeps_its_ledger_beside_it(checkpoint: str, ledger: str) -> None:
    options = parse_options(
        {"table": TABLE, "checkpointLocation": checkpoint}, default_project=None, streaming=True
    )
    assert options.checkpoint == checkpoint.rstrip("/")
    assert options.ledger == ledger


@pytest.mark.parametrize("streaming", [True, False])
def test_the_ledger_option_takes_a_bucket_for_every_kind_of_write(streaming: bool) -> None:
    options = parse_options(
        {"table": TABLE, "checkpointLocation": "/local/ckpt", "ledger": "gs://b/ledgers"},
        default_project=None,
        streaming=streaming,
    )
    assert options.ledger == "gs://b/ledgers"


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("checkpointLocation", "hdfs://namenode:8020/ckpt", "hdfs://"),
        ("checkpointLocation", "dbfs:/ckpt", "the bucket's own URL"),
        ("checkpointLocation", "gs:///ckpt", "name the bucket"),
        ("ledger", "wasbs://c@a.blob.core.windows.net/l", "wasbs://"),
        ("ledger", "dbfs:/ledger", "the bucket's own URL"),
    ],
)
def test_what_no_store_serves_is_refused_naming_the_option(
    option: str, value: str, says: str
) -> None:
    with pytest.raises(SinkOptionError) as raised:
        parse_options(
            {"table": TABLE, "checkpointLocation": "/c", option: value},
            default_project=None,
            streaming=True,
        )
    message = str(raised.value)
    assert raised.value.option == option
    assert value in message
    assert says in message


def test_a_file_url_or_a_path_is_a_local_checkpoint() -> None:
    by_url = parse_options(
        {"table": TABLE, "checkpointLocation": "file:///shared/ckpt"},
        default_project=None,
        streaming=True,
    )
    by_path = parse_options(
        {"table": TABLE, "checkpointLocation": "/shared/ckpt"}, default_project=None, streaming=True
    )
    assert by_url.checkpoint == by_path.checkpoint == "/shared/ckpt"
    assert by_url.ledger == "/shared/ckpt/onceover"


def test_the_options_spark_itself_passes_are_taken() -> None:
    """``writeStream.queryName(...)`` reaches the sink as the option ``queryName``."""
    options = parse_options(
        {"table": TABLE, "checkpointLocation": "/shared/ckpt", "queryName": "usage"},
        default_project=None,
        streaming=True,
    )
    assert options.mode == "buffered"  # a writeStream's default (docs/guides/modes.md)


def test_an_unknown_option_is_refused_naming_it() -> None:
    with pytest.raises(SinkOptionError, match="'modes'"):
        parse_options({"table": TABLE, "modes": "pending"}, default_project=None, streaming=False)
