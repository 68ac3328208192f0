"""Comparing what BigQuery holds with what a check expects: the counts, each batch's (or
run's), the dead-letter rows, the receipts; and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from onceover_backend.services.reconciliation.bigquery_counts import Counts
from onceover_backend.services.reconciliation.expected import Expected
from onceover_backend.services.reconciliation.receipt_check import LISTED_KEYS, ReceiptCheck
from onceover_backend.tables import Reconciliation

RECEIPTS_CUT = (
    "more than {limit:,} keys are held more than once: the keys listed, and each batch's "
    "duplicates, are the first {limit:,}"
)


@dataclass(frozen=True)
class DeadLettered:
    """The scope's runs' rows found in the dead-letter tables, against those expected."""

    found: int
    expected: int
    warnings: list[str]


def compare(
    record: Reconciliation,
    expected: Expected,
    counts: Counts,
    kind: Literal["run", "table"],
    dead_lettered: DeadLettered | None = None,
) -> None:
    """Fill ``record`` with the counts and the verdict; ``dead_lettered``: the runs' rows
    found in the dead-letter tables (None: the batches named none)."""
    if dead_lettered is not None:
        record.rows_in_dead_letter_table = dead_lettered.found
        record.warnings = [*record.warnings, *dead_lettered.warnings]
    record.actual_rows = counts.rows
    record.distinct_keys = counts.distinct_keys
    record.rows_without_key = counts.rows_without_key
    record.duplicate_key_count = counts.duplicate_keys
    record.duplicate_rows = counts.duplicate_rows
    group_field = "batch_id" if kind == "run" else "run_id"
    record.duplicate_keys = [
        {"key": s.key, "count": s.count, group_field: s.group} for s in counts.samples
    ]
    present = counts.distinct_keys if counts.distinct_keys is not None else counts.rows
    record.missing_rows = max(expected.rows - present, 0)
    if counts.distinct_keys is None:
        record.extra_rows = max(counts.rows - expected.rows, 0)
    else:
        record.extra_rows = counts.duplicate_rows + max(counts.distinct_keys - expected.rows, 0)
    groups = _compare_groups(expected, counts, group_field) if expected.stamped else []
    if kind == "run":
        record.batches = groups
    else:
        record.runs = groups
    agrees = (
        counts.rows == expected.rows
        and counts.duplicate_keys == 0
        and (counts.distinct_keys is None or counts.distinct_keys == expected.rows)
        and not counts.rows_without_key
        and all(g["status"] == "ok" for g in groups)
        and (dead_lettered is None or dead_lettered.found == dead_lettered.expected)
    )
    record.status = "ok" if agrees else "mismatch"


def compare_receipts(record: Reconciliation, check: ReceiptCheck) -> None:
    """Add to ``record``'s batches what their receipts found; a batch whose checksum or
    keys differ is a mismatch even where its counts agree."""
    batches = []
    for counted in record.batches:
        row = dict(counted)
        findings = check.batches.get(row["batch_id"])
        if findings is not None:
            row |= findings.public()
            if findings.differs:
                row["status"] = "mismatch"
        batches.append(row)
    record.batches = batches
    if any(row["status"] != "ok" for row in batches):
        record.status = "mismatch"
    if not check.listed_all:
        record.warnings = [*record.warnings, RECEIPTS_CUT.format(limit=LISTED_KEYS)]


def _compare_groups(expected: Expected, counts: Counts, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for group in sorted(
        set(expected.per_group) | set(counts.groups), key=lambda g: (g is not None, str(g))
    ):
        want = expected.per_group.get(group, 0)
        got = counts.groups.get(group)
        actual = got.rows if got else 0
        distinct = got.distinct_keys if got else (0 if counts.distinct_keys is not None else None)
        duplicate_keys = got.duplicate_keys if got else 0
        ok = actual == want and duplicate_keys == 0 and (distinct is None or distinct == want)
        rows.append(
            {
                name: group,
                "status": "ok" if ok else "mismatch",
                "expected_rows": want,
                "actual_rows": actual,
                "distinct_keys": distinct,
                "duplicate_keys": duplicate_keys,
                "duplicate_rows": got.duplicate_rows if got else 0,
            }
        )
    return rows
