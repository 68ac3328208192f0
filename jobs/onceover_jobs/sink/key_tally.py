"""A task's share of its batch's key checksum (onceover.key_checksum): every row of the
partition as it goes to the writer, less the rows BigQuery refused (set aside in the
dead-letter table, so not in the table). Kept only for stamped writes with an INT64 or
STRING key: the checksum is there to check a stamped batch in place."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from onceover.key_checksum import CHECKSUMMED_TYPES, key_term
from onceover_jobs.sink.job import SinkJob


class KeyTally:
    """Sums the key terms of the rows that pass through :meth:`observe`."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.total = 0

    @classmethod
    def of(cls, job: SinkJob) -> KeyTally | None:
        """A tally for ``job``, or None when its batches carry no checksum."""
        key = job.options.key
        if not job.options.stamp or key is None:
            return None
        types = {f["name"]: str(f.get("type", "")).upper() for f in job.table_fields}
        return cls(key) if types.get(key) in CHECKSUMMED_TYPES else None

    def observe(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.total += sum(
                key_term(v) for v in batch.column(self.key).to_pylist() if v is not None
            )
            yield batch

    def without(self, refused_keys: Iterable[str | None]) -> int:
        """The tally less the rows with ``refused_keys`` (their key text)."""
        return self.total - sum(key_term(k) for k in refused_keys if k is not None)
