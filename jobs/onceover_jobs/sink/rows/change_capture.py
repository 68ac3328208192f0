"""Change data capture rows: ``_CHANGE_TYPE`` and ``_CHANGE_SEQUENCE_NUMBER`` checked, and
a sequence number given to every row that has none, the same on every replay.

BigQuery applies a CDC row (an UPSERT or a DELETE of the row with its primary key) only
on the table's ``_default`` stream, which takes no offsets: a retried request, a task
run twice or a replayed micro-batch appends its changes again. Sent again with the same
``_CHANGE_SEQUENCE_NUMBER``, a change converges: BigQuery keeps, per key, the change
with the greatest sequence number (ties to the later ingest, here the same change). So
the *effect* is exactly once when every row's number is the same on every attempt and
orders the changes as the source did; without numbers, a replay of an old batch lands
after a newer one and brings its old values (or a deleted row) back.

The rule the sink numbers rows by when the DataFrame has no ``_CHANGE_SEQUENCE_NUMBER``
(:func:`derived_sequence_numbers`), in three hexadecimal sections::

    <write base>/<partition>/<row>

- *write base*: microseconds since the epoch when the first task of this write's batch
  started, kept in the ledger (``onceover_jobs.sink.ledger.change_sequence``): every
  retry and replay of the batch reads the same one, a later batch of the query has a
  greater one, and so does a later run;
- *partition*: the Spark partition the row is in;
- *row*: its place in the partition, from 0.

What follows from it (the guide's "Change data capture" says it to users): batches and
runs are ordered by when they ran; within a batch, a key changed in two partitions keeps
the change of the higher partition, and a key changed twice in one partition keeps the
later row. A source that changes a key more than once per batch should bring its
changes to one partition in their order (``repartition(key).sortWithinPartitions(seq)``)
or give its own ``_CHANGE_SEQUENCE_NUMBER`` (a log sequence number, say), which the sink
checks and sends as it is.

This module is what the driver checks and ships with the job (no pyarrow: the driver's
commit worker unpickles the job); the rows themselves are made by
``onceover_jobs.sink.rows.change_rows``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CHANGE_TYPE = "_CHANGE_TYPE"
CHANGE_SEQUENCE_NUMBER = "_CHANGE_SEQUENCE_NUMBER"
PSEUDO_COLUMNS = (CHANGE_TYPE, CHANGE_SEQUENCE_NUMBER)
"""BigQuery's CDC pseudo-columns: sent with each row, never columns of the table."""
CHANGE_TYPES = ("UPSERT", "DELETE")
MAX_KEY_COLUMNS = 16
"""BigQuery: "Composite primary keys containing up to 16 columns are supported"."""
MAX_SECTIONS = 4
MAX_SECTION_DIGITS = 16
"""BigQuery: up to four ``/``-separated sections of up to 16 hexadecimal digits each."""
_SECTION = re.compile(r"^[0-9A-Fa-f]{1,16}$")


def pseudo_schema_fields() -> list[Any]:
    """The pseudo-columns as the proto writer schema declares them: STRING fields."""
    from google.cloud.bigquery import SchemaField

    return [SchemaField(name, "STRING") for name in PSEUDO_COLUMNS]


@dataclass(frozen=True)
class ChangeCapture:
    """A CDC write, as the driver checked it: what each task needs to send its rows."""

    key: tuple[str, ...]
    """The table's primary key columns, as the table spells them."""
    change_type: str
    """The DataFrame's ``_CHANGE_TYPE`` column, as it spells it."""
    sequence_number: str | None
    """The DataFrame's ``_CHANGE_SEQUENCE_NUMBER`` column, or None: derived."""


def pseudo_columns(names: list[str]) -> dict[str, str]:
    """The CDC pseudo-columns among a DataFrame's column names: BigQuery's name → the
    DataFrame's spelling (names match case-insensitively, as BigQuery's do)."""
    found: dict[str, str] = {}
    for name in names:
        for pseudo in PSEUDO_COLUMNS:
            if name.casefold() == pseudo.casefold():
                found[pseudo] = name
    return found


def check_sequence_number(text: str) -> str | None:
    """Why ``text`` is not a ``_CHANGE_SEQUENCE_NUMBER`` BigQuery takes; None when it is."""
    sections = text.split("/")
    if len(sections) > MAX_SECTIONS:
        return f"{len(sections)} sections (at most {MAX_SECTIONS}, separated by '/')"
    for section in sections:
        if not _SECTION.match(section):
            if len(section) > MAX_SECTION_DIGITS and all(
                c in "0123456789abcdefABCDEF" for c in section
            ):
                return f"section {section!r} has more than {MAX_SECTION_DIGITS} hex digits"
            return f"section {section!r} is not hexadecimal (0-9, A-F)"
    return None
