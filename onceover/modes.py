"""The sink's write modes: what both planes and the tools agree a mode is.

=============  ===============  =====================================================
mode           stream type      rows become visible
=============  ===============  =====================================================
``pending``    ``PENDING``      at the batch's ``BatchCommitWriteStreams``, all at once
``buffered``   ``BUFFERED``     when the driver flushes each stream to the batch's end
``committed``  ``COMMITTED``    at each append
``default``    ``DEFAULT``      at each append to ``_default`` (at least once)
=============  ===============  =====================================================
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["pending", "buffered", "committed", "default"]
StreamType = Literal["PENDING", "BUFFERED", "COMMITTED", "DEFAULT"]

MODES: tuple[Mode, ...] = ("pending", "buffered", "committed", "default")
EXACTLY_ONCE_MODES: tuple[Mode, ...] = ("pending", "buffered", "committed")
"""The modes that write each row once whatever fails (``default`` is the baseline)."""
STREAMING_DEFAULT_MODE: Mode = "buffered"
"""``writeStream``'s mode when none is given; every other write's is ``pending``."""
STREAM_TYPES: dict[Mode, StreamType] = {
    "pending": "PENDING",
    "buffered": "BUFFERED",
    "committed": "COMMITTED",
    "default": "DEFAULT",
}
"""The Storage Write API stream type each mode writes on."""
SLOTTED_MODES: frozenset[Mode] = frozenset({"buffered", "committed"})
"""Modes whose partitions keep a stream from batch to batch (onceover_jobs.sink.stream_slots)."""
UNSEEN_UNTIL_COMMIT: frozenset[Mode] = frozenset({"pending", "buffered"})
"""Modes whose rows nobody sees before the batch's commit: a replay's extra streams are
orphans, never part of the table."""
