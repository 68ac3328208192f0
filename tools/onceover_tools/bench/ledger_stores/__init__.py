"""The object requests a user's streaming query makes of its ledger in a bucket, per mode
and store, their latency, and what they cost an hour at list price.

    .venv/bin/python -m onceover_tools.bench.ledger_stores [--batches 60]
        [--stores s3,gcs[,posix]] [--modes pending,buffered,committed,default] [--out DIR]

The query is a user's, as the stream economy's (:mod:`onceover_tools.bench.stream_economy`):
JSON files read with ``maxFilesPerTrigger=1``, ``repartition(8, "event_id")``, a 1-second
``processingTime`` trigger, ``writeStream.format("onceover")``; its ``ledger`` option a
bucket on the S3 stand-in or on the Cloud Storage stand-in
(:mod:`onceover_tools.localstores`), its checkpoint on the disk (Spark itself writes a
checkpoint in a bucket only through Hadoop's connectors, which this bench's Spark does
not ship). ``posix`` (when asked for): the ledger on the disk beside the checkpoint, the
reference.

1. **Counted at the server**: a counting reverse proxy (:mod:`~.proxy`) in front of each
   stand-in, the endpoint variable every client reads pointed at it before Spark starts,
   so the driver and every Python worker go through it. Each request is classified as
   the store's API names it (:mod:`~.api`) and timed upstream.
2. **Per micro-batch**: one query at a time, a bucket of its own; a file is put in only
   once Spark reported the batch before it, so each batch's requests are those the proxy
   forwarded between two reports, by kind, and their latency, p50 and p95 per kind.
3. **Flat in the batches stored**: requests per batch over the first steady batches and
   over the last (:data:`~.plan.WINDOW` each), and the ratio; target at most
   :data:`~.plan.FLAT_TARGET`. A count that grows with the ledger is shown growing.
4. **Per hour and cost**: 3,600 micro-batches an hour at the last window's count, by
   price tier, and the dollars an hour and a month at list price (:mod:`~.prices`).

Every query's rows are counted in BigQuery (``COUNT(*)``, ``COUNT(DISTINCT event_id)``)
before its figures are kept. Exits 1 only when a figure could not be taken.

The parts: :mod:`~.plan` (defaults), :mod:`~.api` and :mod:`~.proxy` (the counting),
:mod:`~.prices`, :mod:`~.measure` (the run, in this process or a fresh one),
:mod:`~.figures` and :mod:`~.report`; the Spark session, the table and the files are the
stream economy's (:mod:`onceover_tools.bench.stream_economy.session`).
"""

from __future__ import annotations

from onceover_tools.bench.ledger_stores.figures import LedgerQuery, LedgerStores
from onceover_tools.bench.ledger_stores.measure import measure, measure_in_child
from onceover_tools.bench.ledger_stores.plan import (
    BATCHES,
    DEFAULT_STORES,
    MODES,
    QUICK_BATCHES,
    STORES,
)
from onceover_tools.bench.ledger_stores.report import goals, section

__all__ = [
    "BATCHES",
    "DEFAULT_STORES",
    "MODES",
    "QUICK_BATCHES",
    "STORES",
    "LedgerQuery",
    "LedgerStores",
    "goals",
    "measure",
    "measure_in_child",
    "section",
]
