"""``onceover soak``: one streaming query for minutes or hours at a set rate, faults on a
clock, its processes sampled as it goes, then the verdict in BigQuery.

In order: :mod:`~onceover_tools.soak.shapes` (the load: Beam's four shapes by name, or
any), :mod:`~onceover_tools.soak.target` (where it writes: the local BigQuery behind the
gRPC fault proxy, or real BigQuery behind :mod:`~onceover_tools.soak.tunnel`, a CONNECT
proxy that breaks the Storage Write tunnel on cue), :mod:`~onceover_tools.soak.job`
(the user's query, ``onceover_jobs.examples.rate_stream``, started, killed, restarted,
stopped and drained),
:mod:`~onceover_tools.soak.faults` (one fault every ``--crash-every`` seconds, each
seen to fire), :mod:`~onceover_tools.soak.sampler` (what the processes, BigQuery, the
ledger, the spool and the control plane say, every few seconds),
:mod:`~onceover_tools.soak.verdict` (every key of the source once, the ledger adding up
to the table; flat memory, threads and connections; the streams' budget), then
:mod:`~onceover_tools.soak.report` and :mod:`~onceover_tools.soak.chart`;
:mod:`~onceover_tools.soak.run` puts them together.
"""
