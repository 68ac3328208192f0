"""The ``bad_rows`` workload: a few source rows BigQuery refuses, set aside in a dead-letter
table, and a verifier that counts both tables in BigQuery.

The verifier is shown catching each way the two tables can be wrong (a bad row set
aside twice or not at all, a good row set aside, a bad row in the target, a row of
another run, a row naming no column) on tables written here, and passing the right
ones; the runs themselves are ``onceover chaos --workloads bad_rows`` and the curated
set's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.cloud import bigquery
from onceover_jobs import load_files
from onceover_jobs.generate import BAD_CURRENCIES, CURRENCIES, bad_keys, file_bounds, write_files
from onceover_jobs.sink.rows.dead_letter import DEAD_LETTER_FIELDS
from onceover_tools.chaos.runner import (
    BAD_COLUMN,
    BAD_ROWS_SCHEMA,
    KEY,
    _dead_letter_problems,
    _table_problems,
    dead_letter_table,
    job_argv,
)
from onceover_tools.chaos.schedule import (
    BAD_FRACTION,
    KINDS,
    Schedule,
    Shape,
    draw_schedules,
    kinds_for,
    unary_methods,
)
from onceover_tools.chaos.verify import DeadLetterView, KeyAggregate, dead_letter_problems

ROWS = 1_000
SCHEDULE = Schedule(seed=3, index=7, mode="buffered", faults=(), rows=ROWS, workload="bad_rows")
RUN = "load-0123456789ab"


# -- the source ------------------------------------------------------------------


def test_bad_rows_are_few_drawn_from_the_seed_and_break_only_the_currency(tmp_path: Path) -> None:
    bad = bad_keys(3_000, BAD_FRACTION, seed=11)
    assert len(bad) == 15  # 0.5 %
    assert bad == sorted(set(bad))
    assert bad == bad_keys(3_000, BAD_FRACTION, seed=11) != bad_keys(3_000, BAD_FRACTION, seed=12)
    assert bad_keys(10, BAD_FRACTION, seed=1) != []  # at least one
    assert bad_keys(3_000, 0.0, seed=11) == []
    assert all(100 <= k < 110 for k in bad_keys(10, 0.5, seed=1, start=100))

    clean = write_files(tmp_path / "clean", 3_000, 6, "json", seed=11)
    dirty = write_files(tmp_path / "dirty", 3_000, 6, "json", seed=11, bad=bad)
    before = [json.loads(line) for p in clean for line in p.read_text().splitlines()]
    after = [json.loads(line) for p in dirty for line in p.read_text().splitlines()]
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert [new["event_id"] for _, new in changed] == bad
    for old, new in changed:  # the currency only, and too long for STRING(3)
        assert {k for k in old if old[k] != new[k]} == {"currency"}
        assert new["currency"] in BAD_CURRENCIES
        assert len(new["currency"]) > 3
    assert all(row["currency"] in CURRENCIES for row in before)


def test_a_bad_rows_schedule_knows_its_bad_keys_and_the_hits_they_add() -> None:
    bad = SCHEDULE.bad_keys()
    assert len(bad) == 5
    assert bad == SCHEDULE.bad_keys()
    assert bad != replace(SCHEDULE, index=8).bad_keys()
    assert Schedule(seed=3, index=7, mode="buffered", faults=()).bad_keys() == ()
    # Counted on clean runs of 3,000 rows (every failpoint armed past reach): seed 91,
    # 15 bad rows in every file but one in buffered mode, in every file in the others.
    measured = {  # mode: (commit.after, finalize.after) hits
        "pending": (6, 12),  # 3 dead-letter commits beside 3 batch commits
        "buffered": (3, 5),
        "committed": (3, 6),
    }
    for index, (mode, (commits, finalizes)) in enumerate(measured.items()):
        schedule = Schedule(seed=91, index=index, mode=mode, faults=(), workload="bad_rows")
        shape = Shape.for_schedule(schedule)
        assert shape.hits("failpoint/commit.after/crash") == commits
        assert shape.hits("wire/uncommitted", "BatchCommitWriteStreams") == commits
        assert shape.hits("failpoint/finalize.after/drop") == finalizes
        assert shape.hits("wire/delay", "FinalizeWriteStream") == finalizes
        # the files (tasks) with a bad row, each a dead-letter stream
        bounds = file_bounds(schedule.rows, schedule.files)
        files = {f for k in schedule.bad_keys() for f in range(6) if bounds[f] <= k < bounds[f + 1]}
        streams = (6 if mode == "pending" else 2) + len(files)
        assert shape.hits("wire/delay", "CreateWriteStream") == streams


def test_bad_rows_draws_arm_the_dead_letter_commit_in_every_mode() -> None:
    drawn = list(draw_schedules(2, 90, workloads=["bad_rows"]))
    assert {s.mode for s in drawn} == {"pending", "buffered", "committed"}
    armed = {(s.mode, f.kind) for s in drawn for f in s.faults}
    for mode in ("buffered", "committed"):
        assert (mode, "failpoint/commit.after/crash") in armed or (
            mode,
            "failpoint/commit.after/error",
        ) in armed, mode
    for schedule in drawn:
        shape = Shape.for_schedule(schedule)
        for fault in schedule.faults:
            assert fault.kind in kinds_for(schedule.mode, "bad_rows"), (schedule.name, fault)
            if fault.method is not None:
                assert fault.method in ("AppendRows", *unary_methods(schedule.mode, "bad_rows"))
            if fault.kind != "backend/outage":
                assert 1 <= fault.nth <= shape.hits(fault.kind, fault.method), fault
    assert set(kinds_for("buffered", "bad_rows")) < set(KINDS)


def test_the_job_sets_refused_rows_aside_in_a_table_of_its_own(tmp_path: Path) -> None:
    table = "p.onceover_chaos.seed3_0007"
    argv = job_argv(SCHEDULE, table, tmp_path)
    assert argv[1:3] == ["-m", "onceover_jobs.load_files"]
    assert argv[argv.index("--dead-letter") + 1] == dead_letter_table(table)
    assert argv[argv.index("--mode") + 1] == "buffered"
    (tmp_path / "source").mkdir()
    args = load_files.parse_args(argv[3:])  # the load job takes it
    assert args.dead_letter == f"{table}_dead_letters"
    plain = Schedule(seed=3, index=7, mode="buffered", faults=())
    assert "--dead-letter" not in job_argv(plain, table, tmp_path)
    assert load_files.parse_args(job_argv(plain, table, tmp_path)[3:]).dead_letter is None
    with pytest.raises(SystemExit):
        load_files.parse_args([*argv[3:-2], "--dead-letter", table])  # not the target
    # the target's currency is STRING(3): every good currency fits, no bad one does
    (currency,) = [f for f in BAD_ROWS_SCHEMA if f.name == BAD_COLUMN]
    assert currency.max_length == 3


# -- the verdict -----------------------------------------------------------------


def test_the_verdict_needs_each_bad_key_once_and_nothing_else() -> None:
    expected = KeyAggregate.of([5, 70, 900])
    view = DeadLetterView(True, 3, KeyAggregate.of([5, 70, 900]))
    assert dead_letter_problems(expected, view, table="p.d.dl", column="currency") == []
    twice = DeadLetterView(True, 5, KeyAggregate.of([5, 70, 70, 900]), elsewhere=1)
    problems = dead_letter_problems(expected, twice, table="p.d.dl", column="currency")
    assert [p.split(" ")[0:4] for p in problems] == [
        ["the", "dead-letter", "table", "p.d.dl"],
        ["the", "dead-letter", "table's", "keys"],
        ["1", "rows", "of", "the"],
        ["the", "dead-letter", "table", "p.d.dl"],
    ]
    assert "holds 4 rows of the run, expected 3" in problems[0]
    assert "another column than currency" in problems[2]
    assert "holds 1 rows of another run or table" in problems[3]
    nowhere = dead_letter_problems(expected, DeadLetterView.missing(), table="p.d.dl", column="c")
    assert nowhere == [
        "the dead-letter table p.d.dl does not exist: the 3 rows BigQuery refused were set "
        "aside nowhere"
    ]
    none_refused = KeyAggregate.of([])
    assert dead_letter_problems(none_refused, DeadLetterView.missing(), table="t", column="c") == []


def _target(rest: bigquery.Client, dataset: str, keys: Sequence[int]) -> str:
    table = f"{dataset}.seed3_0007"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField(KEY, "INT64")]))
    if keys:
        rest.insert_rows_json(table, [{KEY: k} for k in keys])
    return table


def _dead_letters(rest: bigquery.Client, target: str, rows: Sequence[dict[str, Any]]) -> None:
    schema = [bigquery.SchemaField(n, t, mode=m) for n, t, m, _ in DEAD_LETTER_FIELDS]
    table = dead_letter_table(target)
    rest.create_table(bigquery.Table(table, schema=schema))
    if rows:
        assert rest.insert_rows_json(table, list(rows)) == []


def _set_aside(target: str, key: object, **change: object) -> dict[str, Any]:
    """A dead-letter row as the sink writes one (onceover_jobs.sink.rows.dead_letter), changed."""
    return {
        "run_id": RUN, "query_id": "q-1", "batch_id": 0, "write": "0", "table": target,
        "partition": 0, "offset": 3, "key": None if key is None else str(key),
        "column": BAD_COLUMN,
        "reason": "Field currency: STRING(3) value is 6 characters long, longer than its "
                  "maximum length 3",
        "row": json.dumps({KEY: key, "currency": "EURO-X"}),
        "set_aside_at": "2026-11-25T10:00:00Z", **change,
    }  # fmt: skip


def _verdict(rest: bigquery.Client, target: str) -> tuple[dict[str, int], list[str]]:
    counts, problems = _table_problems(rest, SCHEDULE, target)
    set_aside, more = _dead_letter_problems(rest, SCHEDULE, target, RUN)
    return counts | set_aside, problems + more


def test_the_right_tables_pass(rest: bigquery.Client, dataset: str) -> None:
    bad = SCHEDULE.bad_keys()
    target = _target(rest, dataset, [k for k in range(ROWS) if k not in bad])
    _dead_letters(rest, target, [_set_aside(target, k) for k in bad])
    counts, problems = _verdict(rest, target)
    assert problems == []
    assert counts == {
        "rows": ROWS - len(bad),
        "distinct_keys": ROWS - len(bad),
        "bad_rows": len(bad),
        "dead_letter_rows": len(bad),
        "dead_letter_distinct_keys": len(bad),
        "dead_letter_other_rows": 0,
    }


def _damage(
    bad: tuple[int, ...], damage: str
) -> tuple[list[int], list[tuple[object, dict[str, object]]]]:
    """The target's keys and the dead-letter rows (key, change) for ``damage``."""
    good = [k for k in range(ROWS) if k not in bad]
    aside: list[tuple[object, dict[str, object]]] = [(k, {}) for k in bad]
    if damage == "set aside twice":
        aside.append((bad[0], {"batch_id": 1}))
    elif damage == "not set aside":
        aside.pop()
    elif damage == "landed and set aside":
        good.append(bad[0])
    elif damage == "landed, not set aside":
        good.append(bad[0])
        aside.pop(0)
    elif damage == "a good row set aside instead":
        aside[0] = (good[0], {})
    elif damage == "a row of another run":
        aside.append((bad[0], {"run_id": "load-other"}))
    elif damage == "no column named":
        aside[1] = (bad[1], {"column": None})
    elif damage == "no key":
        aside[2] = (None, {})
    return good, aside


LANDED = ["BigQuery holds 996 rows, expected 995", "996 distinct keys, expected 995", "in 1 of"]
NOT_SET_ASIDE = [
    "holds 4 rows of the run, expected 5",
    "4 distinct keys of the run, expected 5",
    "differ from the source's bad keys in 1 of 64 buckets",
]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("set aside twice", ["holds 6 rows of the run, expected 5", "in 1 of 64 buckets"]),
        ("not set aside", NOT_SET_ASIDE),
        ("landed and set aside", [*LANDED, "must refuse (their currency is too long): keys 11"]),
        (
            "landed, not set aside",
            [*LANDED, "must refuse", *NOT_SET_ASIDE],
        ),
        # both counts right: only the key aggregates tell
        ("a good row set aside instead", ["differ from the source's bad keys in 2 of 64"]),
        ("a row of another run", ["1 rows of another run or table"]),
        ("no column named", ["another column than currency, or none"]),
        ("no key", ["4 distinct keys of the run", "in 1 of 64", "have no integer key"]),
    ],
)
def test_each_kind_of_damage_is_named(
    rest: bigquery.Client, dataset: str, damage: str, expected: list[str]
) -> None:
    bad = SCHEDULE.bad_keys()
    good, aside = _damage(bad, damage)
    target = _target(rest, dataset, good)
    _dead_letters(rest, target, [_set_aside(target, k, **change) for k, change in aside])
    _, problems = _verdict(rest, target)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected, strict=True):
        assert words in problem, (problem, words)


def test_no_dead_letter_table_is_a_violation(rest: bigquery.Client, dataset: str) -> None:
    bad = SCHEDULE.bad_keys()
    target = _target(rest, dataset, [k for k in range(ROWS) if k not in bad])
    counts, problems = _verdict(rest, target)
    assert problems == [
        f"the dead-letter table {dead_letter_table(target)} does not exist: the 5 rows "
        "BigQuery refused were set aside nowhere"
    ]
    assert counts["dead_letter_rows"] == 0
