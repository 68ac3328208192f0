"""Re-drive: a run's set-aside rows sent to their table again, launched by an operator.

The job (``python -m onceover_jobs.redrive``) does the exactly-once part: it reads the
run's set-aside rows (and those its re-drives set aside again) from the dead-letter
table, records the re-drive in the run's ledger before a row is sent, and writes them
with the sink under the re-drive's own run id, ``<run>:redrive-<n>``. The control plane
(:mod:`.redriver`) plans it and starts it through the launch machinery
(:mod:`onceover_backend.services.launch.launcher`), on the rules of :mod:`.rules`; its
events arrive as any run's, and :mod:`onceover_backend.services.reads.redrives` counts
them for the run page and reconciliation.
"""
