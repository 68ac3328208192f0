"""What the driver decides once and ships to every task, and what tasks send back.

:mod:`.options` (the data source's options, checked on the driver into one typed value) →
:mod:`.lineage_config` (where OpenLineage events go) → :mod:`.sink_job` (the job: options,
connection, plan and the write's identity) → :mod:`.results` (a task's answer, unpickled
by the driver's commit worker, so it imports nothing heavy).
"""
