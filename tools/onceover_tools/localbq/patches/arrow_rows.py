"""``arrow_rows``: a project can be set to refuse Arrow rows, as one may on BigQuery.

Arrow ingestion (``AppendRowsRequest.arrow_rows``) has been generally available since
2025-10-27; before, Google's Python client called it "experimental ... only selected for
allowlisted customers", and a project, an endpoint or a policy may still refuse it, which
the first write of such a project meets. bqemulator takes Arrow always. With the setting
``arrow_rows`` of :mod:`onceover_tools.localbq.limits` at ``"refused"`` (``"accepted"``,
the default, changes nothing), every request that carries Arrow rows is answered in the
stream with INVALID_ARGUMENT "Arrow format is not supported for this project. Entity:
<stream>", takes no offset, and leaves the connection open; proto rows are taken as
before. BigQuery documents no wording for this refusal: the sentence is the launcher's,
and the sink reads any refusal of an Arrow append that names Arrow (or an allowlist, or
UNIMPLEMENTED) so (``onceover_jobs.sink.wire.arrow_refusal``).

Pinned by ``tests/localbq/test_limits.py``:
``test_a_project_set_to_refuse_arrow_refuses_arrow_rows_and_takes_proto``.
"""

from __future__ import annotations

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.append_answers import answering_first
from onceover_tools.localbq.patches.wrapping import wrap

REFUSAL = "Arrow format is not supported for this project."


def apply() -> None:
    """Refuse Arrow rows while ``arrow_rows`` says ``refused``."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.AppendRowsRequest.pb()

    def arrow_refused(request_bytes: bytes, stream: str) -> bytes | None:
        if limits.WRITE_API_LIMITS.arrow_rows != "refused":
            return None
        if not request_type.FromString(request_bytes).HasField("arrow_rows"):
            return None
        return bytes(
            write_servicer._error_response(
                stream,
                f"{REFUSAL} Entity: {stream}",
                status_code=grpc.StatusCode.INVALID_ARGUMENT,
            )
        )

    # service() looks the handler up on the instance at each call.
    wrap(BigQueryWriteHandler, "_handle_append_rows", answering_first(arrow_refused))
