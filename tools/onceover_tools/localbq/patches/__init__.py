"""The patches that make bqemulator 1.4.0 behave like BigQuery where Onceover relies on it.

This package (with the rest of :mod:`onceover_tools.localbq`) is the only code in the
project that knows bqemulator's internals. Each patch is a module of its own, named as the
launcher and the tests call it; its docstring states the documented BigQuery behaviour it
restores and names the tests (over the real REST and gRPC endpoints, in
``tests/localbq/``) that pin it. Every patch replaces private bqemulator functions through
:mod:`~onceover_tools.localbq.patches.wrapping`, which refuses any bqemulator other than
:data:`PINNED_VERSION`. :func:`install` applies them all, once per process, in the order
of :data:`PATCHES`.

``keep_host_logging``
    bqemulator does not take over the logging of the process that embeds it.
``optional_spatial``
    the server starts offline: DuckDB's spatial extension is loaded only if installed.
``no_snapshot_per_write``
    an append does not copy the whole table into a time-travel snapshot.
``stream_times``
    ``GetWriteStream`` answers a stream's real ``create_time`` and ``commit_time``.
``stream_already_committed``
    re-committing a committed stream answers ``STREAM_ALREADY_COMMITTED``.
``sticky_write_stream``
    requests after a connection's first may omit ``write_stream``.
``record_columns``
    RECORD and REPEATED RECORD columns take Arrow and proto appends.
``linear_column_alignment``
    an Arrow append to a wide table costs time linear in its columns.
``wide_proto_rows``
    proto rows of a writer schema of up to 10,000 columns are decoded.
``append_rows_pool``
    many AppendRows connections are served at once (not 6 on 2 cores).
``one_duckdb_user_at_a_time``
    queries and appends run at once without deadlocking the server.
``missing_dataset``
    a table inserted into a dataset that does not exist is NOT_FOUND (not a 500 retried).
``range_partitioning``
    a table created with integer-range partitioning keeps it (``tables.get`` answers it).
``primary_keys``
    a table keeps the primary key (``tableConstraints``) ``tables.insert`` gives it.
``ddl_primary_keys``
    ``CREATE TABLE ... PRIMARY KEY (...) NOT ENFORCED`` and ``ALTER TABLE ... ADD PRIMARY
    KEY`` declare the key ``tables.get`` answers (bqemulator's parser refused them).
``duplicate_job_id``
    a job inserted under an id already taken is refused (409 duplicate), not run again.
``schema_update``
    a column added by tables.update / patch is added to the table's storage too.
``schema_update_lag``
    AppendRows sees an added column a while later, refusing it until then (a setting).
``column_defaults``
    columns keep their DEFAULT; an append that asks for it gets it where it sends none.
``iam_permissions``
    ``tables.testIamPermissions`` answers the permissions asked about that the caller
    holds (``granted_permissions``, a setting below: every one by default).

The next ones enforce Storage Write API limits bqemulator lacks; ``buffered_flush`` and
``row_errors`` take one setting each from the same place (as ``iam_permissions`` above
does). Their values live in :mod:`onceover_tools.localbq.limits` (``WRITE_API_LIMITS``,
BigQuery's defaults), are read on every call, shortened by tests with
``limits.limited(...)`` and set for a separately launched local BigQuery by
``ONCEOVER_LOCALBQ_<FIELD>`` variables, read at install.

``row_errors``
    an append with rows that break a column's rules is refused whole, with ``row_errors``.
``change_data_capture``
    ``_CHANGE_TYPE`` (UPSERT / DELETE) proto rows on ``_default`` change a keyed table per
    key, ordered by ``_CHANGE_SEQUENCE_NUMBER``; what BigQuery refuses is refused.
``stream_lifetimes``
    streams expire as BigQuery's do (PENDING uncommitted, COMMITTED and BUFFERED idle).
``pending_buffer``
    a finalized PENDING stream's rows are kept 4 hours for a commit, then dropped.
``create_stream_quota``
    CreateWriteStream is refused over the project's quota (RESOURCE_EXHAUSTED).
``commit_stream_limit``
    one BatchCommitWriteStreams commits at most so many streams (INVALID_ARGUMENT).
``append_request_limit``
    AppendRows takes requests up to 20 MB and refuses larger ones in the stream.
``buffered_flush``
    FlushRows flushes up to and including its offset, once, and empties the buffer.
``storage_error_details``
    Write API errors carry the ``StorageError`` detail BigQuery gives them.
``missing_stream_answers``
    a missing stream can be answered in each shape real BigQuery uses (a setting).
``idle_connections``
    an AppendRows connection without a request for 10 minutes is closed with ABORTED.
``throughput_quota``
    appends over the project's throughput quota are refused while it refills.
``arrow_rows``
    a project can be set to refuse Arrow rows (INVALID_ARGUMENT), taking proto rows.
"""

from __future__ import annotations

import threading
from typing import Protocol

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches import (
    append_request_limit,
    append_rows_pool,
    arrow_rows,
    buffered_flush,
    change_data_capture,
    column_defaults,
    commit_stream_limit,
    create_stream_quota,
    ddl_primary_keys,
    duplicate_job_id,
    iam_permissions,
    idle_connections,
    keep_host_logging,
    linear_column_alignment,
    missing_dataset,
    missing_stream_answers,
    no_snapshot_per_write,
    one_duckdb_user_at_a_time,
    optional_spatial,
    pending_buffer,
    primary_keys,
    range_partitioning,
    record_columns,
    row_errors,
    schema_update,
    schema_update_lag,
    sticky_write_stream,
    storage_error_details,
    stream_already_committed,
    stream_lifetimes,
    stream_times,
    throughput_quota,
    wide_proto_rows,
)
from onceover_tools.localbq.patches.append_rows_pool import shutdown_pool
from onceover_tools.localbq.patches.wrapping import PINNED_VERSION, check_version

__all__ = ["PATCHES", "PINNED_VERSION", "check_version", "install", "name_of", "shutdown_pool"]


class Patch(Protocol):
    """A patch module: named as the launcher and the tests call it, applied by ``apply``."""

    __name__: str

    def apply(self) -> None: ...


PATCHES: tuple[Patch, ...] = (
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
    missing_dataset,  # around the lock: a refused CREATE TABLE releases it first
    range_partitioning,
    primary_keys,
    ddl_primary_keys,  # after primary_keys: DDL keys go to its store
    duplicate_job_id,
    schema_update,
    schema_update_lag,  # inside column_defaults: a refused writer schema fills nothing
    column_defaults,
    iam_permissions,  # a route added to the tables router, before the app is made
    row_errors,  # before stream_lifetimes: a gone stream answers NOT_FOUND first
    change_data_capture,  # around row_errors (it checks CDC rows itself), inside lifetimes
    stream_lifetimes,
    pending_buffer,
    create_stream_quota,
    commit_stream_limit,
    arrow_rows,  # inside the quota: a refused format takes no throughput
    throughput_quota,  # inside the request limit: a request too large is not counted
    append_request_limit,
    idle_connections,  # outside the request limit: it times the requests as they come
    buffered_flush,
    storage_error_details,  # sees the answers of the patches above
    missing_stream_answers,  # after it: reshapes its answer for a missing stream
)
"""Every patch, in the order :func:`install` applies them."""

_install_lock = threading.Lock()
_installed: list[str] = []


def name_of(patch: Patch) -> str:
    """The patch's name: its module's, as the launcher and the tests call it."""
    return patch.__name__.rpartition(".")[2]


def install() -> list[str]:
    """Apply every patch once per process and return their names.

    Raises :class:`LocalBigQueryVersionError` on any bqemulator other than
    :data:`PINNED_VERSION`.
    """
    check_version()
    with _install_lock:
        if not _installed:
            limits.apply_environment()  # ONCEOVER_LOCALBQ_<FIELD>; wrong values raise
            for patch in PATCHES:
                patch.apply()
                _installed.append(name_of(patch))
        return list(_installed)
