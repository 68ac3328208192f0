"""The patches that make bqemulator 1.4.0 behave like BigQuery where Onceover relies on it.

This module (with the rest of :mod:`onceover_tools.localbq`) is the only code in the
project that knows bqemulator's internals. Each patch is small, named, states the
documented BigQuery behaviour it restores, and is pinned by a test in
``tests/localbq/test_patches.py`` that checks that behaviour over the real REST and
gRPC endpoints. :func:`install` applies them all, once per process; it refuses to
run against any bqemulator other than :data:`PINNED_VERSION` because every patch
wraps a private function whose shape may change in another release.

``optional_spatial``
    bqemulator runs ``INSTALL spatial`` at start-up, a download; offline the server
    does not start. The patch only ``LOAD``s the extension when it is already
    installed and otherwise logs and goes on: GEOGRAPHY is unavailable, nothing
    else changes. It also turns off DuckDB's automatic extension download so that
    nothing downloads at run time.

``no_snapshot_per_write``
    Every successful write copied the whole target table into a time-travel
    snapshot (``CREATE TABLE ... AS SELECT *``), making appends O(table size) and
    memory grow without bound. BigQuery's appends do not depend on table size. The
    patch keeps the part of ``SnapshotManager.record_change`` that matters (the
    ``TableDataChanged`` event that invalidates the query cache and marks
    materialized views stale) and drops the copy. ``FOR SYSTEM_TIME AS OF`` then
    reads the live table; Onceover does not use time travel.
    Measured by ``python -m onceover_tools.bench.localbq_snapshot`` on 2026-11-21 (2 vCPU,
    in process, arrow rows, 3 columns; the table loaded with ten 100k-row appends
    to a COMMITTED stream, then five 10,000-row appends at 1,000,000 rows)::

        figure                       before (snapshot)   after   before/after
        10k-row append, median       86.8 ms             10.2 ms 8.5x
        RSS growth over the run      577 MB              210 MB  2.8x

``stream_times``
    ``GetWriteStream`` reported ``create_time`` = now and never ``commit_time``.
    BigQuery (``WriteStream`` reference): ``create_time`` is when the stream was
    created (for ``_default``, the table's creation time); ``commit_time`` is set
    once a PENDING stream is committed and equals ``create_time`` for COMMITTED
    streams; empty ``commit_time`` on a PENDING stream means not committed. The
    sink's ledger uses ``commit_time`` to resolve an intent after a crash.

``stream_already_committed``
    ``BatchCommitWriteStreams`` on a stream that is already committed answered
    ``INVALID_STREAM_STATE``; BigQuery answers ``STREAM_ALREADY_COMMITTED``
    (``StorageError.StorageErrorCode``), which the sink reads as "this commit
    already happened".

``sticky_write_stream``
    bqemulator looked up the stream of every AppendRows request by its
    ``write_stream`` field and failed with "Stream not found" when it was empty.
    BigQuery (``AppendRowsRequest.write_stream``) requires the field only in the
    first request of a connection; later requests without it go to the same
    stream. The official ``AppendRowsStream`` sends exactly that.

``record_columns``
    AppendRows on a table with a RECORD column failed ("STRUCT with no fields")
    for Arrow and proto rows alike: bqemulator built the append's target Arrow
    schema from the table's columns without their member fields. BigQuery
    (``AppendRowsRequest.ArrowData``, ``ProtoData``) takes a RECORD column as an
    Arrow struct or a nested proto message, and a REPEATED RECORD as a
    ``list<struct>`` or a repeated nested message. The patch builds the target
    schema from the table's REST schema (``tables.get``), members included.

``linear_column_alignment``
    bqemulator lined an Arrow append's columns up with the table's by looking each
    table column up in a list of the batch's column names built anew for every
    lookup: quadratic in the columns. One row appended to a 10,000-column table took
    54 s of CPU (measured on 2026-11-21, 2 vCPU); 100 columns take milliseconds.
    BigQuery takes tables of up to 10,000 columns ("Quotas and limits": maximum
    columns in a table) at no such cost. The patch finds each column through a dict
    built once per append; the table it returns is the same (the table's column
    order and types, a missing column NULL, an extra one dropped, a name the batch
    holds twice failing as before).

``wide_proto_rows``
    bqemulator decoded proto rows through a message class the protobuf runtime (upb)
    builds from the writer schema, and upb builds no message whose fields take over
    65,535 bytes in memory (16 a STRING field): a writer schema of more than about
    4,000 STRING columns failed at the connection's first request ("Error building
    mini table: Message size exceeded maximum size of 65535 bytes") and the call
    ended with UNKNOWN. BigQuery takes the proto writer schema of any table it holds,
    up to its 10,000 columns. When the schema cannot be built whole, the patch builds
    it in parts of at most :data:`PROTO_FIELDS_PER_PART` top-level fields (each with
    every nested type), parses each row with every part (the other parts' fields pass
    as unknown fields) and joins the values: the dict bqemulator's decoder gives for a
    schema it can build. Schemas it can build are decoded as before.

``append_rows_pool``
    bqemulator's handlers are synchronous and run on grpc.aio's migration thread
    pool, whose default size is ``min(32, cpus + 4)``: on 2 cores only 6
    AppendRows connections are served and the 7th stalls silently. BigQuery serves
    many concurrent connections per project. The patch gives the gRPC server a pool
    of :data:`APPEND_ROWS_WORKERS` threads (each open AppendRows connection holds one).

``one_duckdb_user_at_a_time``
    bqemulator shares one DuckDB connection between the REST server's event loop
    and the gRPC threads, and uses it from both at once (queries take no lock;
    only writes to the same table do). A DuckDB connection is not thread-safe: a
    query over REST while another table took an append over gRPC deadlocked the
    whole server (seen in chaos sessions with parallel lanes: every REST and gRPC
    call then hung). BigQuery serves queries and appends concurrently. The patch
    takes one process-wide lock around each use of the connection: ``execute``,
    ``fetch_arrow`` (the query and its fetch), an append's insert, a load's insert.
``keep_host_logging``
    At start bqemulator calls ``logging.basicConfig(force=True)``, replacing the
    handlers of whatever process embeds it (pytest, ``onceover up``). The patch
    restores the host's root logger after bqemulator configured structlog, so its
    lines go through the host's handlers at the host's levels.

The next five enforce Storage Write API limits bqemulator lacks; the last two,
``buffered_flush`` and ``row_errors``, take one setting each from the same place. Their
values live in
:mod:`onceover_tools.localbq.limits` (``WRITE_API_LIMITS``, BigQuery's defaults), are read
on every call, shortened by tests with ``limits.limited(...)`` and set for a separately
launched local BigQuery by ``ONCEOVER_LOCALBQ_<FIELD>`` variables, read at install.

``create_stream_quota``
    bqemulator created any number of streams. BigQuery ("Storage Write API quotas
    and limits": *CreateWriteStream requests*) lets a project create 10,000 streams
    per hour per region; over it CreateWriteStream fails with RESOURCE_EXHAUSTED
    ("Exceeds 'CreateWriteStream requests' quota, user_id: ... Entity: <table>").
    The ``_default`` stream is never created, so never counted. The patch counts
    each CreateWriteStream call a project makes over a rolling window
    (``create_streams_per_window`` per ``create_window_s``; refused calls are not
    counted) and refuses the next one with RESOURCE_EXHAUSTED: "Exceeds quota
    limit 'CreateWriteStream requests' of 10000 streams per hour per project per
    region, user_id: <project> (status: INSUFFICIENT_TOKENS) ... Entity: <table>".
    ``limits.create_stream_calls(project)`` reads the count.
    The client library retries RESOURCE_EXHAUSTED on CreateWriteStream for up to
    20 minutes by default.

``commit_stream_limit``
    bqemulator committed any number of streams at once. BigQuery ("Storage Write
    API quotas and limits": streams per ``BatchCommitWriteStreams``) commits at
    most 10,000 streams in one call. The patch refuses a call naming more than
    ``commit_max_streams`` with INVALID_ARGUMENT before looking at any stream:
    nothing is committed.

``stream_lifetimes``
    bqemulator's streams never expired. In BigQuery a PENDING stream that is not
    committed within 24 hours of its creation is deleted, and so is a COMMITTED
    stream that has had no append for 3 days (a BUFFERED one: 7 days); whoever
    uses it afterwards is told it does not exist. The patch notes when each
    stream is created and last appended to (a successful append) and deletes it
    from bqemulator's stream manager the first time it is looked up after
    ``pending_lifetime_s`` (not committed) or ``committed_idle_s`` /
    ``buffered_idle_s`` (idle): GetWriteStream, FinalizeWriteStream, FlushRows and
    a new AppendRows connection then answer NOT_FOUND, BatchCommitWriteStreams
    lists it with ``STREAM_NOT_FOUND`` and commits nothing, and an AppendRows
    connection already open on it answers each request with an in-stream
    NOT_FOUND. Rows a COMMITTED stream appended stay in the table; a committed
    PENDING stream is kept (its ``commit_time`` is how a writer learns the commit
    happened); ``_default`` never expires.

``append_request_limit``
    bqemulator refused an ``AppendRowsRequest`` over 10 MiB (its
    ``write_api_max_request_bytes``) in the stream with RESOURCE_EXHAUSTED, and its
    gRPC server, sized from that cap plus 1 MiB, ended the connection on a request
    over ~11 MB. BigQuery (``AppendRowsRequest`` reference, storage.proto as of
    google-cloud-bigquery-storage 2.43: "The size of a single AppendRowsRequest must
    be less than 20 MB in size. Requests larger than this return an error, typically
    ``INVALID_ARGUMENT``") takes requests up to 20 MB. "20 MB" is read as 20,000,000
    bytes, the smaller reading: Google's Java client refuses a request over
    ``ConnectionWorker.getApiMaxRequestBytes()`` = ``20L * 1000L * 1000L`` ("20
    megabytes") before sending it, while BigQuery itself has reported its cap in
    binary units ("AppendRows request too large: 11854265 limit 10485760 Entity:
    <stream>" when the documented limit was 10 MB; hafenkran/duckdb-bigquery#134). The
    patch lifts bqemulator's own cap and its gRPC message caps to
    ``limits.APPEND_REQUEST_CEILING_BYTES`` (64 MiB) and answers each request over
    ``append_request_max_bytes`` (read per request; a request of exactly the limit is
    taken, as the Java client's check lets it through) in the stream with
    INVALID_ARGUMENT "AppendRows request too large: <size> limit <limit> Entity:
    <stream>" (BigQuery's wording in that report), without reading it and with no
    ``StorageError``; the connection stays open and takes the next request, and the
    refused request takes no offset. Past the ceiling bqemulator answers as before.

``storage_error_details``
    bqemulator's errors carried no ``StorageError``. BigQuery (``storage.proto``:
    ``StorageError``, "structured custom BigQuery Storage error message ...
    attached as error details in the returned rpc Status") puts one, Any-packed,
    in the ``details`` of the ``google.rpc.Status``: in-stream in
    ``AppendRowsResponse.error`` (the patch: ALREADY_EXISTS ->
    ``OFFSET_ALREADY_EXISTS``, OUT_OF_RANGE -> ``OFFSET_OUT_OF_RANGE``,
    FAILED_PRECONDITION -> ``STREAM_FINALIZED``, NOT_FOUND -> ``STREAM_NOT_FOUND``),
    and for an RPC that fails in gRPC's ``grpc-status-details-bin`` trailer (the
    patch: NOT_FOUND of GetWriteStream, FinalizeWriteStream, FlushRows and an
    AppendRows connection -> ``STREAM_NOT_FOUND``, or ``TABLE_NOT_FOUND`` when the
    table is what is missing, as for CreateWriteStream; finalizing ``_default`` or
    flushing a stream that is not BUFFERED -> ``INVALID_STREAM_TYPE``; finalizing a
    committed stream -> ``STREAM_ALREADY_COMMITTED``; flushing past the end ->
    ``OFFSET_OUT_OF_RANGE``, an offset already flushed (``buffered_flush``) ->
    ``OFFSET_ALREADY_EXISTS``, a closed stream -> ``STREAM_FINALIZED``). The entity
    is the stream (the table for ``TABLE_NOT_FOUND``), the message the call's own.
    It wraps the one function that builds in-stream errors (``_error_response``)
    and each unary handler's answer after it set its status code.

``buffered_flush``
    bqemulator's FlushRows took its offset as an exclusive bound (flushing offset N
    made rows 0..N-1 visible), answered a flush to an offset already flushed with
    OUT_OF_RANGE, and never emptied a BUFFERED stream's buffer: each flush joined
    every row the stream had ever taken, so a long-lived stream's memory and flush
    time grew with its history. BigQuery (``storage.proto``: ``FlushRowsRequest.offset``,
    "Ending offset of the flush operation. Rows before this offset(including this
    offset) will be flushed."; ``FlushRowsResponse.offset``, "The rows before this
    offset (including this offset) are flushed.") flushes rows 0..N and answers N; an
    offset past the last appended row answers OUT_OF_RANGE "Offset N is beyond the end
    of the stream Entity: <stream>" with ``OFFSET_OUT_OF_RANGE``. The patch answers so,
    and a flush to an offset already flushed (the last flushed offset included), whose
    answer BigQuery does not document, as ``repeated_flush`` says: ``"already_exists"``
    (the default) ALREADY_EXISTS "Offset N is already flushed: the stream is flushed up
    to offset M Entity: <stream>" with ``OFFSET_ALREADY_EXISTS``, which Apache Beam's
    ``StorageApiFlushAndFinalizeDoFn`` reads as "already flushed up to this point" and
    does not retry; ``"ok"``, OK with offset N. Either way nothing is flushed again. A
    negative offset answers OUT_OF_RANGE ("before the start of the stream"). Flushed
    rows leave the buffer once they are in the table (a failed insert flushes and drops
    nothing), so the local BigQuery holds only rows not yet flushed and a flush costs
    the rows it flushes; a flush ending inside one append keeps the rest of it as a
    slice of that append's memory, freed when its last row is flushed. The flush holds
    the stream's lock, as an append does. An unknown or expired stream (NOT_FOUND), one
    that is not BUFFERED (INVALID_ARGUMENT), a finalized one (OUT_OF_RANGE, "Cannot
    flush stream in FINALIZED state") and a request without an offset (bqemulator
    fails it with UNKNOWN) are answered by bqemulator as before.

``row_errors``
    bqemulator dropped ``maxLength``, ``precision``, ``scale`` and ``roundingMode`` from
    a schema given to tables.insert (kept ``mode``; measured on 2026-11-25: tables.get
    and the catalog had none of them) and appended every row unchecked: 7 characters in
    a STRING(5) column, 12345.67 in a NUMERIC(5, 2) column, NULL in a REQUIRED column
    were all stored; a NULL in a RECORD's REQUIRED member failed the whole request with
    pyarrow's cast error and no ``row_errors``. BigQuery enforces a column's rules when
    a value is written to it (see :mod:`onceover_tools.localbq.row_rules`) and
    (``storage.proto``, ``AppendRowsResponse.row_errors``) "If a request failed due to
    corrupted rows, no rows in the batch will be appended. The API will return row
    level error info, so that the caller can remove the bad rows and retry the
    request." The patch keeps the four members (tables.insert / update / patch and a
    load job's explicit schema; tables.get answers them, int64s as strings; a member
    is kept only on the types it is documented for), lines appends up with an Arrow
    schema that allows NULL everywhere (REQUIRED is checked per row instead), and
    checks every AppendRows request to a stream that would take it (any stream type,
    Arrow and proto rows alike; a request the stream refuses for its offset or state
    is answered as before): ``STRING(L)`` at most L characters, ``BYTES(L)`` at most L
    bytes, ``NUMERIC``/``BIGNUMERIC(P, S)`` rounded to S digits by ``roundingMode``
    (half away from zero unless ``ROUND_HALF_EVEN``) and then in range (defaults:
    NUMERIC(38, 9), BIGNUMERIC scale 38), REQUIRED columns and RECORD members (when the
    RECORD has a value) not NULL or missing. A request with a bad row is refused whole:
    ``error`` INVALID_ARGUMENT "Errors found while processing rows. Please refer to the
    row_errors field for details. The list may not be complete because of the size
    limitations. Entity: <stream>" (BigQuery's wording, as users report it) and one
    ``RowError`` per bad row (its index in the request, ``FIELDS_ERROR``, its first
    problem in column order: "Field <column path>: <rule broken>", this launcher's
    wording); nothing is appended, the offset does not move, the connection stays
    open. Not checked: NULL elements of REPEATED columns, parameters of tables created
    by DDL (bqemulator's DDL drops them before this patch sees them). The setting
    ``row_errors`` (``ONCEOVER_LOCALBQ_ROW_ERRORS=off``, ``limited(row_errors="off")``)
    turns the checks off, read per request; the schema members and the nullable Arrow
    schema stay.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from onceover.errors import LocalBigQueryVersionError
from onceover_tools.localbq import limits
from onceover_tools.localbq.limits import HOUR_S

PINNED_VERSION = "1.4.0"
"""The bqemulator release these patches were written against and tested with."""

APPEND_ROWS_WORKERS = 128
"""Threads serving synchronous gRPC handlers; each open AppendRows connection holds one."""

PROTO_FIELDS_PER_PART = 3_000
"""Top-level fields of one part of a writer schema too wide for upb (``wide_proto_rows``):
at most 16 bytes each in memory, under upb's 65,535 bytes a message."""

logger = logging.getLogger(__name__)

_install_lock = threading.Lock()
_installed: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])


def check_version() -> str:
    """Return the installed bqemulator version, or raise when it is not the pinned one."""
    import bqemulator

    installed = getattr(bqemulator, "__version__", "unknown")
    if installed != PINNED_VERSION:
        raise LocalBigQueryVersionError(
            f"bqemulator {installed} is installed but the local BigQuery launcher is "
            f"written for bqemulator {PINNED_VERSION}; run `make install` (uv sync) to "
            f"get the pinned version, or re-check every patch in onceover_tools/localbq/patches.py"
        )
    return installed


def install() -> list[str]:
    """Apply every patch once per process and return their names.

    Raises :class:`LocalBigQueryVersionError` on any bqemulator other than
    :data:`PINNED_VERSION`.
    """
    check_version()
    with _install_lock:
        if not _installed:
            limits.apply_environment()  # ONCEOVER_LOCALBQ_<FIELD>; wrong values raise
            for patch in (
                keep_host_logging,  # first: the other patches import bqemulator modules
                optional_spatial,
                no_snapshot_per_write,
                stream_times,
                stream_already_committed,
                sticky_write_stream,
                record_columns,
                linear_column_alignment,
                wide_proto_rows,
                append_rows_pool,
                one_duckdb_user_at_a_time,
                row_errors,  # before stream_lifetimes: a gone stream answers NOT_FOUND first
                stream_lifetimes,
                create_stream_quota,
                commit_stream_limit,
                append_request_limit,
                buffered_flush,
                storage_error_details,  # last: sees the answers of the patches above
            ):
                patch()
                _installed.append(patch.__name__)
        return list(_installed)


def _wrap(owner: Any, name: str, make_wrapper: Callable[[F], F]) -> None:
    """Replace ``owner.name`` by ``make_wrapper(original)``; fail loudly if it moved."""
    original = getattr(owner, name, None)
    if original is None:
        raise LocalBigQueryVersionError(
            f"bqemulator no longer has {owner.__name__}.{name}; the launcher's patches "
            "need to be re-checked against this release"
        )
    wrapper = make_wrapper(original)
    functools.update_wrapper(wrapper, original)
    setattr(owner, name, wrapper)


# -- optional_spatial ---------------------------------------------------------------


def optional_spatial() -> None:
    """Load DuckDB's spatial extension only if installed; never download it."""
    from bqemulator.storage.engine import DuckDBEngine

    def make(_original: Callable[[DuckDBEngine], None]) -> Callable[[DuckDBEngine], None]:
        def _load_spatial(engine: DuckDBEngine) -> None:
            connection = engine.connection
            # Without this DuckDB downloads known extensions on first use.
            connection.execute("SET autoinstall_known_extensions = false")
            try:
                connection.execute("LOAD spatial")
            except Exception as exc:  # duckdb raises IOException when not installed
                logger.info(
                    "DuckDB spatial extension not installed; GEOGRAPHY is off (%s)",
                    str(exc).splitlines()[0],
                )

        return _load_spatial

    _wrap(DuckDBEngine, "_load_spatial", make)


# -- no_snapshot_per_write ----------------------------------------------------------


def no_snapshot_per_write() -> None:
    """Publish ``TableDataChanged`` on a write without copying the table."""
    from bqemulator.domain.events import TableDataChanged
    from bqemulator.versioning.snapshots import SnapshotManager

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def record_change(
            manager: SnapshotManager, project_id: str, dataset_id: str, table_id: str
        ) -> None:
            manager._events.publish(TableDataChanged(project_id, dataset_id, table_id))

        return record_change

    _wrap(SnapshotManager, "record_change", make)


# -- stream_times / stream_already_committed ----------------------------------------


@dataclass
class _StreamTimes:
    create_time: Any  # google.protobuf.Timestamp
    commit_time: Any = None


def _times(handler: Any) -> dict[str, _StreamTimes]:
    """Per-server record of stream times (stream state is in memory in bqemulator too)."""
    times: dict[str, _StreamTimes] = handler.__dict__.setdefault("_onceover_stream_times", {})
    return times


def stream_times() -> None:
    """Give ``GetWriteStream`` the real ``create_time`` and ``commit_time``."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamType
    from google.cloud.bigquery_storage_v1 import types
    from google.protobuf.timestamp_pb2 import Timestamp

    def make_create(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_create_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            if response_bytes:
                stream = types.WriteStream.deserialize(response_bytes)
                created = Timestamp()
                created.CopyFrom(types.WriteStream.pb(stream).create_time)
                _times(handler)[stream.name] = _StreamTimes(create_time=created)
            return response_bytes

        return _handle_create_write_stream

    def make_get(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_get_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            if not response_bytes:
                return response_bytes
            response = types.WriteStream.pb(types.WriteStream.deserialize(response_bytes))
            stream = handler.manager.get(response.name)
            if stream is None:
                return response_bytes
            if stream.stream_type is WriteStreamType.DEFAULT:
                table = handler._ctx.catalog.get_table(
                    stream.project_id, stream.dataset_id, stream.table_id
                )
                if table is not None:
                    response.create_time.FromDatetime(table.creation_time)
                response.commit_time.CopyFrom(response.create_time)
            else:
                recorded = _times(handler).get(stream.name)
                if recorded is not None:
                    response.create_time.CopyFrom(recorded.create_time)
                if stream.stream_type is WriteStreamType.COMMITTED:
                    response.commit_time.CopyFrom(response.create_time)
                elif recorded is not None and recorded.commit_time is not None:
                    response.commit_time.CopyFrom(recorded.commit_time)
            return bytes(response.SerializeToString())

        return _handle_get_write_stream

    def make_commit(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            response = types.BatchCommitWriteStreamsResponse.pb(
                types.BatchCommitWriteStreamsResponse.deserialize(response_bytes)
            )
            if response.HasField("commit_time") and not response.stream_errors:
                request = types.BatchCommitWriteStreamsRequest.deserialize(request_bytes)
                times = _times(handler)
                for name in request.write_streams:
                    if name in times:
                        committed = Timestamp()
                        committed.CopyFrom(response.commit_time)
                        times[name].commit_time = committed
            return response_bytes

        return _handle_batch_commit_write_streams

    _wrap(BigQueryWriteHandler, "_handle_create_write_stream", make_create)
    _wrap(BigQueryWriteHandler, "_handle_get_write_stream", make_get)
    _wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make_commit)


def stream_already_committed() -> None:
    """Answer ``STREAM_ALREADY_COMMITTED`` when a committed stream is committed again."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            response = types.BatchCommitWriteStreamsResponse.pb(
                types.BatchCommitWriteStreamsResponse.deserialize(response_bytes)
            )
            changed = False
            for error in response.stream_errors:
                stream = handler.manager.get(error.entity)
                if (
                    error.code == codes.INVALID_STREAM_STATE
                    and stream is not None
                    and stream.state is WriteStreamState.COMMITTED
                ):
                    error.code = codes.STREAM_ALREADY_COMMITTED
                    error.error_message = f"Stream already committed: {error.entity}"
                    changed = True
            return bytes(response.SerializeToString()) if changed else response_bytes

        return _handle_batch_commit_write_streams

    _wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make)


# -- sticky_write_stream ------------------------------------------------------------


def sticky_write_stream() -> None:
    """An AppendRows request without ``write_stream`` goes to the connection's stream."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _ensure_stream_bound(
            handler: Any, stream_name: str, bound_ctx: Any, context: Any
        ) -> Any:
            if not stream_name and bound_ctx is not None:
                return bound_ctx
            return original(handler, stream_name, bound_ctx, context)

        return _ensure_stream_bound

    _wrap(BigQueryWriteHandler, "_ensure_stream_bound", make)


# -- record_columns -----------------------------------------------------------------


def record_columns() -> None:
    """Give AppendRows a target schema with the members of RECORD columns."""
    from bqemulator.api.routes.tabledata import _build_arrow_schema
    from bqemulator.api.routes.tables import _field_to_rest
    from bqemulator.grpc_api import write_servicer

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_arrow_schema(table_meta: Any) -> Any:
            # The REST shape of the schema (tables.get) recurses into RECORD members.
            return _build_arrow_schema([_field_to_rest(f) for f in table_meta.schema_.fields])

        return _table_arrow_schema

    # _bind_stream_to_target looks the module-level function up by name at each bind.
    _wrap(write_servicer, "_table_arrow_schema", make)


# -- linear_column_alignment --------------------------------------------------------


def linear_column_alignment() -> None:
    """Line an Arrow append's columns up with the table's in time linear in the columns."""
    import pyarrow as pa
    from bqemulator.grpc_api import write_servicer

    def make(_original: Callable[..., Any]) -> Callable[..., Any]:
        def _align_to_target(table: pa.Table, target_schema: pa.Schema) -> pa.Table:
            position: dict[str, int | None] = {}
            for index, name in enumerate(table.column_names):
                position[name] = None if name in position else index  # None: there twice
            arrays: list[Any] = []
            for field in target_schema:
                if field.name not in position:
                    arrays.append(pa.nulls(table.num_rows, type=field.type))
                    continue
                i = position[field.name]
                # A name there twice: bqemulator's lookup by name raises, and so does this.
                column = table.column(field.name if i is None else i)
                if column.type != field.type:
                    column = column.cast(field.type)
                arrays.append(column.combine_chunks())
            return pa.Table.from_arrays(arrays, schema=target_schema)

        return _align_to_target

    # _rows_for_request looks the module-level function up by name at each append.
    _wrap(write_servicer, "_align_to_target", make)


# -- wide_proto_rows ----------------------------------------------------------------


def _too_wide(exc: Exception) -> bool:
    """upb's refusal of a message whose fields take over 65,535 bytes."""
    return "mini table" in str(exc) and "maximum size" in str(exc)


def wide_proto_rows() -> None:
    """Decode proto rows of writer schemas too wide for one upb message class."""
    from bqemulator.grpc_api import write_servicer
    from bqemulator.streaming import proto_deserializer
    from google.protobuf import descriptor_pb2

    original: Any = getattr(write_servicer, "ProtoRowDecoder", None)
    if original is not proto_deserializer.ProtoRowDecoder:
        raise LocalBigQueryVersionError(
            "bqemulator's write servicer no longer decodes proto rows with "
            "proto_deserializer.ProtoRowDecoder; the launcher's patches need to be re-checked"
        )

    class WideProtoRowDecoder(original):  # type: ignore[misc]
        """bqemulator's decoder, in parts when upb cannot build the schema whole."""

        def __init__(self, descriptor_proto: descriptor_pb2.DescriptorProto) -> None:
            self._onceover_parts: list[Any] = []
            try:
                super().__init__(descriptor_proto)
                return
            except TypeError as exc:
                if not _too_wide(exc) or len(descriptor_proto.field) <= PROTO_FIELDS_PER_PART:
                    raise
            fields = list(descriptor_proto.field)
            for start in range(0, len(fields), PROTO_FIELDS_PER_PART):
                part = descriptor_pb2.DescriptorProto()
                part.CopyFrom(descriptor_proto)
                del part.field[:]
                part.field.extend(fields[start : start + PROTO_FIELDS_PER_PART])
                self._onceover_parts.append(original(part))
            self._field_names = tuple(field.name for field in fields)

        def decode(self, serialized_row: bytes) -> dict[str, Any]:
            if not self._onceover_parts:
                return dict(super().decode(serialized_row))
            values: dict[str, Any] = {}
            for part in self._onceover_parts:
                values.update(part.decode(serialized_row))
            return {name: values[name] for name in self._field_names}

    WideProtoRowDecoder.__name__ = WideProtoRowDecoder.__qualname__ = "ProtoRowDecoder"
    # _rows_for_request looks the class up by name in the servicer's module.
    setattr(write_servicer, "ProtoRowDecoder", WideProtoRowDecoder)  # noqa: B010


# -- append_rows_pool ---------------------------------------------------------------


@contextlib.contextmanager
def _grpc_servers_with_pool(pool: ThreadPoolExecutor) -> Iterator[None]:
    """While active, ``grpc.aio.server(...)`` gets ``migration_thread_pool=pool``."""
    import grpc.aio

    original = grpc.aio.server

    def server(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("migration_thread_pool", pool)
        return original(*args, **kwargs)

    grpc.aio.server = server
    try:
        yield
    finally:
        grpc.aio.server = original


_pool_lock = threading.Lock()


def append_rows_pool() -> None:
    """Serve up to :data:`APPEND_ROWS_WORKERS` synchronous gRPC calls at once."""
    import bqemulator.server

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def build_grpc_server(context: Any) -> Any:
            pool = ThreadPoolExecutor(
                max_workers=APPEND_ROWS_WORKERS, thread_name_prefix="local-bigquery-grpc"
            )
            # The lock keeps two servers starting at once from swapping each
            # other's pools; grpc.aio.server is only replaced for this one call.
            with _pool_lock, _grpc_servers_with_pool(pool):
                server, port = original(context)
            server._onceover_pool = pool  # shut down by LocalBigQuery.stop()
            return server, port

        return build_grpc_server

    # server.py imported the factory by name, so the name there is the one to wrap.
    _wrap(bqemulator.server, "build_grpc_server", make)


def shutdown_pool(grpc_server: Any) -> None:
    """Release the thread pool :func:`append_rows_pool` gave ``grpc_server``."""
    pool = getattr(grpc_server, "_onceover_pool", None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
        # A handler whose client went away can stay blocked on the stopped event loop
        # for good; the interpreter must not wait for it at exit.
        import concurrent.futures.thread as pool_threads

        for thread in list(getattr(pool, "_threads", ())):
            pool_threads._threads_queues.pop(thread, None)  # type: ignore[attr-defined]


# -- one_duckdb_user_at_a_time -------------------------------------------------------


_duckdb_lock = threading.RLock()
"""Held by whichever thread uses bqemulator's DuckDB connection (re-entrant: a fetch runs
``execute`` inside, an append's insert reads the catalog inside)."""


def one_duckdb_user_at_a_time() -> None:
    """Serialise every use of bqemulator's one DuckDB connection."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.jobs import executor
    from bqemulator.storage.engine import DuckDBEngine

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def locked(*args: Any, **kwargs: Any) -> Any:
            with _duckdb_lock:
                return original(*args, **kwargs)

        return locked

    _wrap(DuckDBEngine, "execute", make)
    _wrap(DuckDBEngine, "fetch_arrow", make)
    _wrap(BigQueryWriteHandler, "_flush_to_target", make)
    _wrap(executor, "_insert_via_arrow_view", make)  # looked up by name at each call


# -- keep_host_logging --------------------------------------------------------------


def keep_host_logging() -> None:
    """Undo bqemulator's ``logging.basicConfig(force=True)`` on the host's root logger.

    Also configures bqemulator's structlog at WARNING before the rest of bqemulator
    is imported: some of its modules log at import time, and unconfigured structlog
    prints to stdout (where ``onceover bigquery --ready-json`` writes its ready line).
    """
    from bqemulator.config import LogFormat, LogLevel
    from bqemulator.observability import logging_

    def make(original: Callable[..., None]) -> Callable[..., None]:
        def configure_logging(*, level: Any, fmt: Any) -> None:
            root = logging.getLogger()
            handlers, root_level = list(root.handlers), root.level
            original(level=level, fmt=fmt)
            for handler in list(root.handlers):
                root.removeHandler(handler)
            for handler in handlers:
                root.addHandler(handler)
            root.setLevel(root_level)

        return configure_logging

    _wrap(logging_, "configure_logging", make)
    logging_.configure_logging(level=LogLevel.WARNING, fmt=LogFormat.CONSOLE)
    logging.getLogger("bqemulator").setLevel(logging.WARNING)

    import bqemulator.server  # imported only now that structlog is configured

    # server.py imported the function by name before the wrap.
    bqemulator.server.configure_logging = logging_.configure_logging  # type: ignore[attr-defined]


# -- Storage Write API limits: the values live in onceover_tools.localbq.limits ------------


def _quota_window(seconds: float) -> str:
    named = {HOUR_S: "hour", 60.0: "minute", 1.0: "second"}
    return named.get(seconds, f"{seconds:g} seconds")


def _table_parent_project(parent: str) -> str | None:
    """The project of ``projects/{p}/datasets/{d}/tables/{t}``; ``None`` if malformed."""
    parts = parent.split("/")
    if len(parts) != 6 or parts[0] != "projects" or not parts[1]:
        return None
    return parts[1]


# -- create_stream_quota ---------------------------------------------------------------


def create_stream_quota() -> None:
    """Refuse CreateWriteStream over the project's quota (RESOURCE_EXHAUSTED)."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.CreateWriteStreamRequest.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_create_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            parent = request_type.FromString(request_bytes).parent
            project = _table_parent_project(parent)
            if project is None:  # bqemulator answers INVALID_ARGUMENT; nothing to count
                return original(handler, request_bytes, context)
            wait_s = limits.CREATE_STREAM_QUOTA.admit(project)
            if wait_s is not None:
                values = limits.WRITE_API_LIMITS.snapshot()
                window = _quota_window(values.create_window_s)
                context.set_code(grpc.StatusCode.RESOURCE_EXHAUSTED)
                context.set_details(
                    f"Exceeds quota limit 'CreateWriteStream requests' of "
                    f"{values.create_streams_per_window} streams per {window} per project "
                    f"per region, user_id: {project} (status: INSUFFICIENT_TOKENS); the "
                    f"oldest counted call leaves the window in {wait_s:.1f} s. Use the "
                    "_default stream where exactly-once is not needed, see "
                    "https://cloud.google.com/bigquery/docs/write-api-best-practices"
                    f"#limit_the_rate_of_stream_creation. Entity: {parent}"
                )
                return b""
            return original(handler, request_bytes, context)

        return _handle_create_write_stream

    _wrap(BigQueryWriteHandler, "_handle_create_write_stream", make)


# -- commit_stream_limit ---------------------------------------------------------------


def commit_stream_limit() -> None:
    """Refuse a BatchCommitWriteStreams naming too many streams (INVALID_ARGUMENT)."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.BatchCommitWriteStreamsRequest.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            request = request_type.FromString(request_bytes)
            most = limits.WRITE_API_LIMITS.commit_max_streams
            if len(request.write_streams) > most:
                context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                context.set_details(
                    f"BatchCommitWriteStreams names {len(request.write_streams)} streams; "
                    f"at most {most} streams can be committed in one call. "
                    f"Entity: {request.parent}"
                )
                return b""
            return original(handler, request_bytes, context)

        return _handle_batch_commit_write_streams

    _wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make)


# -- append_request_limit --------------------------------------------------------------


def _leading_write_stream(request_bytes: bytes) -> str:
    """``write_stream`` of a serialized ``AppendRowsRequest`` when it is there, without
    parsing the rest: field 1, which protobuf writers put first (fields go out in
    number order). ``""`` when the request does not start with it."""
    if request_bytes[:1] != b"\x0a":  # field 1, length-delimited
        return ""
    length, shift, position = 0, 0, 1
    while position < min(len(request_bytes), 6):
        byte = request_bytes[position]
        length |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            name = request_bytes[position : position + length]
            return name.decode("utf-8", "replace") if len(name) == length else ""
        shift += 7
    return ""


class _OneAtATime:
    """The requests bqemulator's AppendRows handler reads: each one it is handed.

    The handler answers every request it reads with exactly one response before it
    reads the next; so the wrapper hands it one request, takes its one response, and
    answers a request over the limit itself in between, in order.
    """

    def __init__(self) -> None:
        self._next: bytes | None = None
        self._closed = False

    def hand(self, request_bytes: bytes) -> None:
        self._next = request_bytes

    def close(self) -> None:
        self._closed = True

    def __iter__(self) -> _OneAtATime:
        return self

    def __next__(self) -> bytes:
        request_bytes, self._next = self._next, None
        if request_bytes is not None:
            return request_bytes
        if self._closed:
            raise StopIteration
        raise LocalBigQueryVersionError(
            "bqemulator's AppendRows handler read a request before answering the last "
            "one; the launcher's append_request_limit patch needs to be re-checked"
        )


def append_request_limit() -> None:
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

    def make_handle(
        original: Callable[..., Generator[bytes, None, None]],
    ) -> Callable[..., Generator[bytes, None, None]]:
        def _handle_append_rows(
            handler: Any, request_iterator: Iterator[bytes], context: Any
        ) -> Generator[bytes, None, None]:
            admitted = _OneAtATime()
            responses = original(handler, admitted, context)
            stream = ""  # the connection's, from its first request that names one
            try:
                for request_bytes in request_iterator:
                    named = _leading_write_stream(request_bytes)
                    stream = stream or named
                    most = limits.WRITE_API_LIMITS.append_request_max_bytes
                    if len(request_bytes) > most:
                        entity = named or stream
                        yield bytes(
                            write_servicer._error_response(
                                entity,
                                f"AppendRows request too large: {len(request_bytes)} "
                                f"limit {most} Entity: {entity}",
                                status_code=grpc.StatusCode.INVALID_ARGUMENT,
                            )
                        )
                        continue
                    admitted.hand(request_bytes)
                    try:
                        yield next(responses)
                    except StopIteration:  # bqemulator ended the call (stream not found)
                        return
                admitted.close()
                yield from responses  # nothing more to read: the handler returns
            finally:
                responses.close()

        return _handle_append_rows

    # server.py imported the factory by name, so the name there is the one to wrap.
    _wrap(bqemulator.server, "build_grpc_server", make_build)
    # service() looks the handler up on the instance at each call.
    _wrap(BigQueryWriteHandler, "_handle_append_rows", make_handle)


# -- stream_lifetimes ------------------------------------------------------------------


@dataclass
class _StreamClock:
    created: float  # time.monotonic()
    last_append: float


def _clocks(manager: Any) -> dict[str, _StreamClock]:
    """Per-manager record of when each stream was created and last appended to."""
    clocks: dict[str, _StreamClock] = manager.__dict__.setdefault("_onceover_stream_clocks", {})
    return clocks


def _lifetime_over(stream: Any, clock: _StreamClock, now: float) -> bool:
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType

    values = limits.WRITE_API_LIMITS.snapshot()
    if stream.stream_type is WriteStreamType.PENDING:
        # A committed PENDING stream stays: its commit_time tells a writer it happened.
        return (
            stream.state is not WriteStreamState.COMMITTED
            and now - clock.created > values.pending_lifetime_s
        )
    if stream.stream_type is WriteStreamType.COMMITTED:
        return now - clock.last_append > values.committed_idle_s
    if stream.stream_type is WriteStreamType.BUFFERED:
        return now - clock.last_append > values.buffered_idle_s
    return False  # the _default stream lives as long as its table


def _expired(manager: Any, stream: Any, delete: Callable[[Any, str], None]) -> bool:
    """Delete ``stream`` if its lifetime is over; say whether it was."""
    clock = _clocks(manager).get(stream.name)
    if clock is None or not _lifetime_over(stream, clock, time.monotonic()):
        return False
    delete(manager, stream.name)
    _clocks(manager).pop(stream.name, None)
    logger.info("local BigQuery: write stream %s expired and was deleted", stream.name)
    return True


def stream_lifetimes() -> None:
    """Delete PENDING streams not committed in time and idle COMMITTED/BUFFERED streams."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamManager
    from google.cloud.bigquery_storage_v1 import types

    response_type = types.AppendRowsResponse.pb()
    delete = WriteStreamManager.delete

    def make_create(original: Callable[..., Any]) -> Callable[..., Any]:
        def create(manager: Any, *args: Any, **kwargs: Any) -> Any:
            stream = original(manager, *args, **kwargs)
            now = time.monotonic()
            _clocks(manager)[stream.name] = _StreamClock(created=now, last_append=now)
            return stream

        return create

    def make_get(original: Callable[..., Any]) -> Callable[..., Any]:
        # Every RPC finds its stream here: Get, Finalize, Flush, AppendRows (binding a
        # connection) and BatchCommit's validation all answer "not found" once it is gone.
        def get(manager: Any, name: str) -> Any:
            stream = original(manager, name)
            if stream is not None and _expired(manager, stream, delete):
                return None
            return stream

        return get

    def make_list_active(original: Callable[..., Any]) -> Callable[..., Any]:
        def list_active(manager: Any) -> tuple[Any, ...]:
            return tuple(s for s in original(manager) if not _expired(manager, s, delete))

        return list_active

    def make_append(original: Callable[..., bytes]) -> Callable[..., bytes]:
        # A connection bound to a stream does not look it up again: check it here.
        def _perform_append(handler: Any, bound_stream: Any, *args: Any, **kwargs: Any) -> bytes:
            if handler.manager.get(bound_stream.name) is not bound_stream:
                return bytes(
                    write_servicer._error_response(
                        bound_stream.name,
                        f"Requested entity was not found. Entity: {bound_stream.name}",
                        status_code=grpc.StatusCode.NOT_FOUND,
                    )
                )
            response = original(handler, bound_stream, *args, **kwargs)
            clock = _clocks(handler.manager).get(bound_stream.name)
            if clock is not None and not response_type.FromString(response).HasField("error"):
                clock.last_append = time.monotonic()
            return response

        return _perform_append

    _wrap(WriteStreamManager, "create", make_create)
    _wrap(WriteStreamManager, "get", make_get)
    _wrap(WriteStreamManager, "list_active", make_list_active)
    _wrap(BigQueryWriteHandler, "_perform_append", make_append)


# -- buffered_flush --------------------------------------------------------------------


def _split_rows(buffer: list[Any], count: int) -> tuple[list[Any], list[Any]]:
    """A BUFFERED stream's buffer (Arrow tables in offset order) split after ``count``
    rows: the tables holding the first ``count`` rows, and the rest. A table across the
    split is sliced, not copied: its memory goes when its last row is flushed."""
    taken: list[Any] = []
    for index, table in enumerate(buffer):
        if count <= 0:
            return taken, buffer[index:]
        if table.num_rows > count:
            return [*taken, table.slice(0, count)], [table.slice(count), *buffer[index + 1 :]]
        taken.append(table)
        count -= table.num_rows
    return taken, []


def buffered_flush() -> None:
    """FlushRows: the offset is inclusive, a repeated flush answers as ``repeated_flush``
    says, and flushed rows leave the stream's buffer."""
    import grpc
    import pyarrow as pa
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.FlushRowsRequest.pb()
    response_type = types.FlushRowsResponse.pb()

    def flushed_to(offset: int) -> bytes:
        response = response_type()
        response.offset = offset
        return bytes(response.SerializeToString())

    def refuse(context: Any, code: Any, message: str) -> bytes:
        context.set_code(code)
        context.set_details(message)
        return b""

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_flush_rows(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            request = request_type.FromString(request_bytes)
            name = request.write_stream
            stream = handler.manager.get(name)
            if (
                stream is None  # NOT_FOUND, as before (stream_lifetimes: also once expired)
                or stream.stream_type is not WriteStreamType.BUFFERED  # INVALID_ARGUMENT
                or stream.state is not WriteStreamState.OPEN  # OUT_OF_RANGE, as before
                or not request.HasField("offset")  # undocumented: left to bqemulator
            ):
                return original(handler, request_bytes, context)
            offset = request.offset.value  # the last row to flush, itself included
            with stream.lock:  # as an append: the stream's lock, then the table's insert
                flushed = stream.flushed_rows  # rows 0 .. flushed - 1 are in the table
                if offset < 0:
                    return refuse(
                        context,
                        grpc.StatusCode.OUT_OF_RANGE,
                        f"Offset {offset} is before the start of the stream Entity: {name}",
                    )
                if offset >= stream.next_offset:
                    return refuse(
                        context,
                        grpc.StatusCode.OUT_OF_RANGE,
                        f"Offset {offset} is beyond the end of the stream Entity: {name}",
                    )
                if offset < flushed:
                    if limits.WRITE_API_LIMITS.repeated_flush == "ok":
                        return flushed_to(offset)
                    return refuse(
                        context,
                        grpc.StatusCode.ALREADY_EXISTS,
                        f"Offset {offset} is already flushed: the stream is flushed up to "
                        f"offset {flushed - 1} Entity: {name}",
                    )
                taken, rest = _split_rows(stream.buffer, offset + 1 - flushed)
                # Into the table first: if that fails, nothing was flushed or dropped.
                handler._flush_to_target(stream, pa.concat_tables(taken))
                stream.buffer[:] = rest
                stream.flushed_rows = offset + 1
            return flushed_to(offset)

        return _handle_flush_rows

    # service() looks the handler up on the instance at each call.
    _wrap(BigQueryWriteHandler, "_handle_flush_rows", make)


# -- row_errors ------------------------------------------------------------------------

ROW_ERRORS_MESSAGE = (
    "Errors found while processing rows. Please refer to the row_errors field for details. "
    "The list may not be complete because of the size limitations. Entity: {stream}"
)
"""BigQuery's message in the ``error`` of an append refused for bad rows (as users have
reported it, e.g. googleapis/python-bigquery-storage#717)."""

_SCHEMA_PARAMETERS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("maxLength", "max_length", frozenset({"STRING", "BYTES"})),
    ("precision", "precision", frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"})),
    ("scale", "scale", frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"})),
    (
        "roundingMode",
        "rounding_mode",
        frozenset({"NUMERIC", "BIGNUMERIC", "DECIMAL", "BIGDECIMAL"}),
    ),
)
"""``TableFieldSchema`` members bqemulator's REST parser dropped: (REST name, catalog
name, the types they apply to). Each is documented as invalid on other types."""


def _parameter(raw: dict[str, Any], rest_name: str) -> int | str | None:
    value = raw.get(rest_name)
    if value is None or value == "":
        return None
    if rest_name == "roundingMode":
        return str(value).upper()
    try:
        return int(value)  # int64 members arrive as JSON strings or numbers
    except (TypeError, ValueError):
        return None  # left out, as bqemulator did


def _with_parameters(field: Any, raw: dict[str, Any]) -> Any:
    """``field`` (parsed from ``raw``) with the parameters ``raw`` gives for its type."""
    kind = str(raw.get("type", "STRING")).upper()
    update: dict[str, Any] = {}
    for rest_name, name, kinds in _SCHEMA_PARAMETERS:
        value = _parameter(raw, rest_name)
        if value is not None and kind in kinds:
            update[name] = value
    return field.model_copy(update=update) if update else field


def row_errors() -> None:
    """Keep the column rules of a table's schema and refuse, with ``row_errors``, an
    AppendRows request any row of which breaks them."""
    _schema_parameters()
    _nullable_append_targets()
    _append_row_checks()


def _schema_parameters() -> None:
    """tables.insert / update / patch (and a load job's explicit schema) keep
    ``maxLength``, ``precision``, ``scale`` and ``roundingMode``; tables.get answers them."""
    from bqemulator.api.routes import tables

    def make_parse(original: Callable[..., Any]) -> Callable[..., Any]:
        def _parse_schema_fields(raw_fields: list[dict[str, Any]]) -> tuple[Any, ...]:
            # The original recurses through this module-level name: members come back
            # with their parameters already.
            parsed = original(raw_fields)
            return tuple(
                _with_parameters(field, raw) for field, raw in zip(parsed, raw_fields, strict=True)
            )

        return _parse_schema_fields

    def make_to_rest(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def _field_to_rest(field: Any) -> dict[str, Any]:
            out = original(field)
            for rest_name, name, _kinds in _SCHEMA_PARAMETERS:
                value = getattr(field, name, None)
                if value is not None:
                    # REST carries int64 members as strings, as BigQuery answers them.
                    out[rest_name] = value if rest_name == "roundingMode" else str(value)
            return out

        return _field_to_rest

    # Both are looked up by name at each call (and by the load-job executor on import).
    _wrap(tables, "_parse_schema_fields", make_parse)
    _wrap(tables, "_field_to_rest", make_to_rest)


def _nullable_field(field: Any) -> Any:
    """``field`` (a ``pyarrow.Field``) and every member inside it nullable."""
    import pyarrow as pa

    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_nullable_field(kind.field(i)) for i in range(kind.num_fields)])
    elif pa.types.is_list(kind):
        kind = pa.list_(_nullable_field(kind.value_field))
    elif pa.types.is_large_list(kind):
        kind = pa.large_list(_nullable_field(kind.value_field))
    return field.with_type(kind).with_nullable(True)


def _nullable_append_targets() -> None:
    """The Arrow schema an append's rows are lined up with allows NULL everywhere.

    bqemulator marked REQUIRED columns non-nullable in it. At the top level nothing
    reads the flag, but a RECORD's REQUIRED member is part of the struct type, so rows
    with a NULL there failed to cast and the whole request failed with pyarrow's
    message ("field 'country' of type string has nulls. Can't cast to non-nullable
    field"). REQUIRED is checked row by row instead (``_append_row_checks``). Always so,
    whatever the ``row_errors`` setting: a BUFFERED or PENDING stream joins its appends'
    tables, which must then share one schema.
    """
    import pyarrow as pa
    from bqemulator.grpc_api import write_servicer

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _table_arrow_schema(table_meta: Any) -> Any:
            schema = original(table_meta)
            return pa.schema([_nullable_field(f) for f in schema], metadata=schema.metadata)

        return _table_arrow_schema

    # _bind_stream_to_target looks the module-level function up by name at each bind.
    _wrap(write_servicer, "_table_arrow_schema", make)


def _append_row_checks() -> None:
    """Check each AppendRows request's rows before the stream takes them."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType
    from google.cloud.bigquery_storage_v1 import types

    from onceover_tools.localbq import row_rules

    response_type = types.AppendRowsResponse.pb()
    row_error_type = types.RowError.pb()
    fields_error = types.RowError.RowErrorCode.FIELDS_ERROR

    def takes_rows(stream: Any, offset: int | None) -> bool:
        """Whether the stream would append a request at ``offset``; when it would not,
        its own answer (ALREADY_EXISTS, OUT_OF_RANGE, a finalized stream, an offset on
        ``_default``) comes first, as before."""
        if stream.state is not WriteStreamState.OPEN:
            return False
        if stream.stream_type is WriteStreamType.DEFAULT:
            return offset is None
        return offset is None or offset == stream.next_offset

    def refusal(stream_name: str, problems: row_rules.Problems) -> bytes:
        response = response_type.FromString(
            write_servicer._error_response(
                stream_name,
                ROW_ERRORS_MESSAGE.format(stream=stream_name),
                status_code=grpc.StatusCode.INVALID_ARGUMENT,
            )
        )
        response.row_errors.extend(
            row_error_type(index=index, code=fields_error, message=problems[index])
            for index in sorted(problems)
        )
        return bytes(response.SerializeToString())

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _perform_append(
            handler: Any,
            bound_stream: Any,
            rows_table: Any,
            offset: int | None,
            max_buffered_rows: int,
        ) -> bytes:
            if limits.WRITE_API_LIMITS.row_errors == "on" and rows_table.num_rows:
                # The stream's lock (re-entrant; the append takes it again) keeps the
                # offset checked here the one the rows are appended at.
                with bound_stream.lock:
                    if takes_rows(bound_stream, offset):
                        table = handler._ctx.catalog.get_table(
                            bound_stream.project_id, bound_stream.dataset_id, bound_stream.table_id
                        )
                        if table is not None:
                            rows_table, problems = row_rules.check_rows(
                                rows_table, table.schema_.fields
                            )
                            if problems:  # nothing appended, the offset does not move
                                return refusal(bound_stream.name, problems)
                    return original(handler, bound_stream, rows_table, offset, max_buffered_rows)
            return original(handler, bound_stream, rows_table, offset, max_buffered_rows)

        return _perform_append

    # _handle_append_rows calls it on the instance at each request.
    _wrap(BigQueryWriteHandler, "_perform_append", make)


# -- storage_error_details -------------------------------------------------------------

STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""Trailing metadata carrying a serialized ``google.rpc.Status`` (gRPC's rich errors)."""


def _packed_storage_error(code: int, entity: str, message: str) -> Any:
    """A ``google.protobuf.Any`` holding a ``StorageError``."""
    from google.cloud.bigquery_storage_v1 import types
    from google.protobuf import any_pb2

    packed = any_pb2.Any()
    packed.Pack(types.StorageError.pb()(code=code, entity=entity, error_message=message))
    return packed


class _RecordingContext:
    """A gRPC servicer context that remembers the status set on it.

    The context of a synchronous streaming handler cannot tell the code it was given
    (no ``code()``), so each handler wrapped here gets one of these in its place.
    """

    def __init__(self, context: Any) -> None:
        self._context = context
        self.status_code: Any = None
        self.status_details: str | None = None
        self.trailing: tuple[tuple[str, str | bytes], ...] = ()

    def set_code(self, code: Any) -> None:
        self.status_code = code
        self._context.set_code(code)

    def set_details(self, details: str) -> None:
        self.status_details = details
        self._context.set_details(details)

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
        self.trailing = tuple(metadata)
        self._context.set_trailing_metadata(metadata)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _attach_storage_error(context: _RecordingContext, code: int, entity: str) -> None:
    """Send the call's status again as a ``google.rpc.Status`` with a ``StorageError``.

    The status code and message must equal the call's own: clients refuse rich details
    that disagree with the call (``grpc_status.rpc_status.from_call``).
    """
    from google.rpc import status_pb2  # type: ignore[import-untyped]

    status_code, message = context.status_code, context.status_details
    if status_code is None or message is None:
        return
    status = status_pb2.Status(
        code=status_code.value[0],
        message=message,
        details=[_packed_storage_error(code, entity, message)],
    )
    context.set_trailing_metadata(
        (*context.trailing, (STATUS_DETAILS_KEY, status.SerializeToString()))
    )


Decide: TypeAlias = Callable[[Any, bytes, Any], tuple[int, str] | None]
"""(handler, request bytes, gRPC status code) -> (StorageErrorCode, entity) or None."""


def storage_error_details() -> None:
    """Give Write API errors the ``StorageError`` detail BigQuery gives them."""
    _unary_storage_errors()
    _in_stream_storage_errors()


def _unary_storage_errors() -> None:
    """A failed GetWriteStream, FinalizeWriteStream, FlushRows, CreateWriteStream or
    AppendRows connection sends its status with a ``StorageError`` in the trailer."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import DEFAULT_STREAM_SUFFIX, WriteStreamState
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode
    status = grpc.StatusCode
    default_suffix = f"/streams/{DEFAULT_STREAM_SUFFIX}"

    def unary(decide: Decide) -> Callable[[Callable[..., bytes]], Callable[..., bytes]]:
        def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
            def handle(handler: Any, request_bytes: bytes, context: Any) -> bytes:
                recording = _RecordingContext(context)
                response = original(handler, request_bytes, recording)
                code = recording.status_code
                if code is not None and code is not status.OK:
                    decided = decide(handler, request_bytes, code)
                    if decided is not None:
                        _attach_storage_error(recording, *decided)
                return response

            return handle

        return make

    def on_create(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        parent = types.CreateWriteStreamRequest.pb().FromString(request_bytes).parent
        return (codes.TABLE_NOT_FOUND, parent) if code is status.NOT_FOUND else None

    def on_get(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.GetWriteStreamRequest.pb().FromString(request_bytes).name
        if code is not status.NOT_FOUND:
            return None
        # The _default stream is only missing when its table is.
        missing = codes.TABLE_NOT_FOUND if name.endswith(default_suffix) else codes.STREAM_NOT_FOUND
        return missing, name

    def on_finalize(_handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.FinalizeWriteStreamRequest.pb().FromString(request_bytes).name
        storage_code = {
            status.NOT_FOUND: codes.STREAM_NOT_FOUND,
            status.INVALID_ARGUMENT: codes.INVALID_STREAM_TYPE,  # the _default stream
            status.FAILED_PRECONDITION: codes.STREAM_ALREADY_COMMITTED,
        }.get(code)
        return None if storage_code is None else (storage_code, name)

    def on_flush(handler: Any, request_bytes: bytes, code: Any) -> tuple[int, str] | None:
        name = types.FlushRowsRequest.pb().FromString(request_bytes).write_stream
        if code is status.NOT_FOUND:
            return codes.STREAM_NOT_FOUND, name
        if code is status.INVALID_ARGUMENT:  # not a BUFFERED stream
            return codes.INVALID_STREAM_TYPE, name
        if code is status.ALREADY_EXISTS:  # an offset already flushed (buffered_flush)
            return codes.OFFSET_ALREADY_EXISTS, name
        if code is status.OUT_OF_RANGE:
            stream = handler.manager.get(name)
            if stream is not None and stream.state is not WriteStreamState.OPEN:
                return codes.STREAM_FINALIZED, name
            return codes.OFFSET_OUT_OF_RANGE, name
        return None

    def make_bind(original: Callable[..., Any]) -> Callable[..., Any]:
        # AppendRows closes the connection with NOT_FOUND when its stream or table is gone.
        def _bind_stream_to_target(handler: Any, stream_name: str, context: Any) -> Any:
            recording = _RecordingContext(context)
            bound = original(handler, stream_name, recording)
            if bound is None and recording.status_code is status.NOT_FOUND:
                table_gone = (
                    stream_name.endswith(default_suffix)
                    or handler.manager.get(stream_name) is not None
                )
                storage_code = codes.TABLE_NOT_FOUND if table_gone else codes.STREAM_NOT_FOUND
                _attach_storage_error(recording, storage_code, stream_name)
            return bound

        return _bind_stream_to_target

    _wrap(BigQueryWriteHandler, "_handle_create_write_stream", unary(on_create))
    _wrap(BigQueryWriteHandler, "_handle_get_write_stream", unary(on_get))
    _wrap(BigQueryWriteHandler, "_handle_finalize_write_stream", unary(on_finalize))
    _wrap(BigQueryWriteHandler, "_handle_flush_rows", unary(on_flush))
    _wrap(BigQueryWriteHandler, "_bind_stream_to_target", make_bind)


def _in_stream_storage_errors() -> None:
    """An ``AppendRowsResponse.error`` gets a ``StorageError`` in its details."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode
    status = grpc.StatusCode
    in_stream = {
        status.ALREADY_EXISTS: codes.OFFSET_ALREADY_EXISTS,
        status.OUT_OF_RANGE: codes.OFFSET_OUT_OF_RANGE,
        status.FAILED_PRECONDITION: codes.STREAM_FINALIZED,
        status.NOT_FOUND: codes.STREAM_NOT_FOUND,
    }
    response_type = types.AppendRowsResponse.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _error_response(
            stream_name: str, detail: str, status_code: Any = status.INVALID_ARGUMENT
        ) -> bytes:
            response_bytes = original(stream_name, detail, status_code=status_code)
            storage_code = in_stream.get(status_code)
            if storage_code is None:
                return response_bytes
            response = response_type.FromString(response_bytes)
            response.error.details.append(_packed_storage_error(storage_code, stream_name, detail))
            return bytes(response.SerializeToString())

        return _error_response

    # _perform_append and _oversize_error_response look the function up by name.
    _wrap(write_servicer, "_error_response", make)
