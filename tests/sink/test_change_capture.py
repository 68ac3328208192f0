"""Change data capture rows without Spark: the pseudo-columns found, sequence numbers
checked as BigQuery takes them and derived the same on every attempt, and the ledger's
base that numbers a batch alike in every task, retry and replay."""

from __future__ import annotations

import pyarrow as pa
import pytest
from onceover_jobs.sink.errors import ChangeRowsError
from onceover_jobs.sink.ledger.change_sequence import sequence_base, sequence_key
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.rows.change_capture import (
    ChangeCapture,
    check_sequence_number,
    pseudo_columns,
)
from onceover_jobs.sink.rows.change_rows import change_rows, derived_sequence_numbers


def test_the_pseudo_columns_are_found_whatever_their_case() -> None:
    assert pseudo_columns(["id", "_change_type", "v"]) == {"_CHANGE_TYPE": "_change_type"}
    assert pseudo_columns(["id", "_CHANGE_TYPE", "_Change_Sequence_Number"]) == {
        "_CHANGE_TYPE": "_CHANGE_TYPE",
        "_CHANGE_SEQUENCE_NUMBER": "_Change_Sequence_Number",
    }
    assert pseudo_columns(["id", "change_type"]) == {}


@pytest.mark.parametrize(
    "text", ["0", "A1", "ffffffffffffffff", "1/2/3/4", "FFFFFFFFFFFFFFFF/0/0/FFFFFFFFFFFFFFFF"]
)
def test_sequence_numbers_bigquery_takes_pass(text: str) -> None:
    """Beam's RowMutationInformation, after BigQuery: "each hexadecimal string separated
    into sections by forward slash ... up to four sections allowed ... each section is
    limited to 16 hexadecimal characters"."""
    assert check_sequence_number(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1/2/3/4/5", "5 sections"),
        ("12345678901234567", "more than 16 hex digits"),
        ("-1", "not hexadecimal"),
        ("12G", "not hexadecimal"),
        ("", "not hexadecimal"),
        ("1//2", "not hexadecimal"),
    ],
)
def test_sequence_numbers_bigquery_refuses_are_named(text: str, says: str) -> None:
    why = check_sequence_number(text)
    assert why is not None
    assert says in why


def _hex_sections(text: str) -> tuple[int, ...]:
    return tuple(int(section, 16) for section in text.split("/"))


def test_derived_numbers_order_rows_by_base_then_partition_then_place() -> None:
    first = derived_sequence_numbers(0x10, 3, 14, 3).to_pylist()
    assert first == ["10/3/E", "10/3/F", "10/3/10"]
    later_partition = derived_sequence_numbers(0x10, 4, 0, 1).to_pylist()
    later_batch = derived_sequence_numbers(0x11, 0, 0, 1).to_pylist()
    ordered = [*first, *later_partition, *later_batch]
    assert sorted(ordered, key=_hex_sections) == ordered  # as BigQuery compares them
    assert all(check_sequence_number(text) is None for text in ordered)


def _source(types: list[str | None], sequences: list[str | None] | None = None) -> pa.RecordBatch:
    columns = {"id": pa.array(range(len(types)), pa.int64()), "_change_type": pa.array(types)}
    if sequences is not None:
        columns["seq"] = pa.array(sequences, pa.string())
    return pa.RecordBatch.from_pydict(columns)


def test_a_changes_rows_carry_the_upper_cased_type_and_its_number() -> None:
    source = _source(["upsert", "DELETE"])
    converted = pa.RecordBatch.from_pydict({"id": source.column(0)})
    capture = ChangeCapture(key=("id",), change_type="_change_type", sequence_number=None)
    derived = derived_sequence_numbers(7, 1, 2, 2)
    rows = change_rows(source, converted, capture, derived=derived, where="p", start_row=2)
    assert rows.schema.names == ["id", "_CHANGE_TYPE", "_CHANGE_SEQUENCE_NUMBER"]
    assert rows.column(1).to_pylist() == ["UPSERT", "DELETE"]
    assert rows.column(2).to_pylist() == ["7/1/2", "7/1/3"]


@pytest.mark.parametrize(
    ("types", "sequences", "key", "says"),
    [
        (["UPSERT", "MERGE"], None, [1, 2], "_CHANGE_TYPE is MERGE at rows 11"),
        (["UPSERT", None], None, [1, 2], "_CHANGE_TYPE is None at rows 11"),
        (["UPSERT", "DELETE"], None, [1, None], "primary key column id is NULL at rows 11"),
        (["UPSERT", "DELETE"], ["1", "1/2/3/4/5"], [1, 2], "'1/2/3/4/5' at row 11: 5 sections"),
        (["UPSERT", "DELETE"], ["1", None], [1, 2], "_CHANGE_SEQUENCE_NUMBER is NULL at rows 11"),
    ],
)
def test_a_row_that_cannot_be_a_change_stops_the_write_naming_it(
    types: list[str | None], sequences: list[str | None] | None, key: list[int | None], says: str
) -> None:
    source = _source(types, sequences)
    converted = pa.RecordBatch.from_pydict({"id": pa.array(key, pa.int64())})
    capture = ChangeCapture(
        key=("id",), change_type="_change_type", sequence_number="seq" if sequences else None
    )
    derived = None if sequences else derived_sequence_numbers(1, 0, 10, 2)
    with pytest.raises(ChangeRowsError, match="Nothing of these rows was sent") as raised:
        change_rows(source, converted, capture, derived=derived, where="p", start_row=10)
    assert says in str(raised.value)


def test_a_batch_keeps_its_base_and_the_next_batch_outranks_it(ledger_root: str) -> None:
    """On each ledger store: the base is created once and read by every retry and replay;
    the next batch's is above it even from an executor whose clock is behind."""
    ledger = Ledger(ledger_root, "query-1", "p.d.t")
    first = sequence_base(ledger, 0)
    assert sequence_base(ledger, 0) == first  # a retried task, a replay
    # batch 0's base as a fast clock wrote it: batch 1's first task, with a slower one
    key = sequence_key(ledger, 0)
    found = ledger.store.read(key)
    assert found is not None
    ledger.store.put(key, found.data.replace(str(first).encode(), str(2**52).encode()))
    assert sequence_base(ledger, 1) == 2**52 + 1
    assert sequence_base(Ledger(ledger_root, "run-2", "p.d.t"), None) > first
