"""Reconciliation by receipt: a stamped run's batches checked against what each batch's
commit reported (rows, key checksum, key tally; onceover.key_checksum), in at most three
aggregate queries whatever the table's size.

1. One query over the run's rows, grouped by batch: rows, distinct keys, NULL keys and
   key checksum per batch, with the run's distinct keys and the keys of the run held
   more than once anywhere in the table. A clean run ends here.
2. For the batches whose rows or checksum differ from their receipt: one query grouped
   by (batch, bucket), rows, checksum and (INT64 keys) key sum per key-hash bucket.
3. When query 1 found keys held more than once: one query listing them (the differing
   buckets' first), with their copies in the table and in their batch.

A bucket's difference from the receipt, once the extra copies of its duplicated keys are
taken out, is then *decoded*: a bucket short by exactly one row names its missing key
(the difference of the key sums, which must hash to the difference of the checksums and
to that bucket), a bucket over by one row its unexpected key; a STRING key is named by
its hash. Any other difference (two keys missing in one bucket, one missing and one
unexpected, NULL keys) is reported as an unresolved bucket, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from google.cloud import bigquery

from onceover.key_checksum import (
    BucketTally,
    KeyBucket,
    hash_of,
    key_bucket,
    key_bucket_sql,
    key_checksum_sql,
    key_hash,
    key_sum_sql,
    key_term,
)
from onceover.stamp import BATCH_ID_COLUMN, RUN_ID_COLUMN
from onceover_backend.services.reconciliation.bigquery_counts import (
    SAMPLE_LIMIT,
    Counts,
    GroupCounts,
    KeyCopies,
    Scope,
    TableCounter,
)

LISTED_KEYS = 1000
"""Duplicated keys query 3 returns at most (the differing buckets' first)."""
MAX_QUERIES = 3
"""What a check by receipt takes at most, whatever the table's size."""
_TERM_LIMIT = 2**32


@dataclass
class Receipt:
    """What the commits of one batch id (all its writes to the table) reported."""

    rows: int
    checksum: int
    buckets: dict[int, list[int]]
    """bucket -> [rows, checksum, key sum]."""
    integer: bool
    """The key sums are kept (an INT64 key): a missing key can be named by value."""

    @classmethod
    def of(cls, reports: list[tuple[int, int, list[KeyBucket]]]) -> Receipt:
        """Merged from the (rows, checksum, tally) each commit of the batch reported."""
        integer = any(key_sum is not None for *_, tally in reports for *_, key_sum in tally)
        tally = BucketTally(integer=integer)
        for _, _, buckets in reports:
            tally.merge(buckets)
        return cls(
            rows=sum(rows for rows, _, _ in reports),
            checksum=sum(checksum for _, checksum, _ in reports),
            buckets={b: list(cell) for b, cell in tally.buckets.items()},
            integer=integer,
        )

    @property
    def rows_without_key(self) -> int:
        return self.rows - sum(cell[0] for cell in self.buckets.values())


@dataclass(frozen=True)
class FoundKey:
    key: str | None
    key_hash: str
    copies: int

    def public(self) -> dict[str, Any]:
        return {"key": self.key, "key_hash": self.key_hash, "copies": self.copies}


@dataclass
class BatchFindings:
    """What the receipt check found in one batch."""

    expected_checksum: int | None
    actual_checksum: int
    differs: bool = False
    duplicated: list[FoundKey] = field(default_factory=list)
    missing: list[FoundKey] = field(default_factory=list)
    unexpected: list[FoundKey] = field(default_factory=list)
    unresolved: list[dict[str, Any]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        return {
            "expected_checksum": self.expected_checksum,
            "actual_checksum": self.actual_checksum,
            "keys_duplicated": [k.public() for k in self.duplicated],
            "keys_missing": [k.public() for k in self.missing],
            "keys_unexpected": [k.public() for k in self.unexpected],
            "unresolved_buckets": self.unresolved,
        }


@dataclass
class ReceiptCheck:
    counts: Counts
    """The same totals a count check gives (the run's rows, distinct keys, the keys
    held more than once in the table), so the verdict is reached the same way."""
    batches: dict[Any, BatchFindings]
    listed_all: bool = True
    """Query 3 returned every duplicated key (not cut at LISTED_KEYS)."""


@dataclass
class _Duplicate:
    batch: Any
    key: str
    bucket: int
    run_copies: int
    copies: int


def check_receipts(
    counter: TableCounter, scope: Scope, receipts: dict[Any, Receipt]
) -> ReceiptCheck:
    """Check ``scope`` (a stamped run, with a key) against its batches' ``receipts``."""
    assert scope.key is not None
    assert scope.run_id is not None
    run = bigquery.ScalarQueryParameter("run_id", "STRING", scope.run_id)
    per_batch = counter.rows(_batches_sql(scope), [run])
    totals = per_batch[0] if per_batch else {"all_distinct": 0, "dup_keys": 0, "dup_rows": 0}
    found = {row["grp"]: row for row in per_batch}
    differing = [
        b
        for b, receipt in receipts.items()
        if b not in found
        or int(found[b]["total_rows"]) != receipt.rows
        or int(found[b]["checksum"]) != receipt.checksum
    ]
    actual: dict[Any, dict[int | None, list[int]]] = {b: {} for b in differing}
    if differing:
        integer = any(receipts[b].integer for b in differing)
        for row in counter.rows(*_buckets_sql(scope, run, differing, integer=integer)):
            key_sum = row.get("key_sum")
            actual[row["grp"]][row["bucket"]] = [
                int(row["total_rows"]),
                int(row["checksum"]),
                _whole(key_sum) if key_sum is not None else 0,
            ]
    pairs = [
        _pair(b, bucket)
        for b in differing
        for bucket in sorted(set(receipts[b].buckets) | {k for k in actual[b] if k is not None})
        if receipts[b].buckets.get(bucket, [0, 0, 0]) != actual[b].get(bucket, [0, 0, 0])
    ]
    duplicates: list[_Duplicate] = []
    if int(totals["dup_keys"] or 0):
        duplicates = [
            _Duplicate(
                r["grp"], str(r["key"]), int(r["bucket"]), int(r["run_copies"]), int(r["copies"])
            )
            for r in counter.rows(*_duplicates_sql(scope, run, pairs))
        ]
    findings = {
        b: _findings(
            receipts.get(b), found.get(b), actual.get(b), [d for d in duplicates if d.batch == b]
        )
        for b in set(receipts) | set(found)
    }
    groups: dict[Any, GroupCounts] = {}
    for b, row in found.items():
        mine = [d for d in duplicates if d.batch == b]
        groups[b] = GroupCounts(
            b,
            rows=int(row["total_rows"]),
            distinct_keys=int(row["distinct_keys"]),
            duplicate_keys=len(mine),
            duplicate_rows=sum(d.copies - 1 for d in mine),
        )
    counts = Counts(
        rows=sum(int(row["total_rows"]) for row in per_batch),
        distinct_keys=int(totals["all_distinct"] or 0),
        rows_without_key=sum(int(row["rows_without_key"]) for row in per_batch),
        duplicate_keys=int(totals["dup_keys"] or 0),
        duplicate_rows=int(totals["dup_rows"] or 0),
        samples=[KeyCopies(d.key, d.copies, d.batch) for d in duplicates[:SAMPLE_LIMIT]],
        groups=groups,
    )
    return ReceiptCheck(counts, findings, listed_all=len(duplicates) < LISTED_KEYS)


def _findings(
    receipt: Receipt | None,
    found: dict[str, Any] | None,
    actual: dict[int | None, list[int]] | None,
    duplicates: list[_Duplicate],
) -> BatchFindings:
    checksum = int(found["checksum"]) if found else 0
    findings = BatchFindings(receipt.checksum if receipt else None, checksum)
    findings.duplicated = [
        FoundKey(d.key, key_hash(d.key), d.copies) for d in sorted(duplicates, key=lambda d: d.key)
    ]
    if receipt is None:  # rows stamped with a batch the run never reported committed
        findings.differs = True
        return findings
    if actual is None:  # rows and checksum agree with the receipt
        return findings
    findings.differs = True
    null_rows = actual.get(None, [0, 0, 0])[0]
    cells = {b: list(cell) for b, cell in actual.items() if b is not None}
    for d in duplicates:  # the extra copies in the batch are explained: take them out
        extra = d.run_copies - 1
        cell = cells.setdefault(d.bucket, [0, 0, 0])
        cell[0] -= extra
        cell[1] -= extra * key_term(d.key)
        cell[2] -= extra * int(d.key) if receipt.integer else 0
    for bucket in sorted(set(receipt.buckets) | set(cells)):
        want = receipt.buckets.get(bucket, [0, 0, 0])
        got = cells.get(bucket, [0, 0, 0])
        rows, term, key_sum = (w - g for w, g in zip(want, got, strict=True))
        if rows == 0 and term == 0 and key_sum == 0:
            continue
        named = _decoded(bucket, rows, term, key_sum, integer=receipt.integer)
        if named is None:
            findings.unresolved.append(
                {"bucket": bucket, "expected_rows": want[0], "actual_rows": got[0]}
            )
        elif rows == 1:
            findings.missing.append(FoundKey(named[0], named[1], 0))
        else:
            findings.unexpected.append(FoundKey(named[0], named[1], 1))
    if null_rows != receipt.rows_without_key:
        findings.unresolved.append(
            {"bucket": None, "expected_rows": receipt.rows_without_key, "actual_rows": null_rows}
        )
    return findings


def _decoded(
    bucket: int, rows: int, term: int, key_sum: int, *, integer: bool
) -> tuple[str | None, str] | None:
    """The one key a bucket's difference (receipt less table: ``rows`` ±1) stands for, as
    (value or None, hash); None when no single key explains it."""
    if rows not in (1, -1):
        return None
    term, key_sum = term * rows, key_sum * rows
    if not 0 <= term < _TERM_LIMIT:
        return None
    if not integer:  # a STRING key: its text cannot be derived, its hash can
        return None, hash_of(term, bucket)
    if key_term(key_sum) != term or key_bucket(key_sum) != bucket:
        return None  # the sums are of several keys, not one
    return str(key_sum), key_hash(key_sum)


def _whole(value: Any) -> int:
    """A BIGNUMERIC sum of INT64 values, as an int."""
    number = Decimal(value) if not isinstance(value, Decimal) else value
    if number != number.to_integral_value():
        raise ValueError(f"a sum of INT64 keys is not whole: {value}")
    return int(number)


def _pair(batch: Any, bucket: int) -> str:
    return f"{'-' if batch is None else batch}:{bucket}"


_PAIR_SQL = (
    f"CONCAT(COALESCE(CAST(`{BATCH_ID_COLUMN}` AS STRING), '-'), ':', CAST({{bucket}} AS STRING))"
)


def _batches_sql(scope: Scope) -> str:
    """Query 1: per batch, and the run's distinct keys and keys held more than once."""
    key, table = f"`{scope.key}`", f"`{scope.table}`"
    return (
        f"WITH run_rows AS (SELECT {key} AS k, `{BATCH_ID_COLUMN}` AS grp FROM {table} "
        f"WHERE `{RUN_ID_COLUMN}` = @run_id), "
        "per_batch AS (SELECT grp, COUNT(*) AS total_rows, COUNT(DISTINCT k) AS distinct_keys, "
        f"COUNTIF(k IS NULL) AS rows_without_key, {key_checksum_sql('k')} AS checksum "
        "FROM run_rows GROUP BY grp), "
        "run_keys AS (SELECT DISTINCT k FROM run_rows WHERE k IS NOT NULL), "
        f"copies AS (SELECT t.{key} AS k, COUNT(*) AS copies FROM {table} AS t "
        f"JOIN run_keys ON t.{key} = run_keys.k GROUP BY t.{key} HAVING COUNT(*) > 1), "
        "totals AS (SELECT (SELECT COUNT(*) FROM run_keys) AS all_distinct, "
        "(SELECT COUNT(*) FROM copies) AS dup_keys, "
        "(SELECT COALESCE(SUM(copies - 1), 0) FROM copies) AS dup_rows) "
        "SELECT per_batch.*, totals.all_distinct, totals.dup_keys, totals.dup_rows "
        "FROM per_batch CROSS JOIN totals"
    )


def _in_batches(batches: list[Any]) -> tuple[str, list[Any]]:
    numbered = [b for b in batches if b is not None]
    column = f"`{BATCH_ID_COLUMN}`"
    where = f"({column} IN UNNEST(@batches) OR (@batch_write AND {column} IS NULL))"
    return where, [
        bigquery.ArrayQueryParameter("batches", "INT64", numbered),
        bigquery.ScalarQueryParameter("batch_write", "BOOL", None in batches),
    ]


def _buckets_sql(
    scope: Scope, run: bigquery.ScalarQueryParameter, batches: list[Any], *, integer: bool
) -> tuple[str, list[Any]]:
    """Query 2: the differing batches' rows by key-hash bucket (and key sum: ``integer``)."""
    assert scope.key is not None
    where, params = _in_batches(batches)
    key_sum = f", {key_sum_sql(scope.key)} AS key_sum" if integer else ""
    sql = (
        f"SELECT `{BATCH_ID_COLUMN}` AS grp, {key_bucket_sql(scope.key)} AS bucket, "
        f"COUNT(*) AS total_rows, {key_checksum_sql(scope.key)} AS checksum{key_sum} "
        f"FROM `{scope.table}` WHERE `{RUN_ID_COLUMN}` = @run_id AND {where} "
        "GROUP BY grp, bucket"
    )
    return sql, [run, *params]


def _duplicates_sql(
    scope: Scope, run: bigquery.ScalarQueryParameter, pairs: list[str]
) -> tuple[str, list[Any]]:
    """Query 3: the run's keys held more than once in the table, with their copies there
    and in their batch, the differing (batch, bucket) pairs' first."""
    assert scope.key is not None
    key, bucket = f"`{scope.key}`", key_bucket_sql(scope.key)
    pair = _PAIR_SQL.format(bucket=bucket)
    sql = (
        f"WITH run_keys AS (SELECT `{BATCH_ID_COLUMN}` AS grp, {key} AS k, {bucket} AS bucket, "
        f"{pair} IN UNNEST(@pairs) AS differing, COUNT(*) AS run_copies FROM `{scope.table}` "
        f"WHERE `{RUN_ID_COLUMN}` = @run_id AND {key} IS NOT NULL "
        "GROUP BY grp, k, bucket, differing) "
        f"SELECT r.grp, CAST(r.k AS STRING) AS key, r.bucket, r.run_copies, COUNT(*) AS copies, "
        f"r.differing FROM `{scope.table}` AS t JOIN run_keys AS r ON t.{key} = r.k "
        "GROUP BY r.grp, r.k, r.bucket, r.run_copies, r.differing HAVING COUNT(*) > 1 "
        f"ORDER BY differing DESC, copies DESC, key LIMIT {LISTED_KEYS}"
    )
    return sql, [run, bigquery.ArrayQueryParameter("pairs", "STRING", pairs)]
