"""Sink options that fail before any write: a checkpoint the ledger cannot live on."""

from __future__ import annotations

import pytest
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.options import parse_options

TABLE = "my-project.sales.orders"


@pytest.mark.parametrize(
    "checkpoint", ["gs://bucket/ckpt", "hdfs://namenode:8020/ckpt", "s3a://bucket/ckpt"]
)
def test_a_checkpoint_on_an_object_store_is_refused_naming_the_option(checkpoint: str) -> None:
    with pytest.raises(SinkOptionError) as raised:
        parse_options(
            {"table": TABLE, "checkpointLocation": checkpoint}, default_project=None, streaming=True
        )
    message = str(raised.value)
    assert "checkpointLocation" in message
    assert checkpoint in message
    assert "atomic renames" in message


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
