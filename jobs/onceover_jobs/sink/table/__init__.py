"""The table a write goes into, when the write may create it.

``creation`` reads the spark-bigquery-connector's table options (``createDisposition``,
``partitionField``, ``clusteredFields``, ``bigQueryTableLabel.*``, ...) and creates a
missing table from the DataFrame's schema, once even when drivers race.
"""
