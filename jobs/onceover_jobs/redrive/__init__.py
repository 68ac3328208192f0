"""Re-drive: a run's set-aside rows sent to their table again, once, after the cause is fixed.

A write with ``dead_letter`` sets aside the rows BigQuery refuses (a value too long for
its column, a NULL in a REQUIRED one, ...) in the dead-letter table, each with its run,
batch, partition, offset and the row as JSON. Once the cause is fixed (the column widened,
the row's value corrected in the dead-letter table), ``onceover redrive <run>`` sends them:

1. ``selection``: the run's set-aside rows (and those its earlier re-drives set aside
   again) that no committed re-drive took, recorded in the ledger as the re-drive's own
   (``redrives/<run>/<n>.json``) before a row is sent; a re-drive that did not finish is
   finished first, with the rows it recorded;
2. ``rows``: each row read back from its JSON into the table's types;
3. ``run``: written with the sink (``format("onceover")``, pending mode) under the
   re-drive's own run id, ``<run>:redrive-<n>``, one write per table: exactly once, as
   any write; rows BigQuery still refuses are set aside again under that run id, with
   the new reason, for a later re-drive.

So a re-drive run twice sends nothing twice: the second finds every row taken by the
first (or finishes the first). Entry point: ``python -m onceover_jobs.redrive``, and
``onceover redrive``.
"""
