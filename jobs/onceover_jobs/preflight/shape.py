"""Check 6: the job's shape against the Storage Write API's limits.

What each mode creates, from its traits (:mod:`onceover.modes`): a mode that is not
``slotted`` but creates streams (``pending``) creates one stream per partition per
batch; a slotted one (``buffered``, ``committed``) keeps a stream per partition across
batches, created once; ``default`` writes on the table's ``_default`` stream and creates
none. Every partition's task holds one AppendRows connection while it writes. Only a
mode published by ``BatchCommitWriteStreams`` (``pending``) has a commit to fit.

The limits ("Storage Write API quotas and limits"): CreateWriteStream, 10,000 streams per
hour per project and region (:mod:`onceover_jobs.sink.wire.stream_rate`); concurrent
connections, 5,000 in a region, 20,000 in the US or EU multi-region; pending bytes per
commit and streams per commit (:mod:`onceover_jobs.sink.wire.commit_limits`).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceover.modes import traits_of
from onceover_jobs.preflight.report import Check, fail, ok, warn
from onceover_jobs.sink.job.options import SinkOptions
from onceover_jobs.sink.wire.commit_limits import (
    MAX_STREAMS_PER_COMMIT,
    MULTI_REGIONS,
    commit_bytes_limit,
)
from onceover_jobs.sink.wire.stream_rate import CREATE_CALLS_PER_S_SLOW, CREATE_STREAMS_PER_HOUR

STREAMS = "stream creations"
CONNECTIONS = "connections"
COMMIT = "commit size"
REGIONAL_CONNECTIONS = 5_000
"""Concurrent AppendRows connections per project in a region."""
MULTI_REGION_CONNECTIONS = 20_000
"""... in the US or EU multi-region."""
CLOSE = 0.8
"""A figure past this share of its limit is a warning: a second job, a retry or a
replay on the same project takes the rest."""
HOUR_S = 3600.0
WIDE_ROW_BYTES = 10_000
"""Rows this large on average are unusual; a commit that fits only smaller rows warns."""


@dataclass(frozen=True)
class JobShape:
    """How the job writes, as its owner says (None: not given, not checked)."""

    partitions: int | None = None
    """Partitions of each write or micro-batch (each a task, a stream, a connection)."""
    trigger_s: float | None = None
    """A streaming query's trigger interval; None: one batch."""
    rows_per_batch: int | None = None
    """Rows of one write or micro-batch, all partitions together."""


def check_shape(options: SinkOptions, shape: JobShape, location: str | None) -> list[Check]:
    return [
        _stream_creations(options, shape),
        _connections(options, shape, location),
        _commit_size(options, shape, location),
    ]


def _stream_creations(options: SinkOptions, shape: JobShape) -> Check:
    traits = traits_of(options.mode)
    if not traits.creates_streams:
        return ok(STREAMS, f"mode {options.mode} writes on the _default stream: none created")
    if shape.partitions is None:
        return ok(STREAMS, "not checked: give --partitions")
    n = shape.partitions
    if traits.slotted:
        per_hour = float(n)  # in the first hour; none after
        figures = (
            f"mode {options.mode} keeps a stream per partition across batches: {n:,} made once"
        )
        fix = f"fewer partitions (df.coalesce({CREATE_STREAMS_PER_HOUR:,}) or fewer)"
    else:
        made = f"mode {options.mode} creates one stream per partition per batch ({n:,})"
        per_hour = float(n) if shape.trigger_s is None else n * HOUR_S / shape.trigger_s
        every = "one batch" if shape.trigger_s is None else f"a batch every {shape.trigger_s:g} s"
        figures = f"{made}, {every}: {per_hour:,.0f} an hour"
        shortest = n * HOUR_S / CREATE_STREAMS_PER_HOUR
        fix = (
            "mode=buffered (writeStream's default: a stream per partition kept across "
            f"batches), or fewer partitions, or a trigger of at least {shortest:,.0f} s for "
            f"{n:,} partitions"
        )
    figures += f", against the {CREATE_STREAMS_PER_HOUR:,} per hour per project and region"
    if per_hour > CREATE_STREAMS_PER_HOUR:
        return fail(STREAMS, figures, fix)
    notes = []
    if per_hour > CLOSE * CREATE_STREAMS_PER_HOUR:
        notes.append("another job or a replay on the project takes the rest")
    if n > CREATE_CALLS_PER_S_SLOW:
        notes.append(
            f"{n:,} made at once: past {CREATE_CALLS_PER_S_SLOW} a second BigQuery's answers "
            "slow past 25 s"
        )
    if notes:
        return warn(STREAMS, f"{figures}; {'; '.join(notes)}", fix)
    return ok(STREAMS, figures)


def _connections(options: SinkOptions, shape: JobShape, location: str | None) -> Check:
    if shape.partitions is None:
        return ok(CONNECTIONS, "not checked: give --partitions")
    multi = location is not None and location.upper() in MULTI_REGIONS
    limit = MULTI_REGION_CONNECTIONS if multi else REGIONAL_CONNECTIONS
    where = f"the {location} multi-region" if multi else f"a region ({location or 'unknown'})"
    figures = (
        f"{shape.partitions:,} partitions write at once, one AppendRows connection each, "
        f"against {limit:,} per project in {where}"
    )
    fix = f"fewer partitions (df.coalesce({int(limit * CLOSE):,})) or fewer executor cores"
    if shape.partitions > limit:
        return fail(CONNECTIONS, figures, fix)
    if shape.partitions > CLOSE * limit:
        return warn(CONNECTIONS, figures + "; other jobs of the project share them", fix)
    return ok(CONNECTIONS, figures)


def _commit_size(options: SinkOptions, shape: JobShape, location: str | None) -> Check:
    traits = traits_of(options.mode)
    if traits.publish != "batch_commit":
        return ok(COMMIT, f"mode {options.mode} publishes without BatchCommitWriteStreams: "
                          "no commit to fit")  # fmt: skip
    if shape.partitions is not None and shape.partitions > MAX_STREAMS_PER_COMMIT:
        return fail(
            COMMIT,
            f"{shape.partitions:,} partitions are {shape.partitions:,} streams in one commit, "
            f"more than the {MAX_STREAMS_PER_COMMIT:,} one BatchCommitWriteStreams takes",
            f"df.coalesce({MAX_STREAMS_PER_COMMIT:,}) or fewer, or mode=committed",
        )
    if shape.rows_per_batch is None:
        return ok(COMMIT, "bytes not checked: give --rows-per-batch")
    limit = commit_bytes_limit(location)
    widest = limit // shape.rows_per_batch
    figures = (
        f"{shape.rows_per_batch:,} rows a batch fit the {limit / 10**12:g} TB one commit takes "
        f"in {location or 'a region'} while rows average under {widest:,} bytes"
    )
    fix = "smaller batches (maxFilesPerTrigger, or one write per slice), or mode=buffered"
    if widest < 1:
        return fail(COMMIT, figures, fix)
    if widest < WIDE_ROW_BYTES:
        return warn(COMMIT, figures, fix)
    return ok(COMMIT, figures)
