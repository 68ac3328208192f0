"""The sink installed as a user installs it: the project's wheel, built at the root, into
a fresh virtualenv that has PySpark and nothing else; then a plain PySpark script in
another folder writes with ``format("onceover")``, no import from this project and no
register call, into the local BigQuery. Counted there.

Installed offline from uv's cache (filled by ``make install``), at the versions of
``uv.lock``: nothing is downloaded."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from google.cloud import bigquery

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"
CONTROL_PLANE_AND_LOCAL = {
    "fastapi", "uvicorn", "sqlmodel", "alembic", "psycopg", "pydantic-settings",
    "google-cloud-logging", "bqemulator", "duckdb", "testcontainers", "numpy",
}  # fmt: skip
"""Distributions of the ``server`` and ``local`` extras that the sink never needs."""

SCRIPT = """
import sys

from pyspark.sql import SparkSession

table = sys.argv[1]
spark = SparkSession.builder.master("local[2]").appName("plain").getOrCreate()
orders = spark.range(0, 500, 1, 2).selectExpr("id", "concat('n', id) AS name")
(
    orders.write.format("onceover").mode("append")
    .option("table", table).option("run_id", "plain-script-1")
    .save()
)
"""


def only_packages(pylock: str, names: set[str]) -> str:
    """A ``pylock.toml`` with only the packages ``names`` (their blocks, as exported)."""
    header, *blocks = pylock.split("\n[[packages]]\n")
    kept = [b for b in blocks if b.split("\n", 1)[0].strip() in {f'name = "{n}"' for n in names}]
    assert len(kept) == len(names), [b.split("\n", 1)[0] for b in kept]
    return "\n[[packages]]\n".join([header, *kept])


def uv(*args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(UV), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_wheel_installs_the_sink_alone_and_format_onceover_works_without_code(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    uv("build", "--wheel", "--no-build-isolation", "--out-dir", str(tmp_path / "dist"))
    (wheel,) = (tmp_path / "dist").glob("onceover-*.whl")
    # The base install at the lock's versions, and PySpark as a cluster has it; each
    # package by the URL the lock names, so uv's cache serves it offline.
    base = tmp_path / "pylock.base.toml"
    uv("export", "--frozen", "--format", "pylock.toml", "--no-emit-project", "-o", str(base))
    spark = tmp_path / "pylock.spark.toml"
    local = tmp_path / "pylock.local.toml"
    uv("export", "--frozen", "--format", "pylock.toml", "--no-emit-project", "--extra", "local",
       "-o", str(local))  # fmt: skip
    spark.write_text(only_packages(local.read_text(), {"pyspark", "py4j"}))
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    uv("venv", "--python", "3.11", str(venv))
    for lock in (base, spark):
        uv("pip", "install", "--offline", "--python", str(python), "-r", str(lock))
    uv("pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel))
    uv("pip", "check", "--python", str(python))  # the wheel's dependencies are all there

    installed = {
        entry["name"].lower()
        for entry in json.loads(uv("pip", "list", "--python", str(python), "--format", "json"))
    }
    assert "onceover" in installed
    assert not installed & CONTROL_PLANE_AND_LOCAL, installed & CONTROL_PLANE_AND_LOCAL
    # Every import name the wheel puts into site-packages is this project's own.
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/", 1)[0] for name in archive.namelist()}
    assert {name for name in top_level if not name.endswith(".dist-info")} == {
        "onceover", "onceover_jobs", "onceover_backend", "onceover_tools", "pyspark_onceover"
    }, top_level  # fmt: skip

    table = f"{dataset}.plain"
    rest.create_table(bigquery.Table(table, schema=[
        bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("name", "STRING"),
    ]))  # fmt: skip
    elsewhere = tmp_path / "user"
    elsewhere.mkdir()
    script = elsewhere / "plain.py"
    script.write_text(SCRIPT)
    env = job_environment(bq_config, python=str(python))
    env.pop("PYTHONPATH", None)  # nothing of this checkout: only what the wheel installed
    ran = subprocess.run(
        [str(python), str(script), table],
        cwd=elsewhere,
        env={**env, "ONCEOVER_LEDGER": str(tmp_path / "ledger")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    row = next(iter(rest.query_and_wait(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM `{table}`"
    )))  # fmt: skip
    assert (row["n"], row["ids"]) == (500, 500)
