"""The sink's write modes: what both planes and the tools agree a mode is.

=============  ===============  =====================================================
mode           stream type      rows become visible
=============  ===============  =====================================================
``pending``    ``PENDING``      at the batch's ``BatchCommitWriteStreams``, all at once
``buffered``   ``BUFFERED``     when the driver flushes each stream to the batch's end
``committed``  ``COMMITTED``    at each append
``default``    ``DEFAULT``      at each append to ``_default`` (at least once)
=============  ===============  =====================================================

A mode's behaviour is decided here, once, as its :class:`ModeTraits`; everyone else asks
:func:`traits_of` (or, in the sink, the mode's own class in
``onceover_jobs.sink.modes``) and never compares a mode's name. A test pins that
(``tests/project/test_layout.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mode = Literal["pending", "buffered", "committed", "default"]
StreamType = Literal["PENDING", "BUFFERED", "COMMITTED", "DEFAULT"]
Publish = Literal["batch_commit", "flush", "none"]
"""How the driver makes a batch's rows visible once its intent is written:
``BatchCommitWriteStreams`` of the batch's streams (atomic per table), ``FlushRows`` on
each stream to the batch's last row (one call per stream), or nothing (visible already)."""
Settle = Literal["commit_time", "flush_again", "as_appended"]
"""How an intent found without its mark is settled: ask BigQuery each stream's
``commit_time`` (commit the intent's own streams if none is set), flush every stream to
the batch's end again (a flush to an offset already flushed publishes nothing), or record
it committed (its rows became visible as they were appended)."""

_SETTLE_OF: dict[Publish, Settle] = {
    "batch_commit": "commit_time",
    "flush": "flush_again",
    "none": "as_appended",
}


@dataclass(frozen=True)
class ModeTraits:
    """What a mode is, for everyone who must know: the sink, the control plane, the tools."""

    mode: Mode
    stream_type: StreamType
    """The Storage Write API stream type the mode writes on."""
    exactly_once: bool
    """Every append carries its offset and the batch is published once whatever fails;
    ``default`` (no offsets, at least once) is the baseline to compare against."""
    slotted: bool
    """A partition keeps its stream from batch to batch (``onceover_jobs.sink.ledger.slots``),
    so stream creation does not grow with the number of micro-batches. Otherwise each task
    attempt writes on a stream of its own (or on ``_default``)."""
    visible_before_commit: bool
    """Rows are readable in the table as each append is acknowledged, before the driver
    commits the batch; a replay then must send exactly the rows an earlier attempt sent."""
    publish: Publish

    @property
    def settle(self) -> Settle:
        """How a replay settles an intent of this mode; it follows from how the batch was
        to be published."""
        return _SETTLE_OF[self.publish]

    @property
    def publish_is_atomic(self) -> bool:
        """Whether publishing makes all of a batch's partitions visible at once (one
        ``BatchCommitWriteStreams``). A flush is one call per stream: a crash between two
        leaves some partitions visible and the rest not yet, until a replay flushes them."""
        return self.publish == "batch_commit"

    @property
    def creates_streams(self) -> bool:
        """Whether the mode calls ``CreateWriteStream`` (``default`` writes on the table's
        ``_default`` stream)."""
        return self.stream_type != "DEFAULT"

    @property
    def uncommitted_rows_may_show(self) -> bool:
        """Whether a batch not recorded committed can still have rows in the table: rows
        visible per append, or a publish of one call per stream that a crash cut short."""
        return self.visible_before_commit or (self.publish != "none" and not self.publish_is_atomic)


TRAITS: dict[Mode, ModeTraits] = {
    traits.mode: traits
    for traits in (
        ModeTraits(
            mode="pending",
            stream_type="PENDING",
            exactly_once=True,
            slotted=False,
            visible_before_commit=False,
            publish="batch_commit",
        ),
        ModeTraits(
            mode="buffered",
            stream_type="BUFFERED",
            exactly_once=True,
            slotted=True,
            visible_before_commit=False,
            publish="flush",
        ),
        ModeTraits(
            mode="committed",
            stream_type="COMMITTED",
            exactly_once=True,
            slotted=True,
            visible_before_commit=True,
            publish="none",
        ),
        ModeTraits(
            mode="default",
            stream_type="DEFAULT",
            exactly_once=False,
            slotted=False,
            visible_before_commit=True,
            publish="none",
        ),
    )
}
"""Every mode's traits, in the order the docs list the modes."""

MODES: tuple[Mode, ...] = tuple(TRAITS)
EXACTLY_ONCE_MODES: tuple[Mode, ...] = tuple(m for m, t in TRAITS.items() if t.exactly_once)
"""The modes that write each row once whatever fails (``default`` is the baseline)."""
AT_LEAST_ONCE_MODE: Mode = next(m for m, t in TRAITS.items() if not t.exactly_once)
"""The at-least-once baseline: what the spark-bigquery-connector's
``writeAtLeastOnce=true`` asks for."""
STREAMING_DEFAULT_MODE: Mode = "buffered"
"""``writeStream``'s mode when none is given."""
BATCH_DEFAULT_MODE: Mode = "pending"
"""Every other write's mode when none is given (``df.write``, inside ``foreachBatch`` too)."""


def traits_of(mode: str) -> ModeTraits:
    """The traits of ``mode``; a ``ValueError`` naming the modes for any other name (a
    ledger record or an event written by a newer sink, say)."""
    try:
        return TRAITS[mode]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown write mode {mode!r}; the modes are {', '.join(MODES)}") from None
