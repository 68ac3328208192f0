"""The test suite (docs/guides/testing.md). ``onceover`` is imported first, before any test
module imports grpc, for its gRPC fork policy (onceover/forking.py): the in-process
tiers start Spark beside the session's in-process local BigQuery."""

import onceover  # noqa: F401
