"""A batch's key checksum: order-independent, computed by the sink as it writes and by
one aggregate query in BigQuery, so a stamped batch is checked in place.

Each row adds the first 32 bits of ``MD5(CAST(key AS STRING))`` read as an unsigned
integer; rows whose key is NULL add nothing. A sum (not an XOR) so that a duplicated
row changes it; 32-bit terms so that it fits INT64 for 2^31 rows. Defined for INT64 and
STRING keys, whose text is the same in Python and in BigQuery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

CHECKSUMMED_TYPES = frozenset({"INT64", "INTEGER", "STRING"})
"""The BigQuery key types whose checksum the sink computes."""


def key_term(value: int | str) -> int:
    """What one row with key ``value`` adds."""
    return int.from_bytes(hashlib.md5(str(value).encode()).digest()[:4], "big")  # noqa: S324 - a checksum, not security


def key_checksum(values: Iterable[int | str | None]) -> int:
    """The checksum of rows with keys ``values``."""
    return sum(key_term(v) for v in values if v is not None)


def key_checksum_sql(column: str) -> str:
    """The same, as a BigQuery aggregate over ``column`` (a checked identifier)."""
    return (
        f"COALESCE(SUM(CAST(CONCAT('0x', SUBSTR(TO_HEX(MD5(CAST(`{column}` AS STRING))), 1, 8))"
        " AS INT64)), 0)"
    )
