"""Whether BigQuery refused an append for its Arrow format, not for its rows or caller.

Arrow ingestion (``arrow_rows``) has been generally available since 2025-10-27, but Google's
Python client called it "experimental ... only selected for allowlisted customers" until
2.33, and a project, an endpoint or an organisation policy may still refuse it. BigQuery
documents no answer for that; a refusal of the format can only be told by what it says:
INVALID_ARGUMENT, FAILED_PRECONDITION or PERMISSION_DENIED naming Arrow (or an allowlist),
or UNIMPLEMENTED, which a server answers for a part of a request it does not implement.
A refusal for a row, a schema or a caller names none of these.
"""

from __future__ import annotations

_FORMAT_CODES = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "PERMISSION_DENIED"})
_FORMAT_WORDS = ("arrow", "allowlist")


def refused_for_arrow(grpc_code: str, message: str) -> bool:
    """Whether a refusal (``grpc_code`` by name) of an Arrow append is about the format."""
    if grpc_code == "UNIMPLEMENTED":
        return True
    lowered = message.lower()
    return grpc_code in _FORMAT_CODES and any(word in lowered for word in _FORMAT_WORDS)
