"""Reconciliation: what the control plane recorded as committed against what BigQuery holds.

Expected rows are the rows of the committed batches the run (or every run of a table)
reported (:mod:`.expected`); actual rows are counted in BigQuery (:mod:`.bigquery_counts`).
Counts alone hide a lost row paired with a duplicated one, so with a key column the
check also compares distinct keys and looks for keys held more than once
(:mod:`.comparison`).

Rows BigQuery refused and the sink set aside in a dead-letter table are expected but set
aside, never missing: the batches' ``rows`` (the expected rows) count the target table's
rows only, and their ``dead_lettered_rows`` are reported apart, as ``rows_set_aside``, and
compared with the run's rows counted in the dead-letter table (its ``run_id`` column, and
its ``table`` column when it has one).

A stamped run with a key whose committed batches all carry a key tally is checked by
receipt (:mod:`.receipt_check`): each batch's rows and key checksum against its receipt in
one query, and a differing batch's duplicated, missing and unexpected keys found by
key-hash bucket, in at most three queries whatever the table's size. Any other run is
checked by counts, as before tallies.

Each check is stored whole, once it has ended (``ok``, ``mismatch``, or ``error`` with the
reason BigQuery could not answer; :mod:`.runner`); a check that cannot start (an unknown
run, a table no run wrote) raises :class:`~onceover_backend.errors.NotFoundError` and
stores nothing. A run that succeeds is checked on threads of its own (:mod:`.automatic`);
:mod:`.reads` shows the stored checks.
"""
