"""What Onceover keeps inside a Spark checkpoint directory: the one spelling of it that
the sink, the jobs and their readers (the control plane's resume and reconciliation,
``onceover demo``, ``onceover chaos``) share.

::

    <checkpointLocation>/            Spark's own (offsets/, commits/, metadata, ...)
    <checkpointLocation>/onceover/   the sink's ledger for the streaming query
                                     (onceover_jobs.sink.ledger.records)
    <checkpointLocation>/onceover/run_id
                                     the run id ``onceover_jobs.load_files`` chose on its first
                                     launch, so a re-run or resume goes on as that run
"""

from __future__ import annotations

import os
from pathlib import Path

from onceover.ledger_store import under

LEDGER_DIR = "onceover"
RUN_ID_FILE = "run_id"


def ledger_root(checkpoint: str | os.PathLike[str]) -> str:
    """The streaming sink's ledger inside ``checkpoint``: a path under a path, a URL under
    a URL (``gs://bucket/checkpoints/q1`` keeps it in ``gs://bucket/checkpoints/q1/onceover``)."""
    return under(checkpoint, LEDGER_DIR)


def run_id_path(checkpoint: str | os.PathLike[str]) -> Path:
    """The file holding the run id of the job on ``checkpoint`` (``onceover_jobs.load_files``
    keeps its checkpoint on a disk)."""
    return Path(ledger_root(checkpoint)) / RUN_ID_FILE
