"""The BigQuery Storage Write API as the sink speaks it, and nothing of the sink's own.

:mod:`.retry` (which failures are retried, and the backoff) → :mod:`.storage_errors` (the
``StorageError`` detail of an answer) → :mod:`.requests` (rows cut into requests under the
request cap: invariant 2) → :mod:`.appender` (one stream's appends with explicit offsets:
invariant 1) → :mod:`.unary` (every other call under the same retry rules) and the calls
built on it: :mod:`.stream_calls` (finalize, look up), :mod:`.flush` (FlushRows to a
batch's end), :mod:`.batch_commit` (BatchCommitWriteStreams and its commit time);
:mod:`.commit_limits` and :mod:`.stream_rate` are real BigQuery's limits;
:mod:`.write_api` and :mod:`.messages` the client and its hand-encoded messages.
"""
