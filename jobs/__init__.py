"""The Onceover data plane: Spark jobs that load BigQuery, and (soon) the exactly-once sink.

Every job is a module run as ``python -m jobs.<name>``; BigQuery comes from the
``ONCEOVER_BIGQUERY_*`` variables through :mod:`onceover.bigquery`.
"""
