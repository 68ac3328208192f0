"""What the demo asks of BigQuery directly: a dataset, counts, and a row copied behind a
load's back (the way a stray backfill or a hand-run INSERT duplicates money)."""

from __future__ import annotations

from onceover.bigquery import BigQueryConfig, bigquery_client
from onceover_tools.demo.loads import DATASET, KEY


def create_dataset(config: BigQueryConfig) -> None:
    """Up front, so the loads started side by side never race to create it."""
    client = bigquery_client(config)
    client.create_dataset(f"{client.project}.{DATASET}", exists_ok=True)


def counts(config: BigQueryConfig, table: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT event_id)`` of ``table``."""
    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT {KEY}) AS ids FROM `{table}`"
    row = next(iter(bigquery_client(config).query_and_wait(query)))
    return int(row["n"]), int(row["ids"])


def copy_row(config: BigQueryConfig, table: str, key: int) -> None:
    """``INSERT`` a second copy of the row whose key is ``key`` (stamps and all)."""
    from google.cloud import bigquery

    bigquery_client(config).query_and_wait(
        f"INSERT INTO `{table}` SELECT * FROM `{table}` WHERE {KEY} = @key",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[bigquery.ScalarQueryParameter("key", "INT64", key)]
        ),
    )
