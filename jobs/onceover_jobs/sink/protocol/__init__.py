"""The exactly-once protocol, top to bottom: a task's first phase (:mod:`.task`: which
write it belongs to, :mod:`.resolve`; already committed?; the mode writes the partition),
then the driver's second (:mod:`.committer`: ledger intent → the mode publishes → ledger
mark; a replay settles what it finds), and for ``mode("overwrite")`` the swap after it
(:mod:`.overwrite`). What differs between modes is each mode's own
(:mod:`onceover_jobs.sink.modes`).
"""
