"""Shared fixtures: one local BigQuery per test session, a dataset of its own per test."""

from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
from onceover_tools.localbq import LocalBigQuery
from pyspark.sql import SparkSession

from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from onceover.processes import CLASS_ARCHIVE_ENV, with_quick_jvm
from tests.helpers.receiver import Receiver
from tests.helpers.webhook_receiver import WebhookReceiver

pytest_plugins = ["tests.helpers.tiers", "tests.helpers.object_stores"]

REPO_ROOT = Path(__file__).resolve().parents[1]
JVM_CLASS_ARCHIVE = REPO_ROOT / ".onceover" / "jvm" / "spark-classes.jsa"
"""What ``make test`` builds before the tests (onceover_tools.jvm_archive)."""

# Every JVM the tests start (the shared session, jobs, resumes, chaos, the demo, a
# cluster) inherits this: none lives long enough to pay back the optimising compiler,
# and each maps Spark's classes from the archive where it was built.
os.environ.setdefault(CLASS_ARCHIVE_ENV, str(JVM_CLASS_ARCHIVE))
os.environ.update(with_quick_jvm(os.environ))
ARTIFACTS = REPO_ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def local_bigquery() -> Iterator[LocalBigQuery]:
    """The project's local BigQuery, in this process, on free ports."""
    with LocalBigQuery() as server:
        yield server


@pytest.fixture(scope="session")
def bq_config(local_bigquery: LocalBigQuery) -> BigQueryConfig:
    return local_bigquery.config


@pytest.fixture(scope="session")
def rest(bq_config: BigQueryConfig) -> bigquery.Client:
    return bigquery_client(bq_config)


@pytest.fixture(scope="session")
def write(bq_config: BigQueryConfig) -> BigQueryWriteClient:
    return write_client(bq_config)


@pytest.fixture
def dataset(rest: bigquery.Client) -> Iterator[str]:
    """A dataset of this test's own (``project.dataset``), dropped afterwards."""
    dataset_id = f"{rest.project}.t_{uuid.uuid4().hex[:12]}"
    rest.create_dataset(dataset_id)
    yield dataset_id
    rest.delete_dataset(dataset_id, delete_contents=True, not_found_ok=True)


POSTGRES_ADMIN_DSN = os.environ.get(
    "ONCEOVER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


@contextmanager
def own_postgres_database(template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database (its SQLAlchemy URL), a copy of ``template`` when one is
    named (PostgreSQL copies a database's files: no statement of it runs again), dropped
    afterwards."""
    import psycopg

    name = f"onceover_test_{uuid.uuid4().hex[:12]}"
    copy_of = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"{copy_of}')
    base = POSTGRES_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_name(url: str) -> str:
    """The database a PostgreSQL URL names (the last part of its path)."""
    return url.rsplit("/", 1)[1]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """An empty PostgreSQL database of this test's own (SQLAlchemy URL), dropped afterwards."""
    with own_postgres_database() as url:
        yield url


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something is listening on for the length of the test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def subprocess_env(tmp_path: Path) -> dict[str, str]:
    """The environment for commands under test: this venv first, nothing inherited
    that would point them at another BigQuery or database."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ONCEOVER_", "PYSPARK_", "BQEMU_"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ONCEOVER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'onceover.db'}"
    return env


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A running stand-in for the control plane's event intake (tests/helpers/receiver.py)."""
    server = Receiver()
    server.up()
    yield server
    server.down()


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    """A real webhook receiver on a free port, verifying every signature it gets."""
    receiver = WebhookReceiver()
    receiver.up()
    yield receiver
    receiver.down()


@pytest.fixture(scope="session")
def spark(
    bq_config: BigQueryConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkSession]:
    """One Spark session (local[2,4]: tasks retried as on a cluster) for the test run.

    Spark's Python workers take their environment from the JVM, which is fixed when
    the first session starts; so the local BigQuery is named in os.environ first, and
    the default ledger of writes that name none is the session's own.
    """
    from onceover_jobs.sink.datasource import register
    from onceover_jobs.sink.job.options import LEDGER_ENV
    from onceover_jobs.spark import spark_session

    os.environ.update(bq_config.env())
    os.environ[LEDGER_ENV] = str(tmp_path_factory.mktemp("default-ledger"))
    session = spark_session("onceover-tests", "local[2,4]")
    register(session)
    yield session
    session.stop()
