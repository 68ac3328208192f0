"""The ``cdc`` workload's table and verdict: a mirror that must end as the source's changes
say, key by key.

The job (``onceover_jobs.examples.cdc_mirror``) streams the schedule's change files
(``onceover_jobs.generate_changes``: inserts, updates, deletes and re-inserts of a key
set) into a table whose primary key is declared, at least once on the ``_default``
stream, the sink numbering each change. Faults make it send changes twice (a lost
answer, a retried task, a replayed micro-batch) and late (a replay after a crash); none
of that may show: the table must hold exactly the keys the source leaves alive, each
once, each as its last change wrote it. A count cannot say that (a deleted key back and
a live one lost keep it), so the verdict reads the table's rows (a few thousand) and
compares them with :func:`onceover_jobs.generate_changes.final_state` key by key:

- a key alive at the source's end and not in the table: **missing**;
- a key in the table the source deleted at the end (**deleted, back**) or never had
  (**foreign**);
- a key whose row is not its last change's: an older version (**stale**: an old
  upsert applied over a newer one) or the right version with other values (**altered**);
- a key held by two rows or more (**twice**).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.cloud import bigquery
from onceover_jobs.generate_changes import KEY, TABLE_COLUMNS, Row

SHOWN = 5
"""Keys a violation names one by one."""


def create_keyed(client: bigquery.Client, table: str) -> None:
    """The mirror, its primary key declared (NOT ENFORCED) as ``tables.insert`` takes it."""
    created = bigquery.Table(
        table, schema=[bigquery.SchemaField(name, kind) for name, kind in TABLE_COLUMNS]
    )
    created._properties["tableConstraints"] = {"primaryKey": {"columns": [KEY]}}
    client.create_table(created)


def table_rows(client: bigquery.Client, table: str) -> list[dict[str, Any]]:
    """Every row of the mirror, as BigQuery answers a query of it."""
    columns = ", ".join(f"`{name}`" for name, _ in TABLE_COLUMNS)
    return [dict(row) for row in client.query_and_wait(f"SELECT {columns} FROM `{table}`")]


@dataclass
class MirrorView:
    """How the mirror differs from the source's final state, key by key."""

    rows: int = 0
    keys: int = 0
    expected_keys: int = 0
    missing: list[int] = field(default_factory=list)
    back: list[int] = field(default_factory=list)
    """Deleted at the source's end, in the table."""
    foreign: list[int] = field(default_factory=list)
    stale: list[tuple[int, int, int]] = field(default_factory=list)
    """(key, version held, version expected), the held one older."""
    altered: list[int] = field(default_factory=list)
    twice: list[tuple[int, int]] = field(default_factory=list)
    """(key, rows holding it)."""

    def counts(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "distinct_keys": self.keys,
            "expected_keys": self.expected_keys,
            "missing_keys": len(self.missing),
            "deleted_keys_back": len(self.back),
            "foreign_keys": len(self.foreign),
            "stale_keys": len(self.stale),
            "altered_keys": len(self.altered),
            "keys_twice": len(self.twice),
        }


def compare_mirror(
    expected: Mapping[int, Row], rows: Sequence[Mapping[str, Any]], deleted: Sequence[int]
) -> MirrorView:
    """Compare the mirror's ``rows`` with the ``expected`` state; ``deleted``: the keys
    the source changed and left deleted (a key neither expected nor deleted is foreign)."""
    held = Counter(row[KEY] for row in rows)
    view = MirrorView(rows=len(rows), keys=len(held), expected_keys=len(expected))
    gone = set(deleted)
    view.missing = sorted(set(expected) - set(held))
    view.back = sorted(k for k in held if k not in expected and k in gone)
    view.foreign = sorted(k for k in held if k not in expected and k not in gone)
    view.twice = sorted((k, n) for k, n in held.items() if n > 1)
    for row in sorted(rows, key=lambda r: (r[KEY], r["version"] or 0)):
        want = expected.get(row[KEY])
        if want is None or held[row[KEY]] > 1:
            continue
        got = Row(row["version"], row["name"], row["balance"])
        if got == want:
            continue
        if got.version is not None and got.version < want.version:
            view.stale.append((row[KEY], got.version, want.version))
        else:
            view.altered.append(row[KEY])
    return view


def mirror_problems(table: str, view: MirrorView) -> list[str]:
    """The view's differences in words, one sentence per kind; empty when the table is
    the source's final state."""
    problems = []
    if view.missing:
        problems.append(
            f"{table} lacks {len(view.missing):,} of the {view.expected_keys:,} keys the "
            f"source leaves: {_keys(view.missing)}"
        )
    if view.back:
        problems.append(
            f"{table} holds {len(view.back):,} keys the source deleted at the end "
            f"(a delete lost or an older upsert applied after it): {_keys(view.back)}"
        )
    if view.foreign:
        problems.append(
            f"{table} holds {len(view.foreign):,} keys the source never had: {_keys(view.foreign)}"
        )
    if view.stale:
        shown = [f"{k} (version {got}, expected {want})" for k, got, want in view.stale]
        problems.append(
            f"{table} holds an older version of {len(view.stale):,} keys (an old upsert "
            f"applied over a newer one): {_listed(shown)}"
        )
    if view.altered:
        problems.append(
            f"{table} holds {len(view.altered):,} keys with values their last change did "
            f"not write: {_keys(view.altered)}"
        )
    if view.twice:
        shown = [f"{k} ({n} rows)" for k, n in view.twice]
        problems.append(f"{table} holds {len(view.twice):,} keys more than once: {_listed(shown)}")
    return problems


def _keys(keys: Sequence[int]) -> str:
    return _listed([str(k) for k in keys])


def _listed(items: Sequence[str]) -> str:
    """The first few ``items``, then how many more."""
    more = len(items) - SHOWN
    return ", ".join(items[:SHOWN]) + (f" and {more:,} more" if more > 0 else "")
