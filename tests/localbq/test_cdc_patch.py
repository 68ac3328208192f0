"""The ``change_data_capture`` and ``ddl_primary_keys`` patches, pinned by BigQuery's docs.

"Stream table updates with change data capture" (cloud.google.com/bigquery/docs/
change-data-capture): "the pseudocolumn ``_CHANGE_TYPE`` indicates the type of change to
be processed for each row ... only accepts the values ``UPSERT`` and ``DELETE``";
Prerequisites: "You must use the Storage Write API in the default stream", "You must use
the protobuf format as the ingestion format. The Apache Arrow format isn't supported",
"You must declare primary keys for the destination table". "Manage custom ordering":
``_CHANGE_SEQUENCE_NUMBER`` is "hexadecimal, separated into sections by a forward slash
``/``. Each section can be expressed in at most 16 hexadecimal characters, and up to four
sections are allowed", compared "as unsigned numeric values" section by section; "If two
``_CHANGE_SEQUENCE_NUMBER`` values are identical, then the record with the latest
BigQuery system ingestion time has precedence". Beam's ``RowMutationInformation.of(
MutationType, String)`` states the same format ("up to four sections allowed", "each
section is limited to 16 hexadecimal characters").

bqemulator 1.4.0 dropped the pseudo-columns and appended every change as one more row,
and refused ``PRIMARY KEY ... NOT ENFORCED`` in DDL (DuckDB's parse error). Every test
goes over REST and gRPC to the session's local BigQuery; the last two start a local
BigQuery process with every patch but these two and show those behaviours, so each
assertion above them is known to fail with the patches off (checked by hand on
2026-12-03 too: the module run with ``patches.PATCHES`` filtered of both, in a pytest
plugin, fails every test but those two).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from google.api_core import exceptions
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from onceover_tools.localbq import LocalBigQuery
from onceover_tools.localbq.admin import write_streams
from onceover_tools.localbq.patches.change_data_capture import sequence_number, wins
from onceover_tools.localbq.patches.row_errors import ROW_ERRORS_MESSAGE

from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from tests.helpers.writeapi import append_all, create_stream, table_path

COMMITTED = types.WriteStream.Type.COMMITTED
PENDING = types.WriteStream.Type.PENDING
BUFFERED = types.WriteStream.Type.BUFFERED
FIELDS_ERROR = types.RowError.RowErrorCode.FIELDS_ERROR
OK, INVALID_ARGUMENT = 0, 3

SCHEMA = [
    bigquery.SchemaField("ID", "INT64"),
    bigquery.SchemaField("Name", "STRING"),
    bigquery.SchemaField("Salary", "INT64"),
]
PSEUDO = ("_CHANGE_TYPE", "_CHANGE_SEQUENCE_NUMBER")
Row = dict[str, Any]


def keyed_table(rest: bigquery.Client, dataset: str, name: str = "employees") -> str:
    """The docs' example table, keyed by ID (``tableConstraints.primaryKey``)."""
    table = bigquery.Table(f"{dataset}.{name}", schema=SCHEMA)
    table._properties["tableConstraints"] = {"primaryKey": {"columns": ["ID"]}}
    rest.create_table(table)
    return f"{dataset}.{name}"


def proto_request(stream: str, rows: list[Row], *, columns: tuple[str, ...] = PSEUDO,
                  offset: int | None = None) -> types.AppendRowsRequest:  # fmt: skip
    """Proto rows of :data:`SCHEMA` plus ``columns`` (string pseudo-columns) in the
    writer schema: proto2 optional fields, a missing value an absent field."""
    descriptor = descriptor_pb2.DescriptorProto(name="Row")
    proto = descriptor_pb2.FieldDescriptorProto
    kinds = {"ID": proto.TYPE_INT64, "Salary": proto.TYPE_INT64}
    for number, name in enumerate(("ID", "Name", "Salary", *columns), start=1):
        descriptor.field.add(name=name, number=number, label=proto.LABEL_OPTIONAL,
                             type=kinds.get(name, proto.TYPE_STRING))  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto(name="row.proto", message_type=[descriptor]))
    row_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("Row"))
    serialized = [
        row_class(**{k: v for k, v in row.items() if v is not None}).SerializeToString()
        for row in rows
    ]
    fields: dict[str, Any] = {
        "write_stream": stream,
        "proto_rows": types.AppendRowsRequest.ProtoData(
            writer_schema=types.ProtoSchema(proto_descriptor=descriptor),
            rows=types.ProtoRows(serialized_rows=serialized),
        ),
    }
    if offset is not None:
        fields["offset"] = offset
    return types.AppendRowsRequest(**fields)


def arrow_request(stream: str, row: Row) -> types.AppendRowsRequest:
    """One Arrow row (``ID`` and ``Salary`` INT64, the rest STRING)."""
    kinds = {"ID": pa.int64(), "Salary": pa.int64()}
    schema = pa.schema([(name, kinds.get(name, pa.string())) for name in row])
    batch = pa.RecordBatch.from_pylist([row], schema=schema)
    arrow = types.AppendRowsRequest.ArrowData(
        writer_schema=types.ArrowSchema(serialized_schema=schema.serialize().to_pybytes()),
        rows=types.ArrowRecordBatch(serialized_record_batch=batch.serialize().to_pybytes()),
    )
    return types.AppendRowsRequest(write_stream=stream, arrow_rows=arrow)


def change(key: int, kind: str | None, name: str | None = None, salary: int | None = None,
           seq: str | None = None) -> Row:  # fmt: skip
    return {"ID": key, "Name": name, "Salary": salary, "_CHANGE_TYPE": kind,
            "_CHANGE_SEQUENCE_NUMBER": seq}  # fmt: skip


def default_stream(write: BigQueryWriteClient, table_id: str) -> str:
    return f"{table_path(write, table_id)}/streams/_default"


def send(write: BigQueryWriteClient, stream: str, *batches: list[Row],
         columns: tuple[str, ...] = PSEUDO) -> list[types.AppendRowsResponse]:  # fmt: skip
    """Each batch a request, all on one connection; every response."""
    return append_all(write, [proto_request(stream, rows, columns=columns) for rows in batches])


def plain_rows(write: BigQueryWriteClient, stream: str, rows: list[Row]) -> None:
    """Rows without pseudo-columns in the writer schema: a plain append."""
    (response,) = send(write, stream, rows, columns=())
    assert response.error.code == OK, response.error.message


def table_rows(rest: bigquery.Client, table_id: str) -> list[tuple[Any, ...]]:
    query = f"SELECT ID, Name, Salary FROM `{table_id}` ORDER BY ID, Name"
    return [tuple(row.values()) for row in rest.query_and_wait(query)]


def accepted(responses: list[types.AppendRowsResponse]) -> None:
    for response in responses:
        assert response.error.code == OK, response.error.message


# -- applying changes ---------------------------------------------------------------------


def test_the_documented_example_deletes_100_replaces_101_and_inserts_105(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """The docs' "Example with UPSERT and DELETE values": the table 100 Charlie 2000, 101
    Tal 3000, 102 Lee 5000 takes "100 DELETE, 101 Tal 8000 UPSERT, 105 Izumi 6000 UPSERT"
    and "The updated table is now" 101 Tal 8000, 102 Lee 5000, 105 Izumi 6000. The
    pseudo-columns "are not queryable columns": never in the table's schema."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    plain_rows(write, stream, [{"ID": 100, "Name": "Charlie", "Salary": 2000},
                               {"ID": 101, "Name": "Tal", "Salary": 3000},
                               {"ID": 102, "Name": "Lee", "Salary": 5000}])  # fmt: skip

    accepted(send(write, stream, [change(100, "DELETE"), change(101, "UPSERT", "Tal", 8000),
                                  change(105, "UPSERT", "Izumi", 6000)]))  # fmt: skip

    assert table_rows(rest, table_id) == [(101, "Tal", 8000), (102, "Lee", 5000),
                                          (105, "Izumi", 6000)]  # fmt: skip
    table = rest.get_table(table_id)
    assert [f.name for f in table.schema] == ["ID", "Name", "Salary"]
    assert table.num_rows == 3


def test_the_greater_sequence_number_wins_whatever_order_the_changes_arrive_in(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """BigQuery applies records "based on the larger ``_CHANGE_SEQUENCE_NUMBER``",
    comparing "the first section, then comparing the next section only if the previous
    sections were equal", "as unsigned numeric values", "both uppercase and lowercase":
    the docs' examples '7B' > '77', 'FFF/ABC' > 'FFF/B', 'ABC' > 'BA/FFFFFFFF',
    'FFF/ABC' > 'ABC', each sent newer first (one request each), so the older one
    arrives last and must not win."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    top = "FFFFFFFFFFFFFFFF/0/0/"  # four sections of up to 16 digits
    examples = [(1, "7b", "77"), (2, "FFF/ABC", "FFF/B"), (3, "ABC", "BA/FFFFFFFF"),
                (4, "FFF/ABC", "ABC"), (5, f"{top}1", f"{top}0")]  # fmt: skip
    batches = []
    for key, newer, older in examples:
        batches.append([change(key, "UPSERT", "newer", key, newer)])
        batches.append([change(key, "UPSERT", "older", key, older)])
    accepted(send(write, stream, *batches))
    # Later, the older ones in the other order on a connection of their own.
    accepted(send(write, stream, [change(k, "UPSERT", "older", k, o) for k, _, o in examples]))

    assert table_rows(rest, table_id) == [(k, "newer", k) for k, _, _ in examples]
    assert sequence_number("FFF/ABC") == (0xFFF, 0xABC)
    assert wins((0xABC,), (0xBA, 0xFFFFFFFF))
    assert not wins((0xABC,), (0xFFF, 0xABC))


def test_a_tie_goes_to_the_later_ingested_row_and_no_sequence_number_orders_by_ingestion(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "If two ``_CHANGE_SEQUENCE_NUMBER`` values are identical, then the record with the
    latest BigQuery system ingestion time has precedence"; without one, "the record most
    recently ingested with the latest timestamp takes precedence" (in one request too:
    rows are ingested in order)."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)

    accepted(send(write, stream,
                  [change(1, "UPSERT", "first", 1, "FFF"), change(1, "UPSERT", "second", 1, "fff")],
                  [change(1, "UPSERT", "third", 1, "FFF")],
                  [change(2, "UPSERT", "first", 2), change(2, "UPSERT", "second", 2)],
                  [change(2, "UPSERT", "third", 2)]))  # fmt: skip

    assert table_rows(rest, table_id) == [(1, "third", 1), (2, "third", 2)]


def test_an_older_upsert_arriving_after_a_newer_delete_does_not_bring_the_row_back(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "To apply CDC ``DELETE`` operations that arrive out of order, BigQuery maintains a
    delete retention window of two days" (Deleted data considerations): a deleted key
    keeps its DELETE's sequence number, so an older UPSERT loses; a newer one wins."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)

    accepted(send(write, stream, [change(7, "UPSERT", "v1", 1, "1")],
                  [change(7, "DELETE", seq="3")], [change(7, "UPSERT", "v2", 2, "2")]))  # fmt: skip
    assert table_rows(rest, table_id) == []
    accepted(send(write, stream, [change(7, "DELETE", seq="2")]))  # older: nothing to do
    accepted(send(write, stream, [change(7, "UPSERT", "v4", 4, "4")]))
    assert table_rows(rest, table_id) == [(7, "v4", 4)]


def test_an_upsert_replaces_the_whole_row_and_plain_appends_are_taken_as_before(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """An UPSERT "Either inserts or replaces an existing row" (Beam's MutationType): a
    column it leaves out is NULL afterwards. Keys are not enforced ("BigQuery CDC
    ingestion doesn't perform key enforcement"): plain appends (no ``_CHANGE_TYPE`` in the
    writer schema) take a key twice, Arrow or proto, and a later UPSERT replaces both."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    plain_rows(write, stream, [{"ID": 1, "Name": "a", "Salary": 10},
                               {"ID": 1, "Name": "b", "Salary": 20}])  # fmt: skip
    accepted(append_all(write, [arrow_request(stream, {"ID": 1, "Name": "c", "Salary": 30})]))
    assert table_rows(rest, table_id) == [(1, "a", 10), (1, "b", 20), (1, "c", 30)]

    accepted(send(write, stream, [change(1, "UPSERT", "d")]))

    assert table_rows(rest, table_id) == [(1, "d", None)]


# -- refusals -----------------------------------------------------------------------------


def test_change_rows_on_a_table_without_a_primary_key_are_refused(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "You must declare primary keys for the destination table": refused in the
    stream, INVALID_ARGUMENT, with the wording users report from BigQuery ("The given
    value is not a valid CHANGE_TYPE in insert mode: UPSERT"); nothing applied; the
    connection stays open for a plain append."""
    table_id = f"{dataset}.unkeyed"
    rest.create_table(bigquery.Table(table_id, schema=SCHEMA))
    stream = default_stream(write, table_id)

    refused, plain = append_all(write, [
        proto_request(stream, [change(1, "UPSERT", "a", 1)]),
        proto_request(stream, [{"ID": 2, "Name": "b", "Salary": 2}], columns=()),
    ])  # fmt: skip

    assert refused.error.code == INVALID_ARGUMENT
    assert "not a valid CHANGE_TYPE in insert mode: UPSERT" in refused.error.message
    assert "has no primary key" in refused.error.message
    assert plain.error.code == OK
    assert table_rows(rest, table_id) == [(2, "b", 2)]


@pytest.mark.parametrize("kind", [COMMITTED, PENDING, BUFFERED], ids=["committed", "pending",
                                                                     "buffered"])  # fmt: skip
def test_change_rows_on_a_stream_other_than_default_are_refused(
    local_bigquery: LocalBigQuery, rest: bigquery.Client, write: BigQueryWriteClient,
    dataset: str, kind: int,
) -> None:  # fmt: skip
    """ "You must use the Storage Write API in the default stream": an application
    stream refuses them, INVALID_ARGUMENT; its offset does not move, no row taken."""
    table_id = keyed_table(rest, dataset)
    stream = create_stream(write, table_id, kind).name

    (refused,) = append_all(write, [proto_request(stream, [change(1, "UPSERT", "a", 1)],
                                                  offset=0)])  # fmt: skip

    assert refused.error.code == INVALID_ARGUMENT
    assert "not a valid CHANGE_TYPE in insert mode: UPSERT" in refused.error.message
    assert "_default stream only" in refused.error.message
    streams = {s["name"]: (s["nextOffset"], s["rowCount"])
               for s in write_streams(local_bigquery.rest_url, table_id)}  # fmt: skip
    assert streams[stream] == (0, 0)
    assert table_rows(rest, table_id) == []


def test_arrow_rows_with_a_change_type_are_refused(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "You must use the protobuf format as the ingestion format. The Apache Arrow format
    isn't supported": INVALID_ARGUMENT in the stream, nothing applied."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    request = arrow_request(stream, {"ID": 1, "Name": "a", "Salary": 1, "_CHANGE_TYPE": "UPSERT"})

    (refused,) = append_all(write, [request])

    assert refused.error.code == INVALID_ARGUMENT
    assert "The Apache Arrow format isn't supported" in refused.error.message
    assert table_rows(rest, table_id) == []


def test_a_change_type_other_than_upsert_or_delete_refuses_the_request_with_row_errors(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "The pseudocolumn ``_CHANGE_TYPE`` only accepts the values ``UPSERT`` and
    ``DELETE``"; rows with "``INSERT`` or unspecified values" give "The given value is not
    a valid CHANGE_TYPE". The request is refused whole, a row error per bad row; the
    good row of it is not applied either; the connection stays open."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    rows = [change(1, "UPSERT", "a", 1), change(2, "INSERT", "b", 2), change(3, "upsert", "c"),
            change(4, None, "d"), change(5, "")]  # fmt: skip

    later = proto_request(stream, [change(6, "UPSERT", "f", 6)])
    refused, taken = append_all(write, [proto_request(stream, rows), later])

    assert refused.error.code == INVALID_ARGUMENT
    assert refused.error.message == ROW_ERRORS_MESSAGE.format(stream=stream)
    invalid = "Field _CHANGE_TYPE: The given value is not a valid CHANGE_TYPE: "
    assert [(e.index, e.code, e.message) for e in refused.row_errors] == [
        (1, FIELDS_ERROR, f"{invalid}'INSERT'"),
        (2, FIELDS_ERROR, f"{invalid}'upsert'"),
        (3, FIELDS_ERROR, f"{invalid}None"),
        (4, FIELDS_ERROR, f"{invalid}''"),
    ]
    assert taken.error.code == OK
    assert table_rows(rest, table_id) == [(6, "f", 6)]


def test_a_malformed_sequence_number_refuses_the_request_with_row_errors(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """ "Each section can be expressed in at most 16 hexadecimal characters, and up to
    four sections are allowed": a non-hex digit, a fifth section, a 17-digit section or
    an empty section refuses the request whole, nothing applied."""
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    bad = ["12G", "1/2/3/4/5", "1" * 17, "1//2", "-1"]
    rows = [change(0, "UPSERT", "ok", 0, "F" * 16 + "/0/0/" + "f" * 16)]
    rows += [change(i, "UPSERT", "bad", i, seq) for i, seq in enumerate(bad, start=1)]

    (refused,) = send(write, stream, rows)

    assert refused.error.code == INVALID_ARGUMENT
    assert [(e.index, e.message.split(":")[0]) for e in refused.row_errors] == [
        (i, "Field _CHANGE_SEQUENCE_NUMBER") for i in range(1, len(bad) + 1)
    ]
    assert f"{bad[1]!r} is not a valid change sequence number" in refused.row_errors[1].message
    assert table_rows(rest, table_id) == []


def test_mutating_dml_on_a_table_with_active_cdc_is_refused(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """Limitations: "Tables with active CDC don't support ... Mutating data manipulation
    language (DML) statements such as ``DELETE``, ``UPDATE``, and ``MERGE``"; a query
    (and DML on another table) runs."""
    table_id = keyed_table(rest, dataset)
    other = keyed_table(rest, dataset, "other")
    accepted(send(write, default_stream(write, table_id), [change(1, "UPSERT", "a", 1)]))

    for statement in (f"UPDATE `{table_id}` SET Salary = 2 WHERE ID = 1",
                      f"DELETE FROM `{table_id}` WHERE ID = 1"):  # fmt: skip
        with pytest.raises(exceptions.BadRequest, match="active change data capture"):
            rest.query(statement).result()
    rest.query_and_wait(f"DELETE FROM `{other}` WHERE TRUE")
    assert table_rows(rest, table_id) == [(1, "a", 1)]


def test_a_table_made_again_under_the_same_name_starts_afresh(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """What is kept per key belongs to the table, not to its name: a table deleted and
    made again takes any change of a key and mutating DML."""
    table_id = keyed_table(rest, dataset)
    accepted(send(write, default_stream(write, table_id), [change(1, "DELETE", seq="FF")]))
    rest.delete_table(table_id)
    keyed_table(rest, dataset)

    rest.query(f"DELETE FROM `{table_id}` WHERE ID = 2").result()  # no CDC on this one yet
    stream = default_stream(write, table_id)
    accepted(
        send(write, stream, [change(1, "UPSERT", "a", 1, "1"), change(1, "UPSERT", "b", 2, "2")])
    )
    assert table_rows(rest, table_id) == [(1, "b", 2)]  # older than the first table's DELETE


# -- primary keys by DDL ------------------------------------------------------------------


def primary_key(rest: bigquery.Client, table_id: str) -> list[str] | None:
    constraints = rest.get_table(table_id).table_constraints
    if constraints is None or constraints.primary_key is None:
        return None
    return list(constraints.primary_key.columns)


def test_a_primary_key_declared_by_ddl_is_kept_and_answered(
    rest: bigquery.Client, write: BigQueryWriteClient, dataset: str
) -> None:
    """GoogleSQL DDL: ``PRIMARY KEY (column_list) NOT ENFORCED`` as a table constraint or
    a column's ``PRIMARY KEY NOT ENFORCED`` in ``CREATE TABLE`` (the CDC page's own
    "CREATE TABLE employees (id INT64 PRIMARY KEY NOT ENFORCED, name STRING)"), and
    ``ALTER TABLE ... ADD PRIMARY KEY (...) NOT ENFORCED``: the table is made with its
    columns and ``tables.get`` answers the key; CDC rows then apply by it."""
    rest.query_and_wait(f"CREATE TABLE `{dataset}.a` (ID INT64, Name STRING, Salary INT64, "
                        "PRIMARY KEY (ID) NOT ENFORCED)")  # fmt: skip
    rest.query_and_wait(f"CREATE TABLE `{dataset}.b` (\n  id INT64 PRIMARY KEY NOT ENFORCED,\n"
                        "  name STRING)\n  CLUSTER BY id")  # fmt: skip
    rest.query_and_wait(f"CREATE TABLE `{dataset}.c` (id INT64, r STRING, v STRING)")
    assert primary_key(rest, f"{dataset}.c") is None
    rest.query_and_wait(f"ALTER TABLE `{dataset}.c` ADD PRIMARY KEY (id, r) NOT ENFORCED")

    assert [f.name for f in rest.get_table(f"{dataset}.a").schema] == ["ID", "Name", "Salary"]
    assert primary_key(rest, f"{dataset}.a") == ["ID"]
    assert [f.name for f in rest.get_table(f"{dataset}.b").schema] == ["id", "name"]
    assert primary_key(rest, f"{dataset}.b") == ["id"]
    assert primary_key(rest, f"{dataset}.c") == ["id", "r"]
    with pytest.raises(exceptions.BadRequest, match="already has a primary key"):
        rest.query(f"ALTER TABLE `{dataset}.c` ADD PRIMARY KEY (id) NOT ENFORCED").result()
    rest.query_and_wait(f"ALTER TABLE `{dataset}.c` DROP PRIMARY KEY")
    assert primary_key(rest, f"{dataset}.c") is None

    stream = default_stream(write, f"{dataset}.a")
    accepted(send(write, stream, [change(1, "UPSERT", "a", 1)], [change(1, "UPSERT", "b", 2)]))
    assert table_rows(rest, f"{dataset}.a") == [(1, "b", 2)]


# -- without the patches ------------------------------------------------------------------

_WITHOUT = """
import json, sys
from onceover_tools.localbq import LocalBigQuery, patches
patches.PATCHES = tuple(p for p in patches.PATCHES
                        if patches.name_of(p) not in {"change_data_capture", "ddl_primary_keys"})
with LocalBigQuery() as bq:
    ready = {"rest": bq.rest_url, "grpc": bq.grpc_endpoint, "project": bq.options.project}
    print(json.dumps(ready), flush=True)
    sys.stdin.read()  # until the test closes it
"""


@pytest.fixture(scope="module")
def without_patches() -> Iterator[BigQueryConfig]:
    """A local BigQuery process with every launcher patch but these two."""
    with subprocess.Popen([sys.executable, "-c", _WITHOUT], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as child:  # fmt: skip
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            ready = json.loads(child.stdout.readline())
            yield BigQueryConfig(rest_endpoint=ready["rest"], grpc_endpoint=ready["grpc"],
                                 project=ready["project"])  # fmt: skip
        finally:
            child.stdin.close()  # the child's cue to stop
            child.wait(timeout=30)


def test_without_the_patch_every_change_is_one_more_row(without_patches: BigQueryConfig) -> None:
    """The docs' example again: bqemulator drops the pseudo-columns and appends the three
    changes as rows (100 stays, 101 twice, a DELETE row of NULLs), and takes a
    ``_CHANGE_TYPE`` on a COMMITTED stream as plain rows."""
    rest, write = bigquery_client(without_patches), write_client(without_patches)
    dataset = f"{rest.project}.bare"
    rest.create_dataset(dataset)
    table_id = keyed_table(rest, dataset)
    stream = default_stream(write, table_id)
    plain_rows(write, stream, [{"ID": 100, "Name": "Charlie", "Salary": 2000},
                               {"ID": 101, "Name": "Tal", "Salary": 3000},
                               {"ID": 102, "Name": "Lee", "Salary": 5000}])  # fmt: skip

    accepted(send(write, stream, [change(100, "DELETE"), change(101, "UPSERT", "Tal", 8000),
                                  change(105, "UPSERT", "Izumi", 6000)]))  # fmt: skip

    assert table_rows(rest, table_id) == [
        (100, None, None), (100, "Charlie", 2000), (101, "Tal", 3000), (101, "Tal", 8000),
        (102, "Lee", 5000), (105, "Izumi", 6000),
    ]  # fmt: skip
    committed = create_stream(write, table_id, COMMITTED).name
    (taken,) = append_all(write, [proto_request(committed, [change(9, "UPSERT")], offset=0)])
    assert taken.error.code == OK


def test_without_the_patch_ddl_primary_keys_fail_to_parse(without_patches: BigQueryConfig) -> None:
    """What bqemulator did with the DDL forms (measured on 2026-12-03): DuckDB's parser
    refuses ``NOT ENFORCED``; the job fails and no table is made."""
    rest = bigquery_client(without_patches)
    dataset = f"{rest.project}.bare_ddl"
    rest.create_dataset(dataset)
    with pytest.raises(exceptions.BadRequest, match="ENFORCED"):
        rest.query(f"CREATE TABLE `{dataset}.a` (id INT64, PRIMARY KEY (id) NOT ENFORCED)").result()
    with pytest.raises(exceptions.NotFound):
        rest.get_table(f"{dataset}.a")
    rest.query_and_wait(f"CREATE TABLE `{dataset}.c` (id INT64)")
    with pytest.raises(exceptions.BadRequest, match="ENFORCED"):
        rest.query(f"ALTER TABLE `{dataset}.c` ADD PRIMARY KEY (id) NOT ENFORCED").result()
