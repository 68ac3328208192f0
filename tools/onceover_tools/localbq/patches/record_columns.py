"""``record_columns``: RECORD and REPEATED RECORD columns take appends.

AppendRows on a table with a RECORD column failed ("STRUCT with no fields") for Arrow and
proto rows alike: bqemulator built the append's target Arrow schema from the table's
columns without their member fields. BigQuery (``AppendRowsRequest.ArrowData``,
``ProtoData``) takes a RECORD column as an Arrow struct or a nested proto message, and a
REPEATED RECORD as a ``list<struct>`` or a repeated nested message. The patch builds the
target schema from the table's REST schema (``tables.get``), members included.

Pinned by ``tests/localbq/test_patches.py``:
``test_record_and_repeated_record_columns_accept_arrow_appends``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Give AppendRows a target schema with the members of RECORD columns."""
    from bqemulator.api.routes.tabledata import _build_arrow_schema
    from bqemulator.api.routes.tables import _field_to_rest
    from bqemulator.grpc_api import write_servicer

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_arrow_schema(table_meta: Any) -> Any:
            # The REST shape of the schema (tables.get) recurses into RECORD members.
            return _build_arrow_schema([_field_to_rest(f) for f in table_meta.schema_.fields])

        return _table_arrow_schema

    # _bind_stream_to_target looks the module-level function up by name at each bind.
    wrap(write_servicer, "_table_arrow_schema", make)
