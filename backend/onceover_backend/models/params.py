"""Types of the values callers send that reach the database (query and path
parameters, body fields)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime

# Each of these values reached the database and was a 500 there (found by
# tests/backend/test_schemathesis.py); validators narrow what is accepted to a 422
# without changing the OpenAPI schema.


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (0x00), which PostgreSQL text cannot hold")
    return value


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 and the like
        raise ValueError("out of range once converted to UTC") from None


Text = Annotated[str, AfterValidator(_no_nul)]
"""A string parameter compared with stored text."""
UTCTime = Annotated[AwareDatetime, AfterValidator(_in_utc)]
"""A time parameter: with a zone (stored times are UTC; a naive one is ambiguous), in UTC."""
