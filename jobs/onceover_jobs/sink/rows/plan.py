"""The write plan: what the executors need to convert batches, shipped in the job.

A module of its own, importing no pyarrow until the schema is read: the plan travels in
every pickled writer, and the driver's commit worker, which unpickles one, has no use
for Arrow (:mod:`onceover_jobs.sink.rows.schema` makes the plan).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class WritePlan:
    """What the executors need to convert batches: shipped from the driver in the job.

    Holds the Arrow schema of the request (the table's names, in the table's order,
    only the columns the DataFrame has) as Arrow IPC bytes, which pickle anywhere.
    """

    table: str
    serialized_schema: bytes
    """``writer_schema.serialized_schema`` of every request."""

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema every converted batch has."""
        import pyarrow as pa

        return pa.ipc.read_schema(pa.py_buffer(self.serialized_schema))
