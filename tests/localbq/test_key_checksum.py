"""The key checksum's and tally's functions (onceover.key_checksum) give the same numbers
in Python, as the sink computes them, and in BigQuery SQL, as reconciliation asks for
them: the term, the bucket and the exact key sum of INT64 and STRING keys."""

from __future__ import annotations

from google.cloud import bigquery

from onceover.key_checksum import (
    key_bucket,
    key_bucket_sql,
    key_checksum_sql,
    key_sum_sql,
    key_term,
    key_term_sql,
)

INTS = [0, 1, -1, 42, 2**63 - 1, -(2**63), 2**53 + 1]
TEXTS = ["", "a", "o-17", "héllo", "日本語", "quote'd", "x" * 300]


def test_python_and_bigquery_agree_on_terms_buckets_and_sums(
    rest: bigquery.Client, dataset: str
) -> None:
    table = f"{dataset}.keys"
    schema = [bigquery.SchemaField("n", "INT64"), bigquery.SchemaField("s", "STRING")]
    rest.create_table(bigquery.Table(table, schema=schema))
    rows = [(n, s) for n, s in zip(INTS, TEXTS, strict=True)]
    params = [
        bigquery.ArrayQueryParameter("n", "INT64", [n for n, _ in rows]),
        bigquery.ArrayQueryParameter("s", "STRING", [s for _, s in rows]),
    ]
    rest.query(
        f"INSERT INTO `{table}` (n, s) SELECT n, s FROM UNNEST(@n) AS n WITH OFFSET i "
        "JOIN UNNEST(@s) AS s WITH OFFSET j ON i = j",
        job_config=bigquery.QueryJobConfig(query_parameters=params),
    ).result()

    found = [
        dict(r.items())
        for r in rest.query_and_wait(
            f"SELECT n, s, {key_term_sql('n')} AS tn, {key_bucket_sql('n')} AS bn, "
            f"{key_term_sql('s')} AS ts, {key_bucket_sql('s')} AS bs FROM `{table}` ORDER BY n"
        )
    ]
    assert [(r["n"], r["s"], r["tn"], r["bn"], r["ts"], r["bs"]) for r in found] == [
        (n, s, key_term(n), key_bucket(n), key_term(s), key_bucket(s)) for n, s in sorted(rows)
    ]
    (sums,) = rest.query_and_wait(
        f"SELECT {key_sum_sql('n')} AS total, {key_checksum_sql('n')} AS cn, "
        f"{key_checksum_sql('s')} AS cs FROM `{table}`"
    )
    assert int(sums["total"]) == sum(INTS)  # exact, past INT64 on the way
    assert (sums["cn"], sums["cs"]) == (sum(map(key_term, INTS)), sum(map(key_term, TEXTS)))
