"""The verifier catches what counts alone would miss, computing in BigQuery, not here."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from google.cloud import bigquery
from onceover_tools.chaos.verify import BUCKETS, KeyAggregate, compare_keys, table_aggregate

SOURCE = range(200)


def _table(rest: bigquery.Client, dataset: str, keys: Sequence[int]) -> str:
    table = f"{dataset}.keys"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("event_id", "INT64")]))
    rest.insert_rows_json(table, [{"event_id": k} for k in keys])
    return table


def test_the_source_itself_has_no_problems(rest: bigquery.Client, dataset: str) -> None:
    actual = table_aggregate(rest, _table(rest, dataset, list(SOURCE)), "event_id")
    assert actual == KeyAggregate.of(SOURCE)
    assert actual.rows == actual.distinct == 200
    assert len(actual.buckets) == BUCKETS
    assert compare_keys(KeyAggregate.of(SOURCE), actual) == []


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(
            [*SOURCE, 17],
            ["BigQuery holds 201 rows, expected 200", "differs from the source's in 1 of"],
            id="a duplicate",
        ),
        pytest.param(
            [k for k in SOURCE if k != 5],
            ["holds 199 rows", "199 distinct keys", "in 1 of"],
            id="a lost row",
        ),
        pytest.param(
            [*(k for k in SOURCE if k != 5), 6],
            ["199 distinct keys, expected 200", "in 2 of"],
            id="a lost row paired with a duplicate: COUNT(*) matches",
        ),
        pytest.param(
            [*(k for k in SOURCE if k != 5), 5 + BUCKETS * 100],
            ["in 1 of"],
            id="a lost key paired with a foreign one in its bucket: both counts match",
        ),
    ],
)
def test_each_kind_of_damage_is_named(
    rest: bigquery.Client, dataset: str, keys: list[int], expected: list[str]
) -> None:
    actual = table_aggregate(rest, _table(rest, dataset, keys), "event_id")
    problems = compare_keys(KeyAggregate.of(SOURCE), actual)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected, strict=True):
        assert words in problem


def test_identifiers_are_checked_not_pasted(rest: bigquery.Client) -> None:
    with pytest.raises(ValueError, match=r"not project\.dataset\.table"):
        table_aggregate(rest, "p.d.t`; DROP TABLE x; --", "event_id")
    with pytest.raises(ValueError, match="not a column name"):
        table_aggregate(rest, "onceover-local.d.t", "event_id`)")


@pytest.mark.parametrize(
    ("workload", "left", "problem"),
    [
        ("overwrite", "replaced", "BigQuery holds 3,030 rows, expected 3,000"),  # old left
        ("overwrite_dynamic", "none", "BigQuery holds 3,000 rows, expected 3,030"),  # day lost
        # the replaced day's old rows kept in place of the other day's: as many rows
        ("overwrite_dynamic", "replaced", "the key set differs from the source's"),
        ("overwrite_dynamic", "kept", None),  # what a good run leaves
        ("overwrite", "none", None),
    ],
)
def test_an_overwrites_verdict_counts_the_old_rows_it_must_remove_and_keep(
    rest: bigquery.Client, dataset: str, workload: str, left: str, problem: str | None
) -> None:
    """The table as a run may leave it: the new rows, and of the seeded old rows those
    of the replaced scope (wrong), none, or those outside it; judged as the harness does.
    A staging table left over is named too."""
    from onceover_tools.chaos import overwrite
    from onceover_tools.chaos.runner import ORDER_SCHEMA, _table_problems
    from onceover_tools.chaos.schedule import Schedule

    schedule = Schedule(seed=0, index=0, mode="pending", faults=(), workload=workload)
    table = f"{dataset}.orders"
    overwrite.create_seeded(rest, table, ORDER_SCHEMA, dynamic=workload == "overwrite_dynamic")
    replaced, kept = overwrite.old_keys(dynamic=True)
    gone = {"replaced": kept, "none": range(overwrite.OLD_START, 2 * overwrite.OLD_START),
            "kept": replaced}[left]  # fmt: skip
    rest.query_and_wait(
        f"DELETE FROM `{table}` WHERE event_id BETWEEN {min(gone, default=0)} AND "
        f"{max(gone, default=-1)}"
    )
    rest.query_and_wait(
        f"INSERT INTO `{table}` (event_id) SELECT x FROM UNNEST(GENERATE_ARRAY(0, "
        f"{schedule.rows - 1})) AS x"
    )
    _, problems = _table_problems(rest, schedule, table)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in found for found in problems), problems
    assert overwrite.staging_problems(rest, table) == []
    rest.create_table(bigquery.Table(f"{dataset}.{overwrite.STAGING_PREFIX}orders_0a1b"))
    assert overwrite.staging_problems(rest, table) == [
        f"staging tables left in {dataset} after the swap: _onceover_staging_orders_0a1b"
    ]
