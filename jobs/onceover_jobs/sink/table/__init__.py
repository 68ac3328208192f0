"""The table a write goes into: created when the write may create it, its rows replaced
when the write overwrites them.

``creation`` reads the spark-bigquery-connector's table options (``createDisposition``,
``partitionField``, ``clusteredFields``, ``bigQueryTableLabel.*``, ...) and creates a
missing table from the DataFrame's schema, once even when drivers race. ``overwrite``
holds what a ``mode("overwrite")`` write does to tables (the staging table, the scope
replaced, the swap's transaction); ``swap_job`` runs that transaction as a job whose id
BigQuery runs once.
"""
