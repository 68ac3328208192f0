"""The Onceover data plane: Spark jobs that load BigQuery, the exactly-once sink
(:mod:`onceover_jobs.sink`), and the durable outbox its events and every job's go
through (:mod:`onceover_jobs.outbox`), which knows nothing of the sink.

Every job is a module run as ``python -m onceover_jobs.<name>``; BigQuery comes from the
``ONCEOVER_BIGQUERY_*`` variables through :mod:`onceover.bigquery`.
"""

import onceover  # noqa: F401 - first, for its gRPC fork policy (onceover/forking.py)
