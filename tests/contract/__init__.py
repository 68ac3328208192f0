"""The contract's tests (onceover): arguments, the BigQuery connection, waits, preflight,
fork safety."""
