"""A task's share of its batch's key checksum and key tally (onceover.key_checksum):
every row of the partition as it goes to the writer, less the rows BigQuery refused
(set aside in the dead-letter table, so not in the table). Kept only for stamped writes
with an INT64 or STRING key: both are there to check a stamped batch in place."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from onceover.key_checksum import CHECKSUMMED_TYPES, INTEGER_TYPES, BucketTally, KeyBucket


class KeyTally:
    """Sums the key terms of the rows that pass through :meth:`observe`, and tallies
    them by bucket."""

    def __init__(self, key: str, *, integer: bool = False) -> None:
        self.key = key
        self.total = 0
        self.buckets = BucketTally(integer=integer)

    @classmethod
    def of(
        cls, key: str | None, *, stamped: bool, table_fields: Iterable[Mapping[str, Any]]
    ) -> KeyTally | None:
        """A tally of ``key`` in a write to a table of ``table_fields`` (the API's schema
        dicts), or None when its batches carry no checksum."""
        if not stamped or key is None:
            return None
        types = {f["name"]: str(f.get("type", "")).upper() for f in table_fields}
        kind = types.get(key)
        if kind not in CHECKSUMMED_TYPES:
            return None
        return cls(key, integer=kind in INTEGER_TYPES)

    def observe(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for value in batch.column(self.key).to_pylist():
                if value is not None:
                    self.total += self.buckets.add(value)
            yield batch

    def without(self, refused_keys: Iterable[str | None]) -> int:
        """The checksum less the rows with ``refused_keys`` (their key text); takes them
        out of the bucket tally too."""
        total = self.total
        for key in refused_keys:
            if key is not None:
                total -= self.buckets.add(key, -1)
        return total

    def receipt(self) -> tuple[KeyBucket, ...] | None:
        """The partition's share of the batch's key tally (after :meth:`without`)."""
        return self.buckets.receipt()
