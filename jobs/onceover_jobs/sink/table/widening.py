"""``allowFieldAddition`` / ``allowFieldRelaxation``: the table's schema widened before a write.

The spark-bigquery-connector's two options add the load job's schema update options
``ALLOW_FIELD_ADDITION`` and ``ALLOW_FIELD_RELAXATION``. The Storage Write API has no
load job, so the sink makes the same change itself, on the driver, before any task
plans its rows: one ``tables.update`` of the schema, as BigQuery allows a schema to
change ("Modifying table schemas"): columns are only added, NULLABLE or REPEATED, at the
top level or inside an existing RECORD; a REQUIRED column only becomes NULLABLE. Nothing
else changes (no type, no column removed or renamed), so a DataFrame column of another
type than the table's is still refused by the write's schema check, naming it.

- ``allowFieldAddition``: each column of the DataFrame the table lacks is added (a
  non-nullable DataFrame column as NULLABLE: BigQuery adds no REQUIRED column).
- ``allowFieldRelaxation``: each REQUIRED column the DataFrame gives as nullable, or
  leaves out, becomes NULLABLE.

The update carries the table's ETag (``If-Match``): a driver that lost a race to another
one widening the same table reads the table again and widens that, so neither loses the
other's columns. A widening already there makes no update at all: a re-run, or every
micro-batch of a stream, costs the one ``tables.get`` the write makes anyway.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceover_jobs.sink.errors import SinkOptionError

if TYPE_CHECKING:
    import pyarrow as pa
    from google.cloud.bigquery import SchemaField

    from onceover.bigquery import BigQueryConfig

logger = logging.getLogger(__name__)

UPDATE_RACES = 5
"""Times a widening is computed again after another writer changed the table first."""


@dataclass(frozen=True)
class Widening:
    """What the write may do to the table's schema (both False: nothing)."""

    add: bool = False
    relax: bool = False

    @property
    def any(self) -> bool:
        return self.add or self.relax


def widening_option(options: Mapping[str, str]) -> Widening:
    """The two options as the write gives them (lower-case keys)."""
    return Widening(
        add=_flag(options, "allowfieldaddition", "allowFieldAddition"),
        relax=_flag(options, "allowfieldrelaxation", "allowFieldRelaxation"),
    )


def _flag(options: Mapping[str, str], key: str, name: str) -> bool:
    text = options.get(key, "false").strip().lower()
    if text not in ("true", "false"):
        raise SinkOptionError(name, f"{options[key]!r} is not true or false; nothing was written")
    return text == "true"


@dataclass(frozen=True)
class Changes:
    """A widened schema and what changed, by column path."""

    fields: list[SchemaField]
    added: list[str]
    relaxed: list[str]


def widened(table_fields: Sequence[SchemaField], source: pa.Schema, widening: Widening) -> Changes:
    """``table_fields`` widened for rows of ``source``, as ``widening`` allows."""
    from onceover_jobs.sink.rows.schema import bigquery_schema_from_arrow

    wanted = bigquery_schema_from_arrow(source)
    added: list[str] = []
    relaxed: list[str] = []
    fields = _merge(list(table_fields), wanted, widening, "", added, relaxed)
    return Changes(fields, added, relaxed)


def _merge(  # noqa: PLR0917 - the recursion's state, named at its two call sites
    table: list[SchemaField],
    wanted: Sequence[SchemaField],
    widening: Widening,
    prefix: str,
    added: list[str],
    relaxed: list[str],
) -> list[SchemaField]:
    from google.cloud.bigquery import SchemaField

    given = {f.name.casefold(): f for f in wanted}
    merged: list[SchemaField] = []
    for column in table:
        source = given.pop(column.name.casefold(), None)
        mode = column.mode or "NULLABLE"
        path = prefix + column.name
        if widening.relax and mode == "REQUIRED" and (source is None or source.mode != "REQUIRED"):
            relaxed.append(path)
            mode = "NULLABLE"
        members = list(column.fields)
        if source is not None and column.field_type in ("RECORD", "STRUCT") and source.fields:
            members = _merge(members, source.fields, widening, f"{path}.", added, relaxed)
        if mode == (column.mode or "NULLABLE") and members == list(column.fields):
            merged.append(column)
            continue
        resource = copy.deepcopy(column.to_api_repr())  # it is the field's own: never changed
        resource["mode"] = mode
        if members:
            resource["fields"] = [m.to_api_repr() for m in members]
        merged.append(SchemaField.from_api_repr(resource))
    if widening.add:
        for source in given.values():  # in the DataFrame's order, after the table's
            added.append(prefix + source.name)
            merged.append(_nullable(source))
    return merged


def _nullable(field: SchemaField) -> SchemaField:
    """``field`` as a column BigQuery adds: REPEATED stays, anything else is NULLABLE."""
    from google.cloud.bigquery import SchemaField

    resource = copy.deepcopy(field.to_api_repr())
    if resource.get("mode") != "REPEATED":
        resource["mode"] = "NULLABLE"
    if field.fields:
        resource["fields"] = [_nullable(member).to_api_repr() for member in field.fields]
    return SchemaField.from_api_repr(resource)


def widening_advice(
    table_fields: Sequence[SchemaField], source: pa.Schema, widening: Widening, problems: list[str]
) -> list[str]:
    """What the options this write does not give would fix of ``problems`` (a schema
    check's, naming columns as ``'path'``): one sentence per option, each naming its
    columns; none when neither option would fix any."""
    from onceover_jobs.sink.errors import SchemaMismatchError

    withheld = Widening(add=not widening.add, relax=not widening.relax)
    if not withheld.any:
        return []
    try:
        changes = widened(table_fields, source, withheld)
    except SchemaMismatchError:  # a column BigQuery cannot hold: no option fixes that
        return []

    def at_fault(paths: list[str]) -> str:
        named = [p for p in paths if any(repr(p) in problem for problem in problems)]
        return ", ".join(repr(p) for p in named)

    advice = []
    if added := at_fault(changes.added):
        advice.append(f"give .option('allowFieldAddition', 'true') to add {added} (NULLABLE)")
    if relaxed := at_fault(changes.relaxed):
        advice.append(f"give .option('allowFieldRelaxation', 'true') to make {relaxed} NULLABLE")
    return advice


def widen_table(
    config: BigQueryConfig, table_id: str, source: pa.Schema, widening: Widening
) -> list[SchemaField]:
    """The table's schema after widening it for rows of ``source`` (unchanged, and no
    update made, when there is nothing to widen)."""
    from google.api_core.exceptions import PreconditionFailed

    from onceover_jobs.sink.rows.schema import rest_client

    client = rest_client(config)
    for _ in range(UPDATE_RACES):
        table = client.get_table(table_id)
        changes = widened(list(table.schema), source, widening)
        if not changes.added and not changes.relaxed:
            return list(table.schema)
        table.schema = changes.fields
        try:
            updated = client.update_table(table, ["schema"])  # If-Match: the table's ETag
        except PreconditionFailed:
            continue  # another writer changed it first: widen what it left
        logger.warning(
            "onceover: widened %s before the write: added %s; relaxed to NULLABLE %s",
            table_id, ", ".join(changes.added) or "nothing",
            ", ".join(changes.relaxed) or "nothing",
        )  # fmt: skip
        return list(updated.schema)
    raise SinkOptionError(
        "allowFieldAddition",
        f"{table_id} kept changing while the write widened its schema ({UPDATE_RACES} "
        "tries); nothing was written: run the write again",
    )
