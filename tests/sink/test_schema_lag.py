"""BigQuery's refusal of a writer schema it has not caught up with, read as such only
for the table's own columns (onceover_jobs.sink.wire.schema_lag)."""

from __future__ import annotations

from onceover_jobs.sink.wire.schema_lag import INVALID_ARGUMENT, SchemaCatchUp, extra_fields

REFUSED = (
    "Input schema has more fields than BigQuery schema, extra fields: 'note,Buyer' Entity: "
    "projects/p/datasets/d/tables/t/streams/s"
)


def test_the_refusal_names_its_fields_and_nothing_else_is_read_as_one() -> None:
    assert extra_fields(INVALID_ARGUMENT, REFUSED) == ["note", "Buyer"]
    assert extra_fields(INVALID_ARGUMENT, "Field note: STRING(5) has a value too long") is None
    assert extra_fields(9, REFUSED) is None  # FAILED_PRECONDITION: not this refusal


def test_only_columns_the_table_has_are_waited_for() -> None:
    catch_up = SchemaCatchUp.of(["event_id", "note", "buyer", "address.zip"])
    assert catch_up.lagging(INVALID_ARGUMENT, REFUSED) == ["note", "Buyer"]
    assert SchemaCatchUp.of(["event_id", "note"]).lagging(INVALID_ARGUMENT, REFUSED) is None
