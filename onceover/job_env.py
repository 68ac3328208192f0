"""Environment variables a job reads and whoever starts it sets: the contract between
the jobs (:mod:`onceover_jobs.load_files`) and their launchers (the control plane's resume,
``onceover demo``, the tests)."""

MONITOR_URL_ENV = "ONCEOVER_MONITOR_URL"
"""The control plane the job posts its events to."""
MONITOR_TOKEN_ENV = "ONCEOVER_MONITOR_TOKEN"  # noqa: S105 (a name)
"""An ingest token for it."""
ATTEMPT_ID_ENV = "ONCEOVER_ATTEMPT_ID"
"""The attempt id the control plane recorded for a launch it made (a resume): the job's
run events carry it, so they update that attempt rather than a new one."""
SPARK_MASTER_ENV = "ONCEOVER_SPARK_MASTER"
"""The Spark master, when the job's arguments name none."""

EXIT_REFUSED = 3
"""The exit status of a job refused because another driver still runs the same query
(checkpoint) or run id: it wrote nothing, and a retry is refused the same way until that
driver stops. Its ``run_failed`` event says ``refused``."""
