"""The soak's load: rows a second, fields, bytes per field, minutes.

Beam's Storage Write load test (``BigQueryStreamingLT``) names four shapes; a soak
takes one by name and may change any of its figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Shape:
    name: str
    rows_per_second: int
    fields: int
    bytes_per_field: int
    minutes: float

    @property
    def rows(self) -> int:
        """The rows the source makes in the soak's time (Beam's ``totalRows``)."""
        return round(self.rows_per_second * self.minutes * 60)

    @property
    def row_bytes(self) -> int:
        return self.fields * self.bytes_per_field

    def describe(self) -> str:
        size = self.rows * self.row_bytes
        amount = f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
        return (
            f"{self.name}: {self.rows_per_second:,} rows/s of {self.fields} fields x "
            f"{self.bytes_per_field} bytes for {self.minutes:g} min ({self.rows:,} rows, "
            f"{amount} of fields)"
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "rows": self.rows, "row_bytes": self.row_bytes}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Shape:
        """A shape as :meth:`to_json` wrote it (its derived figures left out)."""
        return cls(**{f.name: doc[f.name] for f in fields(cls)})


BEAM_SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape("local", 1_000, 2, 5, 5),
        Shape("small", 1_000, 5, 10, 10),
        Shape("medium", 5_000, 10, 20, 20),
        Shape("large", 10_000, 20, 50, 30),
    )
}
"""``BigQueryStreamingLT``'s ``TEST_CONFIGS``: (minutes, bytes per field, fields, rows a
second); ``large`` is its 18,000,000 rows of 1,000 bytes at 10,000 rows a second."""


def shape_of(
    name: str,
    *,
    rows_per_second: int | None = None,
    fields: int | None = None,
    bytes_per_field: int | None = None,
    minutes: float | None = None,
) -> Shape:
    """Beam's shape ``name`` with any figure given instead; a shape with one changed is
    named ``custom`` (from ``name``)."""
    if name not in BEAM_SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {', '.join(BEAM_SHAPES)}")
    base = BEAM_SHAPES[name]
    shape = Shape(
        name=base.name,
        rows_per_second=base.rows_per_second if rows_per_second is None else rows_per_second,
        fields=base.fields if fields is None else fields,
        bytes_per_field=base.bytes_per_field if bytes_per_field is None else bytes_per_field,
        minutes=base.minutes if minutes is None else minutes,
    )
    return base if shape == base else replace(shape, name=f"custom (from {name})")
