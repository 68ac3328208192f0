"""``sticky_write_stream``: later requests of a connection may omit ``write_stream``.

bqemulator looked up the stream of every AppendRows request by its ``write_stream`` field
and failed with "Stream not found" when it was empty. BigQuery
(``AppendRowsRequest.write_stream``) requires the field only in the first request of a
connection; later requests without it go to the same stream. The official
``AppendRowsStream`` sends exactly that.

Pinned by ``tests/localbq/test_patches.py``:
``test_requests_after_the_first_may_omit_the_stream_name``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """An AppendRows request without ``write_stream`` goes to the connection's stream."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _ensure_stream_bound(
            handler: Any, stream_name: str, bound_ctx: Any, context: Any
        ) -> Any:
            if not stream_name and bound_ctx is not None:
                return bound_ctx
            return original(handler, stream_name, bound_ctx, context)

        return _ensure_stream_bound

    wrap(BigQueryWriteHandler, "_ensure_stream_bound", make)
