"""``append_request_limit``: AppendRows takes requests up to 20 MB and refuses larger ones.

bqemulator refused an ``AppendRowsRequest`` over 10 MiB (its
``write_api_max_request_bytes``) in the stream with RESOURCE_EXHAUSTED, and its gRPC
server, sized from that cap plus 1 MiB, ended the connection on a request over ~11 MB.
BigQuery (``AppendRowsRequest`` reference, storage.proto as of
google-cloud-bigquery-storage 2.43: "The size of a single AppendRowsRequest must be less
than 20 MB in size. Requests larger than this return an error, typically
``INVALID_ARGUMENT``") takes requests up to 20 MB. "20 MB" is read as 20,000,000 bytes,
the smaller reading: Google's Java client refuses a request over
``ConnectionWorker.getApiMaxRequestBytes()`` = ``20L * 1000L * 1000L`` ("20 megabytes")
before sending it, while BigQuery itself has reported its cap in binary units ("AppendRows
request too large: 11854265 limit 10485760 Entity: <stream>" when the documented limit was
10 MB; hafenkran/duckdb-bigquery#134). The patch lifts bqemulator's own cap and its gRPC
message caps to ``limits.APPEND_REQUEST_CEILING_BYTES`` (64 MiB) and answers each request
over ``append_request_max_bytes`` (read per request; a request of exactly the limit is
taken, as the Java client's check lets it through) in the stream with INVALID_ARGUMENT
"AppendRows request too large: <size> limit <limit> Entity: <stream>" (BigQuery's wording
in that report), without reading it and with no ``StorageError``; the connection stays
open and takes the next request, and the refused request takes no offset. Past the
ceiling bqemulator answers as before.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_request_up_to_20_mb_is_taken_and_a_larger_one_refused_in_the_stream``,
``test_the_request_limit_is_read_on_every_request``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.append_answers import answering_first, leading_write_stream
from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Take AppendRows requests up to ``append_request_max_bytes``; refuse larger ones in
    the stream with INVALID_ARGUMENT, as BigQuery does."""
    import bqemulator.server
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def make_build(original: Callable[..., Any]) -> Callable[..., Any]:
        def build_grpc_server(context: Any) -> Any:
            # bqemulator refuses requests over this itself (RESOURCE_EXHAUSTED) and sizes
            # gRPC's message caps from it (+1 MiB): both go up to the ceiling.
            context.settings.write_api_max_request_bytes = limits.APPEND_REQUEST_CEILING_BYTES
            return original(context)

        return build_grpc_server

    def too_large(request_bytes: bytes, stream: str) -> bytes | None:
        most = limits.WRITE_API_LIMITS.append_request_max_bytes
        if len(request_bytes) <= most:
            return None
        entity = leading_write_stream(request_bytes) or stream
        return bytes(
            write_servicer._error_response(
                entity,
                f"AppendRows request too large: {len(request_bytes)} limit {most} Entity: {entity}",
                status_code=grpc.StatusCode.INVALID_ARGUMENT,
            )
        )

    # server.py imported the factory by name, so the name there is the one to wrap.
    wrap(bqemulator.server, "build_grpc_server", make_build)
    # service() looks the handler up on the instance at each call.
    wrap(BigQueryWriteHandler, "_handle_append_rows", answering_first(too_large))
