"""``schema_update_lag``: the Storage Write API sees a column added to a table a while later.

BigQuery: a table's schema changed by ``tables.update`` / ``tables.patch`` reaches the
Storage Write API later than ``tables.get`` shows it. Google's clients say so: "if the
BigQuery table schema is updated, users will be able to ingest data on the new schema
after some time (in order of minutes)" (``JsonStreamWriter``, ``SchemaAwareStreamWriter``);
its maintainers: a "delayed response ... in knowing when the schema is updated due to
time taken in metadata updates" (googleapis/java-bigquerystorage#1465). Until then an
append whose writer schema carries the new column is refused, nothing of it appended:
INVALID_ARGUMENT "Input schema has more fields than BigQuery schema, extra fields:
'<column>'" (apache/beam#27892 quotes it). bqemulator sees every change at once.

With the setting ``schema_update_lag_s`` of :mod:`onceover_tools.localbq.limits` above 0
(0, the default, changes nothing), a request whose writer schema (the first of a
connection) names a top-level column a schema update added less than that long ago is
answered in the stream with that refusal; rows of the old columns land as ever, NULL in
the new one. Only such
columns are refused: the pseudo-columns of CDC and anything else bqemulator drops are left
as they were. Relaxing REQUIRED → NULLABLE is not delayed here.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_column_added_by_a_schema_update_is_refused_by_appends_until_the_write_api_sees_it``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap

REFUSAL = "Input schema has more fields than BigQuery schema, extra fields:"

_lock = threading.Lock()
_added_at: dict[tuple[str, str, str], dict[str, float]] = {}
"""By table: when each column a schema update added was added (monotonic clock)."""


def _lagging(project: str, dataset: str, table: str) -> set[str]:
    """The table's columns (case-folded) the Write API does not see yet."""
    lag = float(limits.WRITE_API_LIMITS.schema_update_lag_s)
    if lag <= 0:
        return set()
    now = time.monotonic()
    with _lock:
        added = _added_at.get((project, dataset, table), {})
        return {name for name, at in added.items() if now - at < lag}


def apply() -> None:
    from bqemulator.catalog.memory_repository import MemoryCatalogRepository
    from bqemulator.grpc_api import write_servicer

    def make_update(original: Callable[..., Any]) -> Callable[..., Any]:
        def update_table(catalog: Any, table: Any) -> Any:
            key = (table.project_id, table.dataset_id, table.table_id)
            before = catalog.get_table(*key)
            updated = original(catalog, table)
            if before is not None and before.schema_.fields:
                known = {f.name.casefold() for f in before.schema_.fields}
                now = time.monotonic()
                with _lock:
                    added = _added_at.setdefault(key, {})
                    for field in updated.schema_.fields:
                        if field.name.casefold() not in known:
                            added[field.name.casefold()] = now
            return updated

        return update_table

    def make_rows(original: Callable[..., Any]) -> Callable[..., Any]:
        def _rows_for_request(
            request: Any, proto_decoder: Any, arrow_schema_bytes: Any, target_schema: Any
        ) -> Any:
            extra = _extra_fields(request)
            if extra:
                # Raised as ValueError, bqemulator answers it in the stream, INVALID_ARGUMENT.
                raise ValueError(f"{REFUSAL} '{','.join(extra)}' Entity: {request.write_stream}")
            return original(request, proto_decoder, arrow_schema_bytes, target_schema)

        return _rows_for_request

    def _extra_fields(request: Any) -> list[str]:
        names = _writer_field_names(request)
        if not names:
            return []
        stream = str(request.write_stream)
        parts = stream.split("/")  # projects/p/datasets/d/tables/t/streams/s
        if len(parts) < 6:
            return []
        lagging = _lagging(parts[1], parts[3], parts[5])
        return [n for n in names if n.casefold() in lagging]

    wrap(MemoryCatalogRepository, "update_table", make_update)
    # _handle_append_rows looks the module-level name up at each request.
    wrap(write_servicer, "_rows_for_request", make_rows)


def _writer_field_names(request: Any) -> list[str]:
    """The top-level fields of the writer schema a request carries (none: it carries none)."""
    import pyarrow as pa

    raw = type(request).pb(request)
    if raw.HasField("arrow_rows") and raw.arrow_rows.HasField("writer_schema"):
        schema = pa.ipc.read_schema(pa.py_buffer(raw.arrow_rows.writer_schema.serialized_schema))
        return list(schema.names)
    if raw.HasField("proto_rows") and raw.proto_rows.HasField("writer_schema"):
        return [f.name for f in raw.proto_rows.writer_schema.proto_descriptor.field]
    return []
