"""A batch's key checksum: order-independent, computed by the sink as it writes and by
one aggregate query in BigQuery, so a stamped batch is checked in place.

Each row adds the first 32 bits of ``MD5(CAST(key AS STRING))`` read as an unsigned
integer; rows whose key is NULL add nothing. A sum (not an XOR) so that a duplicated
row changes it; 32-bit terms so that it fits INT64 for 2^31 rows. Defined for INT64 and
STRING keys, whose text is the same in Python and in BigQuery.

Beside the checksum, a batch's receipt keeps a *key tally*: the rows split into
:data:`KEY_BUCKETS` buckets by byte 4 of the same MD5 (:func:`key_bucket`, the bits the
checksum does not use), and for each non-empty bucket its rows, its checksum and, for
INT64 keys, the exact sum of its key values. Reconciliation compares it bucket by
bucket with one grouped query; a bucket short (or over) by exactly one row then names
the key: the difference of the key sums, checked against the difference of the
checksums, as an invertible Bloom lookup table decodes a pure cell. A STRING key cannot
be derived from sums, so it is named by its hash (:func:`key_hash`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TypeAlias

CHECKSUMMED_TYPES = frozenset({"INT64", "INTEGER", "STRING"})
"""The BigQuery key types whose checksum the sink computes."""


INTEGER_TYPES = frozenset({"INT64", "INTEGER"})
"""The key types whose tally also sums the key values."""
KEY_BUCKETS = 256
"""Buckets of a key tally: byte 4 of ``MD5(CAST(key AS STRING))``."""
BUCKET_LIMIT = 2**53 - 1
"""The largest per-bucket number a tally holds (what JSON readers keep exact); a batch
with a bucket past it (some two million rows in one bucket) keeps no tally."""

KeyBucket: TypeAlias = tuple[int, int, int, str | None]
"""One non-empty bucket of a tally as receipts carry it: (bucket, rows, checksum, sum of
the key values as decimal text for INT64 keys, else None). Text, because the sum of
INT64 values outgrows every integer JSON readers keep exact."""


def _digest(value: int | str) -> bytes:
    return hashlib.md5(str(value).encode()).digest()  # noqa: S324 - a checksum, not security


def key_term(value: int | str) -> int:
    """What one row with key ``value`` adds."""
    return int.from_bytes(_digest(value)[:4], "big")


def key_bucket(value: int | str) -> int:
    """The tally bucket of key ``value``."""
    return _digest(value)[4] % KEY_BUCKETS


def key_hash(value: int | str) -> str:
    """How a key is named when its value cannot be: its term and bucket, the first ten hex
    digits of ``MD5(CAST(key AS STRING))`` (``SUBSTR(TO_HEX(MD5(...)), 1, 10)``)."""
    return _digest(value)[:5].hex()


def hash_of(term: int, bucket: int) -> str:
    """:func:`key_hash` of a key known only by its term and bucket."""
    return f"{term:08x}{bucket:02x}"


def key_checksum(values: Iterable[int | str | None]) -> int:
    """The checksum of rows with keys ``values``."""
    return sum(key_term(v) for v in values if v is not None)


def key_checksum_sql(column: str) -> str:
    """The same, as a BigQuery aggregate over ``column`` (a checked identifier)."""
    return f"COALESCE(SUM({key_term_sql(column)}), 0)"


def key_term_sql(column: str) -> str:
    """:func:`key_term` of ``column`` (a checked identifier), as a BigQuery expression."""
    return f"CAST(CONCAT('0x', SUBSTR(TO_HEX(MD5(CAST(`{column}` AS STRING))), 1, 8)) AS INT64)"


def key_bucket_sql(column: str) -> str:
    """:func:`key_bucket` of ``column``, as a BigQuery expression (NULL for a NULL key)."""
    return (
        f"MOD(CAST(CONCAT('0x', SUBSTR(TO_HEX(MD5(CAST(`{column}` AS STRING))), 9, 2)) AS INT64),"
        f" {KEY_BUCKETS})"
    )


def key_sum_sql(column: str) -> str:
    """The exact sum of an INT64 ``column``, as a BigQuery aggregate (BIGNUMERIC: a sum of
    INT64 values overflows INT64)."""
    return f"COALESCE(SUM(CAST(`{column}` AS BIGNUMERIC)), 0)"


class BucketTally:
    """A key tally being built: per bucket, rows, checksum and (``integer``) key sum."""

    def __init__(self, *, integer: bool) -> None:
        self.integer = integer
        self.buckets: dict[int, list[int]] = {}

    def add(self, value: int | str, times: int = 1) -> int:
        """Count ``times`` rows with key ``value`` (negative ``times`` takes rows away);
        the key's term (:func:`key_term`), hashed once for both. An INT64 key may come as
        its text."""
        digest = _digest(value)
        term = int.from_bytes(digest[:4], "big")
        cell = self.buckets.setdefault(digest[4] % KEY_BUCKETS, [0, 0, 0])
        cell[0] += times
        cell[1] += times * term
        if self.integer:
            cell[2] += times * int(value)
        return term

    def merge(self, buckets: Iterable[KeyBucket]) -> None:
        """Add a receipt's tally (:meth:`receipt`) to this one."""
        for bucket, rows, checksum, key_sum in buckets:
            cell = self.buckets.setdefault(bucket, [0, 0, 0])
            cell[0] += rows
            cell[1] += checksum
            cell[2] += int(key_sum) if key_sum is not None else 0

    def receipt(self) -> tuple[KeyBucket, ...] | None:
        """The non-empty buckets as receipts carry them, in bucket order; None when a
        bucket outgrew :data:`BUCKET_LIMIT` (or went negative: rows taken away that were
        never counted), so no tally can be trusted."""
        kept = sorted((b, cell) for b, cell in self.buckets.items() if any(cell))
        if any(not 0 < cell[0] <= BUCKET_LIMIT or not 0 <= cell[1] <= BUCKET_LIMIT
               for _, cell in kept):  # fmt: skip
            return None
        return tuple(
            (b, rows, checksum, str(key_sum) if self.integer else None)
            for b, (rows, checksum, key_sum) in kept
        )


def merged_tally(shares: Iterable[Sequence[KeyBucket]]) -> tuple[KeyBucket, ...] | None:
    """The tally of several shares of one batch (its tasks', or its writes')."""
    shares = list(shares)
    integer = any(key_sum is not None for share in shares for *_, key_sum in share)
    tally = BucketTally(integer=integer)
    for share in shares:
        tally.merge(share)
    return tally.receipt()


def tally_rows(buckets: Sequence[KeyBucket] | None) -> int:
    """The rows a receipt's tally counts (rows with a NULL key are in no bucket)."""
    return sum(rows for _, rows, _, _ in buckets or ())
