"""Events as jobs send them, built with the shared schema (so a schema change breaks here)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from onceover import events as ev
from onceover.modes import traits_of

TABLE = "onceover-local.ds.orders"
T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _common(run: str, kind: str, t: float, *facts: object) -> dict[str, Any]:
    return {"id": ev.event_id(run, kind, *facts), "time": at(t), "run_id": run, "table": TABLE,
            "job": "orders"}  # fmt: skip


def started(run: str, attempt: str, t: float, mode: ev.Mode = "pending") -> ev.RunStarted:
    spec = ev.JobSpec(
        module="onceover_jobs.load_files", args=["--table", TABLE], checkpoint="/tmp/c"
    )
    return ev.RunStarted(
        attempt_id=attempt, mode=mode, spec=spec, **_common(run, "started", t, attempt)
    )


def heartbeat(run: str, attempt: str, t: float, rows: int = 0) -> ev.RunHeartbeat:
    return ev.RunHeartbeat(
        attempt_id=attempt,
        rows_committed=rows,
        batches_committed=0,
        **_common(run, "beat", t, attempt),
    )


def finished(run: str, attempt: str, t: float, rows: int) -> ev.RunFinished:
    return ev.RunFinished(
        attempt_id=attempt,
        rows_committed=rows,
        batches_committed=1,
        **_common(run, "finished", t, attempt),
    )


def failed(run: str, attempt: str, t: float, error: str = "boom") -> ev.RunFailed:
    return ev.RunFailed(attempt_id=attempt, error=error, **_common(run, "failed", t, attempt))


def _streams(names: list[str], rows: int) -> list[ev.StreamRows]:
    return [ev.StreamRows(stream=name, rows=rows, partition=i) for i, name in enumerate(names)]


def _set_aside(rows: int, table: str | None, streams: Sequence[str]) -> dict[str, Any]:
    """A batch's dead-letter fields: ``rows`` set aside in ``table`` on ``streams``."""
    return {
        "dead_lettered_rows": rows,
        "dead_letter_table": table,
        "dead_letter_streams": [
            ev.StreamRows(stream=name, rows=rows // len(streams), partition=i)
            for i, name in enumerate(streams)
        ],
    }


def intent(
    run: str, batch: int, t: float, streams: list[str], rows: int, *,
    dead_lettered: int = 0, dead_letter_table: str | None = None,
    dead_letter_streams: Sequence[str] = (),
) -> ev.BatchIntent:  # fmt: skip
    return ev.BatchIntent(
        mode="pending",
        query_id="q1",
        batch_id=batch,
        streams=_streams(streams, rows),
        expected_rows=rows * len(streams),
        **_set_aside(dead_lettered, dead_letter_table, dead_letter_streams),
        **_common(run, "intent", t, batch),
    )


def committed(
    run: str, batch: int, t: float, streams: list[str], rows: int, *, resolved: bool = False,
    dead_lettered: int = 0, dead_letter_table: str | None = None,
    dead_letter_streams: Sequence[str] = (),
) -> ev.BatchCommitted:  # fmt: skip
    """``rows`` per stream committed to the target table; ``dead_lettered`` rows set aside
    in ``dead_letter_table`` on ``dead_letter_streams`` (not in ``rows``)."""
    return ev.BatchCommitted(
        mode="pending",
        query_id="q1",
        batch_id=batch,
        streams=_streams(streams, rows),
        rows=rows * len(streams),
        resolved=resolved,
        **_set_aside(dead_lettered, dead_letter_table, dead_letter_streams),
        **_common(run, "committed", t, batch, resolved),
    )


def skipped(run: str, batch: int, t: float, orphaned: list[str]) -> ev.BatchSkippedDuplicate:
    return ev.BatchSkippedDuplicate(
        mode="pending",
        query_id="q1",
        batch_id=batch,
        rows=0,
        orphaned_streams=orphaned,
        **_common(run, "skipped", t, batch),
    )


def _stream(run: str, kind: str, t: float, stream: str, *facts: object) -> dict[str, Any]:
    return {
        **_common(run, kind, t, stream, *facts),
        "mode": "pending",
        "query_id": "q1",
        "batch_id": 0,
        "partition": 0,
        "attempt": 0,
        "stream": stream,
        "stream_type": "PENDING",
    }


def created(run: str, stream: str, t: float) -> ev.StreamCreated:
    return ev.StreamCreated(**_stream(run, "created", t, stream))


def acked(run: str, stream: str, t: float, offset: int, rows: int) -> ev.AppendAcknowledged:
    return ev.AppendAcknowledged(
        offset=offset,
        rows=rows,
        bytes=rows * 10,
        latency_ms=5.0,
        **_stream(run, "acked", t, stream, offset),
    )


def already_exists(
    run: str, stream: str, t: float, offset: int, rows: int
) -> ev.AppendAlreadyExists:
    return ev.AppendAlreadyExists(
        offset=offset, rows=rows, **_stream(run, "exists", t, stream, offset)
    )


def out_of_range(run: str, stream: str, t: float, offset: int) -> ev.AppendOutOfRange:
    return ev.AppendOutOfRange(
        offset=offset, rows=1, message="gap", **_stream(run, "oor", t, stream, offset)
    )


def append_error(run: str, stream: str, t: float, code: str, tried: int = 0) -> ev.AppendError:
    """``tried``: which try of the request this answers (each is an event of its own)."""
    facts = (code, tried) if tried else (code,)
    return ev.AppendError(
        code=code,
        offset=0,
        rows=1,
        retrying=True,
        message="try again",
        **_stream(run, "error", t, stream, *facts),
    )


THROTTLE_MESSAGE = (
    "Exceeds 'AppendRows throughput' quota, user_id: project000000_us (status: "
    "INSUFFICIENT_TOKENS), you can issue a raise quota request through Google Cloud Console."
)
"""BigQuery's refusal of an append by the throughput quota (Apache Beam PR #25073)."""


def throttled(run: str, stream: str, t: float, offset: int) -> ev.AppendThrottled:
    return ev.AppendThrottled(
        offset=offset,
        rows=10,
        message=THROTTLE_MESSAGE,
        wait_limit_s=900,
        **_stream(run, "throttled", t, stream, offset),
    )


def format_refused(run: str, stream: str, t: float) -> ev.AppendFormatRefused:
    return ev.AppendFormatRefused(
        message="Arrow format is not supported for this project.",
        **_stream(run, "format_refused", t, stream),
    )


def rejected(
    run: str, stream: str, t: float, offset: int,
    samples: Sequence[tuple[int, str | None, str, str]],
    *, dead_letter_table: str | None, attempt: int = 0, partition: int = 0,
) -> ev.RowsRejected:  # fmt: skip
    """A request of ``len(samples)`` rows at stream ``offset`` refused: each sample is
    (row offset in the partition, key, column, reason)."""
    return ev.RowsRejected(
        offset=offset,
        rows=len(samples),
        dead_letter_table=dead_letter_table,
        samples=[
            ev.RowRejection(offset=row, key=key, column=column, reason=reason)
            for row, key, column, reason in samples
        ],
        **{**_stream(run, "rejected", t, stream, offset, attempt), "attempt": attempt,
           "partition": partition},
    )  # fmt: skip


def finalized(run: str, stream: str, t: float, rows: int) -> ev.StreamFinalized:
    return ev.StreamFinalized(row_count=rows, **_stream(run, "finalized", t, stream))


def orphaned(run: str, stream: str, t: float) -> ev.StreamOrphaned:
    return ev.StreamOrphaned(reason="replay", **_stream(run, "orphaned", t, stream))


def as_json(events: Sequence[BaseModel]) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json") for event in events]


def full_run(run: str, attempt: str = "a1", rows: int = 100) -> list[ev.Event]:
    """One attempt that appends two streams (one retry deduplicated), commits, finishes."""
    s1, s2 = f"{run}/s1", f"{run}/s2"
    half = rows // 2
    return [
        started(run, attempt, 0),
        created(run, s1, 1),
        created(run, s2, 1),
        acked(run, s1, 2, 0, half),
        already_exists(run, s1, 3, 0, half),
        acked(run, s2, 2, 0, half),
        finalized(run, s1, 4, half),
        finalized(run, s2, 4, half),
        intent(run, 0, 5, [s1, s2], half),
        committed(run, 0, 6, [s1, s2], half),
        finished(run, attempt, 7, rows),
    ]


_Shaped = TypeVar("_Shaped", bound=BaseModel)


def in_mode(event: _Shaped, mode: ev.Mode, **update: Any) -> _Shaped:
    """``event`` in another mode (stream events on that mode's stream type), validated."""
    fields = event.model_dump() | {"mode": mode}
    if isinstance(event, ev.StreamEvent):
        fields["stream_type"] = traits_of(mode).stream_type
    return type(event).model_validate(fields | update)


def buffered_run(run: str, attempt: str = "a1", rows: int = 20) -> list[ev.Event]:
    """A streaming query in buffered mode: two partitions, each appending ``rows`` rows a
    micro-batch to one BUFFERED stream it keeps across batches 0 and 1; each batch is
    intended, flushed (no event of its own) and committed; then the run finishes."""
    streams = [f"{run}/p0", f"{run}/p1"]
    events: list[ev.Event] = [started(run, attempt, 0, mode="buffered")]
    events += [in_mode(created(run, s, 1), "buffered", partition=p) for p, s in enumerate(streams)]
    for batch in (0, 1):
        t = 2 + 3 * batch
        events += [
            in_mode(acked(run, s, t, batch * rows, rows), "buffered", partition=p, batch_id=batch)
            for p, s in enumerate(streams)
        ]
        events.append(in_mode(intent(run, batch, t + 1, streams, rows), "buffered"))
        events.append(in_mode(committed(run, batch, t + 2, streams, rows), "buffered"))
    events.append(finished(run, attempt, 10, 2 * len(streams) * rows))
    return events


# -- mode("overwrite") --------------------------------------------------------------

STAGING = "onceover-local.ds._onceover_staging_orders_0123456789abcdef"
"""Where an overwrite of TABLE stages its rows (its streams' table)."""
OVERWRITE_WRITE = "id-orders"


def staging_stream(name: str) -> str:
    project, dataset, table = STAGING.split(".")
    return f"projects/{project}/datasets/{dataset}/tables/{table}/streams/{name}"


def _overwrite_batch(run: str, kind: str, t: float, *facts: object) -> dict[str, Any]:
    return {"mode": "pending", "query_id": run, "batch_id": None, "write": OVERWRITE_WRITE,
            **_common(run, kind, t, *facts)}  # fmt: skip


def swap(
    run: str, t: float, *, done: bool = False, attempt: int = 0, rows: int = 100,
    replaced: int = 40, partitions: Sequence[str] | None = None,
) -> ev.OverwriteSwapStarted | ev.OverwriteSwapped:  # fmt: skip
    """An overwrite's swap asked for (``done``: done) under attempt ``attempt``'s job."""
    fields: dict[str, Any] = {
        "staging": STAGING,
        "scope": "every row of the table"
        if partitions is None
        else "the rows of the partitions (by day) the new rows fall in",
        "job_id": f"onceover_overwrite_{run}_{attempt}",
        "attempt": attempt,
        "staged_rows": rows,
        "rows_replaced": replaced,
        "partitions": None if partitions is None else list(partitions),
        "partition_count": None if partitions is None else len(partitions),
    }
    if done:
        return ev.OverwriteSwapped(
            swapped_at=at(t), **fields, **_overwrite_batch(run, "swapped", t, attempt)
        )
    return ev.OverwriteSwapStarted(**fields, **_overwrite_batch(run, "swap", t, attempt))


def overwrite_run(
    run: str, stop: str, *, rows: int = 100, partitions: Sequence[str] | None = None
) -> list[ev.Event]:
    """A batch run's ``mode("overwrite")`` of TABLE: ``rows`` staged on two streams, then
    swapped; ``stop``: the step it stopped at (``staging``, ``staged``, ``swap_asked``), the
    run failing there, or ``swapped`` (the run finishes)."""
    streams = [staging_stream(f"{run}-s{i}") for i in range(2)]
    half = ev.StreamRows
    staged = [half(stream=s, rows=rows // 2, partition=i) for i, s in enumerate(streams)]
    events: list[ev.Event] = [
        started(run, "a1", 0),
        ev.BatchIntent(streams=staged, expected_rows=rows, **_overwrite_batch(run, "intent", 1)),
    ]
    if stop != "staging":
        events.append(
            ev.BatchCommitted(streams=staged, rows=rows, **_overwrite_batch(run, "committed", 2))
        )
    if stop in ("swap_asked", "swapped"):
        events.append(swap(run, 3, rows=rows, partitions=partitions))
    if stop == "swapped":
        events += [swap(run, 4, done=True, rows=rows, partitions=partitions),
                   finished(run, "a1", 5, rows)]  # fmt: skip
    else:
        events.append(failed(run, "a1", 5, f"stopped at {stop}"))
    return events
