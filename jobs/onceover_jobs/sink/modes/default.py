"""``default``: the table's ``_default`` stream, without offsets: at least once. The
baseline the exactly-once modes are measured against. A re-send after an ambiguous
failure (a lost answer, a broken connection) may add the same rows twice; nothing is
published at the end of a batch (rows are visible per append), and a replay that finds
an intent records it committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from onceover.modes import TRAITS
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.modes.base import VisibleAsAppended

if TYPE_CHECKING:
    import pyarrow as pa

    from onceover_jobs.sink.modes.staging import Stage


class DefaultMode(VisibleAsAppended):
    traits = TRAITS["default"]

    def write(self, stage: Stage, batches: Iterator[pa.RecordBatch]) -> TaskResult:
        from onceover_jobs.sink.modes.staging import encoder_for

        job, task, kind = stage.job, stage.task, self.traits.stream_type
        stream = f"{job.parent}/streams/_default"
        events = stage.events(stream, kind)
        encoder = encoder_for(job)
        refusals = stage.refusals(encoder, events)
        appender = stage.appender(stream, encoder=encoder, events=events, refusals=refusals)
        try:
            rows = stage.append_all(appender, batches, encoder, offsets=False)
            rows -= appender.rows_refused
        finally:
            appender.close()
        dead_letters = stage.dead_letters(refusals)
        return TaskResult(
            stream, kind, rows, appender.bytes_acknowledged, task.partition, task.attempt,
            dead_letters=dead_letters,
        )  # fmt: skip
