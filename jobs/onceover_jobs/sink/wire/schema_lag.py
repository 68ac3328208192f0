"""A writer schema BigQuery's Storage Write API has not caught up with yet.

A column added to a table (``allowFieldAddition``: :mod:`onceover_jobs.sink.table.widening`)
is in the table's schema at once for ``tables.get``, but the Storage Write API sees it
"after some time (in order of minutes)" (Google's ``JsonStreamWriter``); until then an
append whose writer schema carries it is refused whole, nothing of it appended:
INVALID_ARGUMENT "Input schema has more fields than BigQuery schema, extra fields:
'<column>'". Such a refusal is not the rows' fault and passes by itself, so the appender
waits for it as for a transient failure, within the retry deadline, when every field it
names is a column of the table as the driver read it. Any other INVALID_ARGUMENT, or one
naming a column the table lacks, still fails at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import grpc

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_REFUSAL = re.compile(
    r"Input schema has more fields than BigQuery schema, extra fields: (.*?)(?: Entity:|$)",
    re.IGNORECASE | re.DOTALL,
)


def extra_fields(code: int, message: str) -> list[str] | None:
    """The fields a "more fields than BigQuery schema" refusal names; None for any other
    answer."""
    found = _REFUSAL.search(message) if code == INVALID_ARGUMENT else None
    if found is None:
        return None
    names = [name.strip(" '\"`") for name in found.group(1).split(",")]
    return [name for name in names if name] or None


@dataclass(frozen=True)
class SchemaCatchUp:
    """The table's columns as the driver read them (case-folded paths, nested as
    ``a.b``): a refusal that names only these is BigQuery catching up with a schema
    update, and is waited for."""

    columns: frozenset[str]

    @classmethod
    def of(cls, paths: Iterable[str]) -> SchemaCatchUp:
        return cls(frozenset(path.casefold() for path in paths))

    def lagging(self, code: int, message: str) -> list[str] | None:
        """The columns BigQuery's answer says it does not see yet, if the table has them
        all; None when the answer is anything else."""
        extra = extra_fields(code, message)
        if extra is None or any(name.casefold() not in self.columns for name in extra):
            return None
        return extra
