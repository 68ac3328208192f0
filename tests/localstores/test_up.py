"""``onceover up --object-stores``: its option, and what its greeting tells the user."""

from __future__ import annotations

from onceover_tools.cli import LEDGER_BUCKET, build_parser, cmd_up, object_stores_text
from onceover_tools.localstores import LocalObjectStores


def test_up_runs_the_object_stores_only_when_asked() -> None:
    parser = build_parser()

    asked = parser.parse_args(["up", "--object-stores"])
    default = parser.parse_args(["up"])

    assert (asked.handler, asked.object_stores) == (cmd_up, True)
    assert default.object_stores is False


def test_the_greeting_names_each_store_its_bucket_and_what_to_export() -> None:
    stores = LocalObjectStores()  # not started: its endpoints are chosen already
    buckets = (f"s3://{LEDGER_BUCKET}", f"gs://{LEDGER_BUCKET}")

    text = object_stores_text(stores, buckets)

    s3_line, gcs_line, export_line = text.splitlines()[:3]
    assert stores.s3.endpoint in s3_line
    assert "s3://onceover-ledger" in s3_line
    assert stores.gcs.endpoint in gcs_line
    assert "gs://onceover-ledger" in gcs_line
    exported = dict(pair.split("=", 1) for pair in export_line.split("export ", 1)[1].split())
    assert exported == stores.environment()
    assert exported["STORAGE_EMULATOR_HOST"] == stores.gcs.endpoint
    assert exported["AWS_ALLOW_HTTP"] == "true"
