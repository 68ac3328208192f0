"""What the sink tells others, never on the write path's account: events for the control
plane (:mod:`.telemetry`, sent through :mod:`onceover_jobs.outbox`), the run's own events
(:mod:`.run_report`) and OpenLineage run events (:mod:`.lineage`). Nothing here raises into
a write.
"""
