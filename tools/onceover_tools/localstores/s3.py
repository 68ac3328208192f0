"""The local S3: moto's S3 server (``python -m moto.server``) in a child process.

No patch: moto 5.2.5 already refuses a second ``If-None-Match: *`` put and a wrong
``If-Match`` with 412 PreconditionFailed, which is what the ledger relies on
(``tests/localstores/test_s3.py`` pins it). Data lives in the server's memory and goes
with it; requests are not checked against the keys it is given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from onceover_tools.localstores.child import StandInProcess, local_http

REGION = "us-east-1"
"""The region the stand-in's buckets are in: the one where CreateBucket needs no
location constraint."""
ACCESS_KEY_ID = "onceover-local"
SECRET_ACCESS_KEY = "onceover-local-secret"  # noqa: S105 - the stand-in checks no keys


class LocalS3(StandInProcess):
    """moto's S3 server on ``host:port`` (0: a free port), in a child process.

    ::

        with LocalS3() as s3:
            base = s3.create_bucket("onceover-ledger")  # "s3://onceover-ledger"
            os.environ.update(s3.environment())
    """

    scheme = "s3"

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, log_path: Path | None = None
    ) -> None:
        super().__init__(
            "the local S3",
            lambda host, port: [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
            host=host,
            port=port,
            log_path=log_path,
        )

    def environment(self) -> dict[str, str]:
        """What an S3 client needs to reach it: the endpoint, keys, the region, and
        leave to talk plain HTTP. obstore's ``S3Store``, boto3 and Spark executors (through
        ``spark.executorEnv.*``) all read these."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def _create_bucket(self, name: str) -> httpx.Response:
        # Unsigned: the stand-in does not check signatures.
        return local_http("PUT", f"{self.endpoint}/{name}")

    def _answering(self) -> bool:
        local_http("GET", f"{self.endpoint}/")  # ListBuckets: any answer means serving
        return True
