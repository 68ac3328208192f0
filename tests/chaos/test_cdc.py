"""The ``cdc`` workload: its source's changes and final state, its draws, and a verdict that
catches a table that is not the source's final state, key by key."""

from __future__ import annotations

import collections
import itertools
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.cloud import bigquery
from onceover_jobs.generate_changes import (
    CHANGE_TYPE,
    KEY,
    Row,
    change_counts,
    change_tables,
    final_state,
    key_count,
    write_change_files,
)
from onceover_tools.chaos.cdc import compare_mirror, create_keyed, mirror_problems, table_rows
from onceover_tools.chaos.proxy import APPEND_ROWS
from onceover_tools.chaos.schedule import (
    WORKLOAD_MODES,
    Schedule,
    Shape,
    draw_schedules,
    kinds_for,
    unary_methods,
)


def _changes(*rows: tuple[int, int, str]) -> pa.Table:
    """(key, version, change type) rows, the values made from the key and version."""
    upsert = [kind == "UPSERT" for _, _, kind in rows]
    return pa.table({
        KEY: [k for k, _, _ in rows],
        "version": [v for _, v, _ in rows],
        "name": [f"c{k}-v{v}" if u else None for (k, v, _), u in zip(rows, upsert, strict=True)],
        "balance": [k * 10 + v if u else None for (k, v, _), u in zip(rows, upsert, strict=True)],
        CHANGE_TYPE: [kind for _, _, kind in rows],
    })  # fmt: skip


def test_the_final_state_is_each_keys_last_upsert_and_deleted_keys_are_gone() -> None:
    files = [
        _changes((1, 1, "UPSERT"), (2, 1, "UPSERT"), (3, 1, "UPSERT")),
        _changes((1, 2, "UPSERT"), (2, 2, "DELETE")),
        _changes((3, 2, "DELETE"), (2, 3, "UPSERT")),  # 2 inserted again
    ]
    assert final_state(files) == {1: Row(2, "c1-v2", 12), 2: Row(3, "c2-v3", 23)}
    assert final_state(files[:2]) == {1: Row(2, "c1-v2", 12), 3: Row(1, "c3-v1", 31)}
    assert final_state([]) == {}


@pytest.mark.parametrize("apart", [1, 2, 3])
def test_the_generated_changes_keep_a_key_once_per_micro_batch_in_order(apart: int) -> None:
    tables = change_tables(3_000, 6, seed=11, apart=apart)
    assert [t.num_rows for t in tables] == [500] * 6
    assert tables == change_tables(3_000, 6, seed=11, apart=apart)  # the same seed, the same
    assert tables != change_tables(3_000, 6, seed=12, apart=apart)
    changed_in: dict[int, list[int]] = collections.defaultdict(list)
    versions: dict[int, int] = {}
    alive: set[int] = set()
    kinds = collections.Counter[str]()
    for index, table in enumerate(tables):
        keys = table.column(KEY).to_pylist()
        assert len(keys) == len(set(keys)), index  # a key at most once per file
        assert all(0 <= k < key_count(3_000, 6, apart) for k in keys)
        for change in table.to_pylist():
            key = change[KEY]
            changed_in[key].append(index)
            before = versions.get(key, 0)
            assert change["version"] == before + 1  # one more per change
            versions[key] = change["version"]
            if change[CHANGE_TYPE] == "DELETE":
                assert key in alive  # only a live key is deleted
                assert change["name"] is None
                alive.discard(key)
                kinds["delete"] += 1
            else:
                kinds["update" if key in alive else "reinsert" if before else "insert"] += 1
                alive.add(key)
    # a key's changes apart-files apart: a micro-batch of `apart` consecutive files
    # changes it once at most
    for key, files in changed_in.items():
        assert all(b - a >= apart for a, b in itertools.pairwise(files)), (key, files)
    assert set(final_state(tables)) == alive
    assert {k: r.version for k, r in final_state(tables).items()} == {k: versions[k] for k in alive}
    assert min(kinds.values()) >= 20, kinds  # inserts, updates, deletes, re-inserts, each
    counts = change_counts(tables)
    assert counts["deletes"] == kinds["delete"]
    assert counts["upserts"] + counts["deletes"] == 3_000


def test_the_change_files_are_the_tables_in_order_of_modification_time(tmp_path: Path) -> None:
    paths = write_change_files(tmp_path / "json", 300, 4, "json", seed=3)
    paths += write_change_files(tmp_path / "parquet", 300, 4, "parquet", seed=3)
    assert [p.name for p in paths[4:]] == [f"changes-{i:04d}.parquet" for i in range(4)]
    for fmt in ("json", "parquet"):
        written = sorted((tmp_path / fmt).iterdir(), key=lambda p: p.stat().st_mtime)
        assert [p.name for p in written] == sorted(
            p.name for p in written
        )  # the file source's order
        assert len({p.stat().st_mtime for p in written}) == 4
    expected = change_tables(300, 4, seed=3)
    assert [pq.read_table(p) for p in paths[4:]] == expected
    assert not list(tmp_path.glob("*/.*.tmp"))


# -- drawing ---------------------------------------------------------------------


def test_cdc_runs_in_default_mode_only_with_the_faults_default_mode_meets() -> None:
    assert WORKLOAD_MODES["cdc"] == ("default",)
    with pytest.raises(ValueError, match="cdc runs in default mode"):
        Schedule(seed=1, index=0, mode="pending", faults=(), workload="cdc")
    kinds = set(kinds_for("default", "cdc"))
    # default mode publishes nothing: no finalize, commit or flush to fault
    assert not {k for k in kinds if k.split("/")[1].startswith(("finalize", "commit", "flush"))}
    assert "wire/uncommitted" not in kinds
    assert {"failpoint/ledger.after_intent/crash", "wire/drop_response", "wire/cut",
            "spark/kill_task", "backend/outage"} <= kinds  # fmt: skip
    assert unary_methods("default", "cdc") == ()  # _default: no stream created
    # a change applied again late is cdc's own: the other workloads' draws stay theirs
    assert "wire/late_duplicate" in kinds
    assert not any("wire/late_duplicate" in kinds_for(m) for m in WORKLOAD_MODES["load_files"])
    drawn = list(draw_schedules(1, 50, modes=["default"], workloads=["cdc"]))
    assert {(s.workload, s.mode) for s in drawn} == {("cdc", "default")}
    assert {f.kind for s in drawn for f in s.faults} == kinds  # every kind, in 50 schedules
    shape = Shape.for_schedule(drawn[0])
    # measured in a clean run: 3 micro-batches, 6 tasks, 38 appends (the draws take 36)
    assert (shape.batches, shape.tasks, shape.appends) == (3, 6, 36)
    for schedule in drawn:
        for fault in schedule.faults:
            if fault.method is not None:
                assert fault.method == APPEND_ROWS, fault
            if fault.kind != "backend/outage":
                assert 1 <= fault.nth <= shape.hits(fault.kind, fault.method), fault
    # a session of the exactly-once modes draws cdc too, in its own mode, with its own
    # kinds (its pair taken in turn with the others', its deck not weighted by them)
    mixed = list(draw_schedules(1, 40, workloads=["cdc", "load_files"]))
    assert {(s.workload, s.mode) for s in mixed} == {
        ("cdc", "default"),
        *(("load_files", m) for m in ("pending", "buffered", "committed")),
    }
    assert {f.kind for s in mixed if s.workload == "cdc" for f in s.faults} <= kinds
    # and the baseline is drawn for load_files only when asked for
    assert ("load_files", "default") not in {(s.workload, s.mode) for s in mixed}


def test_the_cdc_script_takes_no_mode(capsys: pytest.CaptureFixture[str]) -> None:
    from onceover_jobs.examples import cdc_mirror

    with pytest.raises(SystemExit):
        cdc_mirror.parse_args(["--source", "s", "--table", "p.d.t", "--checkpoint", "c",
                               "--mode", "pending"])  # fmt: skip
    assert re.search(r"unrecognized arguments: --mode", capsys.readouterr().err)


# -- the verdict -----------------------------------------------------------------

EXPECTED = {1: Row(2, "c1-v2", 12), 2: Row(3, "c2-v3", 23), 4: Row(1, "c4-v1", 41)}
DELETED = (3,)


def _row(key: int, version: int, *, name: str | None = None) -> dict[str, Any]:
    return {KEY: key, "version": version, "name": name or f"c{key}-v{version}",
            "balance": key * 10 + version}  # fmt: skip


SOURCE_ROWS = [_row(1, 2), _row(2, 3), _row(4, 1)]


def test_the_source_itself_has_no_problems() -> None:
    view = compare_mirror(EXPECTED, SOURCE_ROWS, DELETED)
    assert mirror_problems("t", view) == []
    assert view.counts() == {
        "rows": 3, "distinct_keys": 3, "expected_keys": 3, "missing_keys": 0,
        "deleted_keys_back": 0, "foreign_keys": 0, "stale_keys": 0, "altered_keys": 0,
        "keys_twice": 0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        pytest.param(
            [*SOURCE_ROWS, _row(3, 1)],
            [
                "t holds 1 keys the source deleted at the "
                "end (a delete lost or an older upsert applied after it): 3"
            ],
            id="a deleted key back",
        ),
        pytest.param(
            [_row(1, 1), *SOURCE_ROWS[1:]],
            [
                "t holds an older version of 1 keys "
                "(an old upsert applied over a newer one): 1 (version 1, expected 2)"
            ],
            id="an old version",
        ),
        pytest.param(
            [*SOURCE_ROWS, _row(2, 3)],
            ["t holds 1 keys more than once: 2 (2 rows)"],
            id="a key twice",
        ),
        pytest.param(
            SOURCE_ROWS[:2], ["t lacks 1 of the 3 keys the source leaves: 4"], id="a key lost"
        ),
        pytest.param(
            [*SOURCE_ROWS, _row(9, 1)],
            ["t holds 1 keys the source never had: 9"],
            id="a foreign key",
        ),
        pytest.param(
            [_row(1, 2, name="other"), *SOURCE_ROWS[1:]],
            ["t holds 1 keys with values their last change did not write: 1"],
            id="the right version, other values",
        ),
        pytest.param(
            [_row(2, 3), _row(3, 1), _row(4, 1)],
            ["lacks 1 of the 3 keys the source leaves: 1", "deleted at the end"],
            id="a lost key paired with a deleted one back: the count matches",
        ),
    ],
)
def test_each_kind_of_wrong_table_is_named(rows: list[dict[str, Any]], says: list[str]) -> None:
    problems = mirror_problems("t", compare_mirror(EXPECTED, rows, DELETED))
    assert len(problems) == len(says), problems
    for problem, words in zip(problems, says, strict=True):
        assert words in problem, problem


def test_the_verdict_reads_the_table_from_bigquery(rest: bigquery.Client, dataset: str) -> None:
    """Against the local BigQuery: a keyed table holding a deleted key back, an old
    version and a key twice (plain inserts: the table takes them as rows) is caught."""
    table = f"{dataset}.mirror"
    create_keyed(rest, table)
    assert rest.get_table(table)._properties["tableConstraints"] == {
        "primaryKey": {"columns": [KEY]}
    }
    wrong = [_row(1, 1), _row(2, 3), _row(2, 3), _row(3, 1), _row(4, 1)]
    assert not rest.insert_rows_json(table, wrong)
    rows = table_rows(rest, table)
    assert sorted(rows, key=lambda r: (r[KEY], r["version"])) == wrong
    view = compare_mirror(EXPECTED, rows, DELETED)
    assert (view.back, view.stale, view.twice, view.missing) == ([3], [(1, 1, 2)], [(2, 2)], [])
