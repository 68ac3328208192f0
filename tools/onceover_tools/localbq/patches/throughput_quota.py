"""``throughput_quota``: appends over the project's throughput quota are refused while it
refills.

BigQuery limits the bytes a project's AppendRows may send ("Storage Write API quotas and
limits": *Throughput*, 3 GB per second in a multi-region, 300 MB in a region). Over it,
an append is refused with RESOURCE_EXHAUSTED: "Exceeds 'AppendRows throughput' quota,
user_id: ... (status: INSUFFICIENT_TOKENS), you can issue a raise quota request through
Google Cloud Console. Be sure to include this full error message in the request
description. Entity: <stream>" (Apache Beam PR #25073). And "all append operations are
rejected while a quota is being refilled", which takes up to 10 s for the short-term
quota and up to 10 minutes for the long-term one (Beam PR #31837, from BigQuery's team).
bqemulator takes any throughput.

The patch counts each AppendRows request's bytes per project over a rolling window
(``append_bytes_per_window`` per ``append_window_s`` of
:mod:`onceover_tools.localbq.limits`); the request that would exceed it, and every one
after it for ``append_refill_s``, is answered in the stream with RESOURCE_EXHAUSTED and
BigQuery's message, takes no offset, and leaves the connection open. Tests shorten the
window and the refill to see a write wait for the quota and go on.

Pinned by ``tests/localbq/test_limits.py``:
``test_appends_over_the_throughput_quota_are_refused_until_it_refills``.
"""

from __future__ import annotations

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.append_answers import answering_first
from onceover_tools.localbq.patches.wrapping import wrap


def _project_of(stream: str) -> str:
    """``projects/{p}/datasets/...`` → ``p`` (``""`` when it names none)."""
    parts = stream.split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "projects" else ""


def refusal(project: str, stream: str) -> str:
    return (
        f"Exceeds 'AppendRows throughput' quota, user_id: {project} (status: "
        "INSUFFICIENT_TOKENS), you can issue a raise quota request through Google Cloud "
        "Console. Be sure to include this full error message in the request description. "
        f" Entity: {stream}"
    )


def apply() -> None:
    """Refuse appends over the throughput quota, and all of them while it refills."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def over_quota(request_bytes: bytes, stream: str) -> bytes | None:
        project = _project_of(stream)
        if not project or limits.THROUGHPUT_QUOTA.admit(project, len(request_bytes)):
            return None
        return bytes(
            write_servicer._error_response(
                stream, refusal(project, stream), status_code=grpc.StatusCode.RESOURCE_EXHAUSTED
            )
        )

    # service() looks the handler up on the instance at each call.
    wrap(BigQueryWriteHandler, "_handle_append_rows", answering_first(over_quota))
