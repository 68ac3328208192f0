"""One page of a query's rows, with the count of all of them."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlmodel import Session, func, select
from sqlmodel.sql.expression import SelectOfScalar

Row = TypeVar("Row")

# The largest OFFSET both databases take (a signed 64-bit integer): the API allows any
# offset >= 0, and a larger one was a 500 (found by tests/backend/test_schemathesis.py).
# No table holds that many rows, so the page is empty either way.
MAX_OFFSET = 2**63 - 1


def page(
    session: Session, query: SelectOfScalar[Row], order_by: list[Any], *, limit: int, offset: int
) -> tuple[list[Row], int]:
    """Rows ``offset`` to ``offset + limit`` of ``query`` in ``order_by``, and the total."""
    count = session.exec(select(func.count()).select_from(query.subquery())).one()
    rows = session.exec(query.order_by(*order_by).offset(min(offset, MAX_OFFSET)).limit(limit))
    return list(rows), int(count)
