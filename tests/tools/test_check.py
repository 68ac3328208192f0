"""``onceover check``: each verdict against the local BigQuery, and ``check=true`` in a write.

The command runs in process (its handler, as ``main`` calls it) with the local
BigQuery's endpoints in the environment, as a job's driver finds them; its printed
report and exit code are what is asserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import bigquery
from onceover_jobs.sink.datasource import prepare_job
from onceover_jobs.sink.errors import CheckFailedError
from onceover_tools.cli import build_parser
from onceover_tools.localbq.limits import limited
from onceover_tools.localstores import LocalGCS, LocalS3
from pyspark.sql.types import LongType, StringType, StructField, StructType

from onceover.bigquery import BigQueryConfig
from tests.helpers.object_stores import bucket_name
from tests.helpers.processes import run_onceover

SCHEMA = [
    bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("name", "STRING"),
]
SPARK_SCHEMA = StructType([StructField("id", LongType(), False), StructField("name", StringType())])
WITHOUT_UPDATE = "bigquery.tables.get,bigquery.tables.getData,bigquery.tables.create"
NAMES = ["credentials", "location", "permissions", "ledger", "arrow", "stream creations",
         "connections", "commit size"]  # fmt: skip


@pytest.fixture
def driver_env(bq_config: BigQueryConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The local BigQuery, as a job's driver finds it (``ONCEOVER_BIGQUERY_*``)."""
    for name, value in bq_config.env().items():
        monkeypatch.setenv(name, value)
    yield  # noqa: PT022 - monkeypatch undoes the variables after the test


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    rest.create_table(bigquery.Table(f"{dataset}.orders", schema=SCHEMA))
    return f"{dataset}.orders"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``onceover check ARGS``: its exit code and what it printed."""
    parsed = build_parser().parse_args(["check", *args])
    code = int(parsed.handler(parsed))
    return code, capsys.readouterr().out


def verdicts(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    """``onceover check ARGS --json``: its exit code and each check by name."""
    code, out = check(capsys, *args, "--json")
    report = json.loads(out)
    assert report["passed"] is (code == 0)
    return code, {c["name"]: c for c in report["checks"]}


def test_a_healthy_setup_is_all_ok(
    driver_env: None, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(
        capsys, "--table", table, "--ledger", str(tmp_path / "ledger"),
        "--partitions", "4", "--trigger-seconds", "60", "--rows-per-batch", "100000",
        "--mode", "pending",
    )  # fmt: skip

    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"onceover check {table}"
    rows = lines[1:-1]  # one a check, in order; no fix lines when all is ok
    assert [row[8:24].strip() for row in rows] == NAMES, out
    assert all(row.startswith("  OK    ") for row in rows), out
    assert lines[-1] == "8 ok, 0 warn, 0 fail: ready to run"
    assert "bigquery.tables.updateData, bigquery.tables.getData, bigquery.tables.get held" in out
    assert "one Arrow row appended to a PENDING stream" in out
    assert "240 an hour" in out  # 4 partitions, a batch a minute


def test_a_missing_permission_fails_naming_it_and_the_role(
    driver_env: None, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with limited(granted_permissions=WITHOUT_UPDATE):
        code, checks = verdicts(capsys, "--table", table, "--ledger", str(tmp_path))

    assert code == 1
    permissions = checks["permissions"]
    assert permissions["verdict"] == "fail"
    assert "lacks bigquery.tables.updateData" in permissions["reason"]
    assert "roles/bigquery.dataEditor" in permissions["fix"]
    assert [n for n, c in checks.items() if c["verdict"] == "fail"] == ["permissions"]
    assert checks["arrow"]["reason"] == "not checked: the permissions failed"


def test_a_missing_table_with_create_never_fails(
    driver_env: None, dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"{dataset}.not_yet"
    code, checks = verdicts(
        capsys, "--table", missing, "--ledger", str(tmp_path),
        "--option", "createDisposition=CREATE_NEVER",
    )  # fmt: skip

    assert code == 1
    assert checks["permissions"]["verdict"] == "fail"
    assert "does not exist and createDisposition is CREATE_NEVER" in checks["permissions"]["reason"]
    assert checks["arrow"]["verdict"] == "warn"  # nothing to append to: said, not failed


def test_a_missing_table_the_write_would_create_is_a_warning_since_bigquery_cannot_tell(
    driver_env: None, dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tables.testIamPermissions answers no permissions for a table that does not exist,
    so whether the caller may create it cannot be asked: said, with the role to hold."""
    missing = f"{dataset}.not_yet"
    code, checks = verdicts(capsys, "--table", missing, "--ledger", str(tmp_path))

    assert code == 0  # a warning, not a failure
    permissions = checks["permissions"]
    assert permissions["verdict"] == "warn"
    assert "does not exist; the write creates it" in permissions["reason"]
    assert "cannot be asked that beforehand" in permissions["reason"]
    assert "roles/bigquery.dataEditor" in permissions["fix"]


def test_a_ledger_that_cannot_be_written_fails(
    driver_env: None, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path under a file: no directory can be made there, whoever runs the check (a
    read-only directory would not stop root, who runs these tests in CI)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    code, checks = verdicts(capsys, "--table", table, "--ledger", str(blocker / "ledger"))

    assert code == 1
    ledger = checks["ledger"]
    assert ledger["verdict"] == "fail"
    assert "refused a create-if-absent" in ledger["reason"]
    assert str(blocker / "ledger") in ledger["reason"]
    assert "write access" in ledger["fix"]


def test_a_job_over_the_stream_budget_fails_with_the_figures(
    driver_env: None, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(
        capsys, "--table", table, "--ledger", str(tmp_path), "--mode", "pending",
        "--partitions", "200", "--trigger-seconds", "1",
    )  # fmt: skip

    assert code == 1
    (line,) = [line for line in out.splitlines() if "stream creations" in line]
    assert line.startswith("  FAIL")
    assert "one stream per partition per batch (200)" in line
    assert "720,000 an hour" in line
    assert "10,000 per hour per project and region" in line
    assert "mode=buffered" in out
    assert "a trigger of at least 72 s for 200 partitions" in out

    # The same job in buffered mode keeps its 200 streams: within the budget.
    code, checks = verdicts(
        capsys, "--table", table, "--ledger", str(tmp_path), "--partitions", "200",
        "--trigger-seconds", "1",
    )  # fmt: skip
    assert checks["stream creations"]["verdict"] == "warn"  # 200 at once: past 40 a second
    assert "mode buffered keeps a stream per partition" in checks["stream creations"]["reason"]
    assert code == 0


def test_the_json_report_holds_every_check(
    driver_env: None, table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(capsys, "--table", table, "--ledger", str(tmp_path), "--json")
    report = json.loads(out)

    assert code == 0
    assert report["table"] == table
    assert report["passed"] is True
    assert [c["name"] for c in report["checks"]] == NAMES
    assert {c["verdict"] for c in report["checks"]} == {"ok"}
    assert all(set(c) == {"name", "verdict", "reason", "fix"} for c in report["checks"])


def test_a_write_given_check_true_is_refused_before_anything_when_a_check_fails(
    driver_env: None, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """The driver runs the checks first: the refused write creates no table (the table
    would be created from the DataFrame otherwise) and leaves no ledger behind."""
    missing = f"{dataset}.not_yet"
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    options = {"table": missing, "run_id": "checked-1", "ledger": str(blocker / "ledger"),
               "check": "true"}  # fmt: skip

    with pytest.raises(CheckFailedError) as refused:
        prepare_job(options, SPARK_SCHEMA, False, streaming=False)

    assert refused.value.checks == ("ledger",)
    assert "onceover option 'check'" in str(refused.value)
    assert "refused a create-if-absent" in str(refused.value)
    assert "nothing was created or written" in str(refused.value)
    assert isinstance(refused.value, ValueError)  # what Spark users expect of an option
    assert [t.table_id for t in rest.list_tables(dataset)] == []

    options["ledger"] = str(tmp_path / "ledger")
    job = prepare_job(options, SPARK_SCHEMA, False, streaming=False)  # the ledger fixed: on
    assert job.table == missing
    assert [t.table_id for t in rest.list_tables(dataset)] == ["not_yet"]


def test_an_option_the_driver_would_refuse_is_a_failed_check(
    driver_env: None, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks = verdicts(capsys, "--table", table, "--option", "row_format=xml")

    assert code == 1
    assert list(checks) == ["options"]
    assert "onceover option 'row_format'" in checks["options"]["reason"]
    assert "'xml' is not one of arrow, proto" in checks["options"]["reason"]


def test_credentials_that_get_no_token_fail_and_bigquery_is_not_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real BigQuery (no local endpoints): a service account's key whose token endpoint
    is a closed port here (never Google's) gets no token: fail, naming the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from onceover.preflight import free_port

    for name in ("ONCEOVER_BIGQUERY_REST", "ONCEOVER_BIGQUERY_GRPC", "ONCEOVER_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()  # fmt: skip
    key = tmp_path / "loader.json"
    key.write_text(json.dumps({
        "type": "service_account", "project_id": "my-project", "private_key_id": "k",
        "private_key": pem, "client_email": "loader@my-project.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"http://127.0.0.1:{free_port()}/token",
    }))  # fmt: skip
    code, checks = verdicts(
        capsys, "--table", "my-project.billing.usage", "--ledger", str(tmp_path / "ledger"),
        "--option", f"credentialsFile={key}",
    )  # fmt: skip

    assert code == 1
    credentials = checks["credentials"]
    assert credentials["verdict"] == "fail"
    assert f"credentialsFile {key} could not get a token" in credentials["reason"]
    assert "gcloud auth application-default login" in credentials["fix"]
    for name in ("location", "permissions", "arrow"):
        assert checks[name] == {"name": name, "verdict": "warn", "fix": None,
                                "reason": "not checked: the credentials failed"}  # fmt: skip
    assert checks["ledger"]["verdict"] == "ok"  # a disk needs no Google credentials


# -- the pieces, without a BigQuery ------------------------------------------------------


def test_a_regional_endpoint_of_another_location_fails() -> None:
    from onceover_jobs.preflight.location import endpoint_check

    wrong = endpoint_check("p.d", "europe-west3", "bigquerystorage.us-east1.rep.googleapis.com:443")
    own = endpoint_check(
        "p.d", "europe-west3", "bigquerystorage.europe-west3.rep.googleapis.com:443"
    )
    default = endpoint_check("p.d", "EU", None)

    assert wrong.verdict == "fail"
    assert wrong.fix is not None
    assert "bigQueryStorageGrpcEndpoint=bigquerystorage.europe-west3.rep.googleapis.com:443" in (
        wrong.fix
    )
    assert own.verdict == "ok"
    assert default.verdict == "ok"
    assert "bigquerystorage.googleapis.com:443, which serves every location" in default.reason
    assert "bigquerystorage.eu.rep.googleapis.com:443" in default.reason


def test_the_arrow_probe_row_fills_required_columns_and_names_what_it_cannot() -> None:
    from onceover_jobs.preflight.arrow import probe_row

    row = probe_row([
        bigquery.SchemaField("id", "INTEGER", mode="REQUIRED"),
        bigquery.SchemaField("at", "TIMESTAMP", mode="REQUIRED"),
        bigquery.SchemaField("note", "STRING"),
        bigquery.SchemaField("tags", "STRING", mode="REPEATED"),
    ])  # fmt: skip
    nullable_only = probe_row([bigquery.SchemaField("note", "STRING")])
    nested = probe_row([
        bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
        bigquery.SchemaField("address", "RECORD", mode="REQUIRED",
                             fields=[bigquery.SchemaField("city", "STRING")]),
    ])  # fmt: skip

    assert not isinstance(row, str)
    assert row.schema.names == ["id", "at"]
    assert row.to_pylist()[0]["id"] == 0
    assert not isinstance(nullable_only, str)
    assert nullable_only.to_pylist() == [{"note": None}]
    assert nested == "its REQUIRED column address is a RECORD"


def test_shape_limits_of_connections_and_commit_size() -> None:
    from onceover_jobs.preflight.shape import JobShape, check_shape
    from onceover_jobs.sink.job.options import SinkOptions

    pending = SinkOptions(table="p.d.t", mode="pending")

    def by_name(shape: JobShape, location: str) -> dict[str, Any]:
        return {c.name: c for c in check_shape(pending, shape, location)}

    regional = by_name(JobShape(partitions=6_000), "europe-west3")
    multi = by_name(JobShape(partitions=6_000), "EU")
    huge = by_name(JobShape(rows_per_batch=10**13), "europe-west3")
    wide = by_name(JobShape(rows_per_batch=10**9), "europe-west3")
    committed = check_shape(SinkOptions(table="p.d.t", mode="committed"),
                            JobShape(rows_per_batch=10**13), "US")  # fmt: skip

    assert regional["connections"].verdict == "fail"
    assert "against 5,000 per project in a region (europe-west3)" in regional["connections"].reason
    assert multi["connections"].verdict == "ok"
    assert "against 20,000 per project in the EU multi-region" in multi["connections"].reason
    assert huge["commit size"].verdict == "fail"
    assert wide["commit size"].verdict == "warn"  # 1 TB / 10^9 rows: 1,000 bytes a row
    assert "while rows average under 1,000 bytes" in wide["commit size"].reason
    assert committed[2].verdict == "ok"
    assert "publishes without BatchCommitWriteStreams" in committed[2].reason
    over_commit = by_name(JobShape(partitions=10_001), "US")["commit size"]
    assert over_commit.verdict == "fail"
    assert "more than the 10,000 one BatchCommitWriteStreams takes" in over_commit.reason


# -- the guide's examples, run ---------------------------------------------------------

GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "install.md"


def guide_examples() -> list[tuple[list[str], list[str]]]:
    """Each ``$ onceover check ...`` block of the install guide: its arguments and the
    lines it shows printed."""
    examples = []
    for block in GUIDE.read_text().split("```text\n")[1:]:
        text = block.split("```", 1)[0]
        if not text.startswith("$ onceover check"):
            continue
        command, _, printed = text.partition("\n    ")[2].partition("\n")
        first = text.split("\n", 1)[0].removeprefix("$ onceover check").rstrip("\\")
        examples.append(((first + " " + command).split(), printed.rstrip("\n").splitlines()))
    return examples


@pytest.fixture
def billing(rest: bigquery.Client, bq_config: BigQueryConfig) -> Iterator[str]:
    """The guide's table: ``billing.usage`` in the local BigQuery's project."""
    assert bq_config.project == "onceover-local"  # the guide's
    rest.create_dataset("onceover-local.billing")
    rest.create_table(bigquery.Table("onceover-local.billing.usage", schema=[
        bigquery.SchemaField("event_id", "STRING", mode="REQUIRED"),
        bigquery.SchemaField("amount", "NUMERIC"),
    ]))  # fmt: skip
    yield "onceover-local.billing.usage"
    rest.delete_dataset("onceover-local.billing", delete_contents=True, not_found_ok=True)


def test_the_guides_outputs_are_what_the_command_prints(
    driver_env: None, billing: str, bq_config: BigQueryConfig, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The install guide's healthy and broken runs, run again here: the same lines, but
    for the local BigQuery's ports and the ledger's directory."""
    healthy, broken = guide_examples()
    assert bq_config.rest_endpoint is not None
    assert bq_config.grpc_endpoint is not None
    ours = {
        bq_config.rest_endpoint: "http://127.0.0.1:9050",
        bq_config.grpc_endpoint: "127.0.0.1:9060",
    }

    def run(args: list[str], ledger: Path, shown: str) -> list[str]:
        at = args.index("--ledger") + 1
        code, out = check(capsys, *args[:at], str(ledger), *args[at + 1 :])
        for here, guide in {**ours, str(ledger): shown}.items():
            out = out.replace(here, guide)
        return [*out.splitlines(), f"exit {code}"]

    assert run(healthy[0], tmp_path / "ledger", "/tmp/onceover-ledger") == [*healthy[1], "exit 0"]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with limited(granted_permissions="bigquery.tables.get,bigquery.tables.getData"):
        printed = run(broken[0], blocker / "ledger", "/tmp/not-a-dir/ledger")
    assert printed == [*broken[1], "exit 1"]


# -- the ledger's probe on a bucket ---------------------------------------------------


def test_the_ledger_probe_on_a_bucket_is_ok_and_removed(
    local_s3: LocalS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onceover_jobs.preflight.ledger import check_ledger
    from onceover_jobs.sink.job.options import SinkOptions

    from onceover.ledger_store import open_store

    for name, value in local_s3.environment().items():
        monkeypatch.setenv(name, value)
    url = f"{s3_bucket}/ledger"

    checked = check_ledger(BigQueryConfig(), SinkOptions(table="p.d.t", ledger=url))

    assert checked.verdict == "ok", checked
    assert checked.reason == f"s3 store at {url} takes a create-if-absent and refuses a second"
    assert list(open_store(url).walk("")) == []  # the probe is gone


def test_a_bucket_that_ignores_conditional_writes_fails_the_ledger_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Cloud Storage stand-in without its patch takes a second create-if-absent."""
    from onceover_jobs.preflight.ledger import check_ledger
    from onceover_jobs.sink.job.options import SinkOptions

    with LocalGCS(
        without_patches=("generation_preconditions",), log_path=tmp_path / "gcs.log"
    ) as careless:
        for name, value in careless.environment().items():
            monkeypatch.setenv(name, value)
        url = careless.create_bucket(bucket_name()) + "/ledger"
        checked = check_ledger(BigQueryConfig(), SinkOptions(table="p.d.t", ledger=url))

    assert checked.verdict == "fail"
    assert "accepted a second create-if-absent of one key" in checked.reason
    assert checked.fix is not None
    assert "never a FUSE mount of a bucket" in checked.fix


def test_the_command_exits_1_on_a_fail_and_prints_json_alone(
    subprocess_env: dict[str, str], bq_config: BigQueryConfig, dataset: str, tmp_path: Path
) -> None:
    """As a user runs it: ``onceover check`` in a process of its own."""
    result = run_onceover(
        "check", "--table", f"{dataset}.not_yet", "--ledger", str(tmp_path / "ledger"),
        "--option", "createDisposition=CREATE_NEVER", "--json",
        env={**subprocess_env, **bq_config.env()},
    )  # fmt: skip

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] is False
    failed = [c["name"] for c in report["checks"] if c["verdict"] == "fail"]
    assert failed == ["permissions"]


def test_a_refusal_about_the_arrow_format_names_row_format_proto() -> None:
    from onceover_jobs.preflight.arrow import PROTO_FIX, refused_for_the_format

    assert refused_for_the_format(
        "INVALID_ARGUMENT: Arrow format is not supported for this project"
    )
    assert refused_for_the_format("UNIMPLEMENTED: arrow_rows")
    assert not refused_for_the_format("PERMISSION_DENIED: Permission 'TABLES_UPDATE_DATA' denied")
    assert "row_format', 'proto'" in PROTO_FIX


def test_a_missing_table_answered_not_found_is_a_warning_not_a_failure() -> None:
    """Some of Google's pages say a missing resource answers NOT_FOUND when the caller has
    permissions on its parent: then nothing says whether tables.create is held."""
    from google.api_core.exceptions import NotFound
    from onceover_jobs.preflight.permissions import missing_table_check
    from onceover_jobs.sink.job.options import SinkOptions

    class Answering:
        def test_iam_permissions(self, table: str, permissions: list[str], timeout: float) -> Any:
            raise NotFound(f"Not found: Table {table}")

    checked = missing_table_check(Answering(), SinkOptions(table="p.d.t"), "p.d")  # type: ignore[arg-type]

    assert checked.verdict == "warn"
    assert "cannot be asked that beforehand" in checked.reason
