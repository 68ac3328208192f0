"""Reaching real BigQuery the ways the spark-bigquery-connector offers: a credentials
file or inline key (a service account's, a user's, workload identity federation), an
access token, impersonation, the billing and quota projects, regional or private
endpoints, a proxy. The clients are built as a job builds them; only Google's
cloud is missing, so the REST calls go through a local proxy to the local BigQuery and
the gRPC channel's CONNECT is seen at a local proxy."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest
from google.cloud import bigquery
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.options import connection_options

from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from onceover.connection import SCOPES, Connection, ConnectionOptionError
from tests.helpers.local_http import LocalServer, TrackedHandler
from tests.helpers.waiting import wait_until

ACCOUNT = "loader@billing-prod.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def key_info() -> dict[str, str]:
    """A service-account key as Google issues them (a fresh RSA key, never used)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return {
        "type": "service_account",
        "project_id": "billing-prod",
        "private_key_id": "0" * 40,
        "private_key": pem,
        "client_email": ACCOUNT,
        "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    }


@pytest.fixture
def key_file(tmp_path: Path, key_info: dict[str, str]) -> Path:
    path = tmp_path / "key.json"
    path.write_text(json.dumps(key_info))
    return path


def real(connection: Connection, project: str | None = None) -> BigQueryConfig:
    """Real BigQuery (no local endpoints) reached through ``connection``."""
    return BigQueryConfig(project=project, connection=connection)


def test_a_key_file_a_parent_project_and_a_regional_endpoint_make_the_write_client(
    key_file: Path,
) -> None:
    connection = connection_options({
        "credentialsFile": str(key_file),
        "parentProject": "billing-jobs",
        "bigQueryStorageGrpcEndpoint": "bigquerystorage.europe-west3.rep.googleapis.com:443",
    })  # fmt: skip
    client = write_client(real(connection))
    credentials: Any = client.transport._credentials
    assert credentials.service_account_email == ACCOUNT
    assert credentials.quota_project_id is None  # parentProject alone is no quota project
    assert client.transport._host == "bigquerystorage.europe-west3.rep.googleapis.com:443"
    assert real(connection).resolved_project() == "billing-prod"  # the key's project


def test_the_parent_project_is_the_rest_clients_project_and_the_jobs_run_there(
    key_file: Path,
) -> None:
    """The connector's meaning: jobs (queries, copies) run in and are billed to
    ``parentProject``; the tables keep their own project."""
    connection = connection_options(
        {"credentialsFile": str(key_file), "parentProject": "billing-jobs"}
    )
    client = bigquery_client(real(connection, project="data-prod"))
    assert client.project == "billing-jobs"
    assert client._credentials.quota_project_id is None


def test_a_table_named_without_a_project_is_in_the_parent_project(key_file: Path) -> None:
    """The connector qualifies ``save("dataset.table")`` with its client's project, which
    is ``parentProject``; without one, the configured project, else the key's."""
    given = {"credentialsFile": str(key_file)}
    parent = connection_options({**given, "parentProject": "billing-jobs"})
    assert real(parent, project="data-prod").table_project() == "billing-jobs"
    assert real(connection_options(given), project="data-prod").table_project() == "data-prod"
    assert real(connection_options(given)).table_project() == "billing-prod"


@pytest.mark.parametrize(
    ("flag", "quota"), [("true", "billing-quota"), ("TRUE", "billing-quota"), ("false", None)]
)
def test_the_parent_project_is_the_quota_project_only_with_the_connectors_option(
    key_file: Path, key_info: dict[str, str], flag: str, quota: str | None
) -> None:
    for source in ({"credentialsFile": str(key_file)}, {"credentials": json.dumps(key_info)},
                   {"gcpAccessToken": "t"}):  # fmt: skip
        connection = connection_options({
            **source, "parentProject": "billing-quota",
            "useParentProjectForMetadataOperations": flag,
        })  # fmt: skip
        credentials, _ = connection.credentials()
        assert credentials.quota_project_id == quota, source
        assert connection.quota_project == quota
        transport: Any = write_client(real(connection)).transport
        assert transport._credentials.quota_project_id == quota
        assert bigquery_client(real(connection)).project == "billing-quota"
    without = connection_options({"credentialsFile": str(key_file)})
    assert without.credentials()[0].quota_project_id is None


def test_an_inline_key_base64_as_the_connector_takes_it_or_plain(
    key_info: dict[str, str],
) -> None:
    text = json.dumps(key_info)
    for given in (base64.b64encode(text.encode()).decode(), text):
        connection = connection_options({"credentials": given})
        credentials, project = connection.credentials()
        assert credentials.service_account_email == ACCOUNT  # type: ignore[attr-defined]
        assert project == "billing-prod"
    assert "private_key" not in repr(connection)  # secrets never printed


def test_impersonation_acts_as_the_named_account_from_the_given_credentials(
    key_file: Path,
) -> None:
    from google.auth import impersonated_credentials

    connection = connection_options({
        "credentialsFile": str(key_file),
        "gcpImpersonationServiceAccount": "writer@data-prod.iam.gserviceaccount.com",
    })  # fmt: skip
    credentials, _ = connection.credentials()
    assert isinstance(credentials, impersonated_credentials.Credentials)
    assert credentials.service_account_email == "writer@data-prod.iam.gserviceaccount.com"
    assert credentials._source_credentials.service_account_email == ACCOUNT


AUDIENCE = (
    "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/"
    "onprem/providers/oidc"
)


def federation(token_file: Path, **more: Any) -> dict[str, Any]:
    """A workload identity federation configuration as ``gcloud iam
    workload-identity-pools create-cred-config`` writes one: an OIDC token read from a
    local file, exchanged at Google's STS, then a service account impersonated."""
    return {
        "universe_domain": "googleapis.com",
        "type": "external_account",
        "audience": AUDIENCE,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "service_account_impersonation_url": (
            "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"
            f"{ACCOUNT}:generateAccessToken"
        ),
        "credential_source": {"file": str(token_file), "format": {"type": "text"}},
        **more,
    }


def test_a_workload_identity_federation_file_or_inline_json_is_loaded_and_scoped(
    tmp_path: Path,
) -> None:
    from google.auth import identity_pool

    token_file = tmp_path / "oidc-token"
    token_file.write_text("header.payload.signature")
    info = federation(token_file)
    config = tmp_path / "federation.json"
    config.write_text(json.dumps(info))
    text = json.dumps(info)
    for options in (
        {"credentialsFile": str(config)},
        {"credentials": base64.b64encode(text.encode()).decode()},
        {"credentials": text},
    ):
        connection = connection_options({
            **options, "parentProject": "billing-quota",
            "useParentProjectForMetadataOperations": "true",
        })  # fmt: skip
        credentials, project = connection.credentials()
        assert isinstance(credentials, identity_pool.Credentials), options
        assert project is None  # no call is made to learn the pool's project
        assert tuple(credentials.scopes or ()) == SCOPES
        assert credentials.service_account_email == ACCOUNT
        assert credentials.quota_project_id == "billing-quota"
        # The external token is read from the local file; nothing goes to the network.
        assert credentials.retrieve_subject_token(None) == "header.payload.signature"
        transport: Any = write_client(real(connection)).transport
        assert isinstance(transport._credentials, identity_pool.Credentials)


def test_a_credentials_file_that_is_not_one_is_refused_on_the_driver(tmp_path: Path) -> None:
    for text, problem in (("not json", "is not a credentials file's JSON"),
                          ('{"type": "external_account"}', "does not load")):  # fmt: skip
        path = tmp_path / "given.json"
        path.write_text(text)
        with pytest.raises(SinkOptionError, match=problem) as refused:
            connection_options({"credentialsFile": str(path)})
        assert refused.value.option == "credentialsFile"


def test_a_federation_from_aws_and_its_quota_project_are_read(tmp_path: Path) -> None:
    from google.auth import aws

    info = federation(
        tmp_path / "unused",
        subject_token_type="urn:ietf:params:aws:token-type:aws4_request",
        credential_source={
            "environment_id": "aws1",
            "region_url": "http://169.254.169.254/latest/meta-data/placement/availability-zone",
            "url": "http://169.254.169.254/latest/meta-data/iam/security-credentials",
            "regional_cred_verification_url": (
                "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"
            ),
        },
        quota_project_id="billing-prod",
    )
    credentials, project = connection_options({"credentials": json.dumps(info)}).credentials()
    assert isinstance(credentials, aws.Credentials)
    assert project == "billing-prod"


def test_a_federation_from_an_executable_runs_only_where_google_auth_allows_it(
    tmp_path: Path,
) -> None:
    from google.auth import exceptions, pluggable

    info = federation(
        tmp_path / "unused", credential_source={"executable": {"command": "/bin/false"}}
    )
    credentials, _ = connection_options({"credentials": json.dumps(info)}).credentials()
    assert isinstance(credentials, pluggable.Credentials)
    with pytest.raises(
        exceptions.MalformedError, match="GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"
    ):
        credentials.retrieve_subject_token(None)  # nothing ran


@pytest.mark.parametrize(
    ("options", "named", "problem"),
    [
        ({"credentialsFile": "/nowhere/key.json"}, "credentialsFile", "not a readable file"),
        ({"credentials": "not base64 at all!"}, "credentials", "neither base64"),
        ({"credentials": base64.b64encode(b"[1]").decode()}, "credentials", "no 'type'"),
        ({"gcpAccessToken": "t", "credentials": "{\"type\": \"x\"}"}, "gcpAccessToken",
         "one source of credentials"),
        ({"credentials": json.dumps({"type": "external_account", "audience": AUDIENCE})},
         "credentials", "external_account configuration that does not load"),
        ({"credentials": json.dumps({"type": "gdch_service_account"})}, "credentials",
         "holds credentials of type 'gdch_service_account'"),
        ({"gcpImpersonationServiceAccount": "writer"}, "gcpImpersonationServiceAccount",
         "not a service account"),
        ({"parentProject": "Billing"}, "parentProject", "not a project id"),
        ({"useParentProjectForMetadataOperations": "yes"},
         "useParentProjectForMetadataOperations", "neither true nor false"),
        ({"bigQueryStorageGrpcEndpoint": "https://x"}, "bigQueryStorageGrpcEndpoint",
         "not host:port"),
        ({"bigQueryHttpEndpoint": "x:1"}, "bigQueryHttpEndpoint", "not an http"),
        ({"proxyUsername": "u", "proxyPassword": "p"}, "proxyUsername", "without proxyAddress"),
        ({"proxyAddress": "http://p:3128", "proxyUsername": "u"}, "proxyPassword", "together"),
    ],
)  # fmt: skip
def test_a_wrong_connection_option_is_refused_naming_it(
    options: dict[str, str], named: str, problem: str
) -> None:
    with pytest.raises(SinkOptionError, match=problem) as refused:
        connection_options(options)
    assert refused.value.option == named


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        ("proxy.corp:3128", "http://proxy.corp:3128"),  # the connector's form
        ("http://proxy.corp:3128", "http://proxy.corp:3128"),
        ("HTTP://proxy.corp:3128/", "http://proxy.corp:3128"),
        # Spoken to in HTTP whatever the scheme, as the connector does and gRPC needs.
        ("https://proxy.corp:8443", "http://proxy.corp:8443"),
        ("10.0.0.7:08080", "http://10.0.0.7:8080"),
        ("[fd00::7]:3128", "http://[fd00::7]:3128"),
    ],
)
def test_a_proxy_address_is_taken_as_host_port_or_a_url_and_used_as_http(
    given: str, taken: str
) -> None:
    connection = connection_options(
        {"proxyAddress": given, "proxyUsername": "u", "proxyPassword": "p"}
    )
    assert connection.proxy == taken
    assert connection.proxy_url() == taken.replace("http://", "http://u:p@")


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("proxy.corp", "has no port"),
        ("http://proxy.corp", "has no port"),
        ("socks5://proxy.corp:1080", "socks5 proxy is not supported"),
        ("ftp://proxy.corp:21", "ftp proxy is not supported"),
        ("proxy.corp:70000", "out of range"),
        ("proxy.corp:0", "out of range"),
        ("http://u:p@proxy.corp:3128", "proxyUsername and proxyPassword"),
        ("http://proxy.corp:3128/path", "is not host:port"),
    ],
)
def test_a_wrong_proxy_address_is_refused_naming_it(given: str, problem: str) -> None:
    with pytest.raises(SinkOptionError, match=re.escape(problem)) as refused:
        connection_options({"proxyAddress": given})
    assert refused.value.option == "proxyAddress"
    with pytest.raises(ConnectionOptionError, match="http://host:port"):
        Connection(proxy="proxy.corp:3128").check()  # built by hand: the form it is used in


class _Proxy(TrackedHandler):
    """A forward HTTP proxy: relays absolute-URI requests, answers CONNECT with 403,
    and notes every request line with its Authorization and Proxy-Authorization."""

    def _relay(self) -> None:
        proxy: RecordingProxy = self.owner
        proxy.seen.append(
            (self.command, self.path, self.headers.get("Authorization"),
             self.headers.get("Proxy-Authorization"))
        )  # fmt: skip
        proxy.quota_projects.append((self.path, self.headers.get("x-goog-user-project")))
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        request = Request(self.path, data=body, headers=headers, method=self.command)
        try:
            answer = urlopen(request, timeout=10)
            status, data, kind = answer.status, answer.read(), answer.headers.get("Content-Type")
        except Exception as exc:  # relay the upstream's error answer as it came
            status = getattr(exc, "code", 502)
            data = exc.read() if hasattr(exc, "read") else b""
            kind = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay  # noqa: N815

    def do_CONNECT(self) -> None:  # noqa: N802 (the name http.server calls)
        proxy: RecordingProxy = self.owner
        proxy.seen.append(("CONNECT", self.path, None, self.headers.get("Proxy-Authorization")))
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.close_connection = True


_HOP = {"proxy-authorization", "proxy-connection", "connection", "keep-alive", "host"}


class RecordingProxy(LocalServer):
    handler = _Proxy

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, str | None, str | None]] = []
        self.quota_projects: list[tuple[str, str | None]] = []
        """Each relayed request's URL and ``x-goog-user-project`` header."""


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    server = RecordingProxy()
    server.up()
    yield server
    server.down()


def test_rest_calls_go_through_the_proxy_with_the_token_to_the_given_endpoint(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, proxy: RecordingProxy
) -> None:
    table = f"{dataset}.through_proxy"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("id", "INT64")]))
    connection = connection_options({
        "gcpAccessToken": "token-for-the-test",
        "bigQueryHttpEndpoint": str(bq_config.rest_endpoint),
        "proxyAddress": f"http://127.0.0.1:{proxy.port}",
        "proxyUsername": "loader", "proxyPassword": "s3cret",
    })  # fmt: skip
    client = bigquery_client(real(connection, project=bq_config.project))
    assert [f.name for f in client.get_table(table).schema] == ["id"]
    (method, url, authorization, proxy_authorization) = proxy.seen[-1]
    assert method == "GET"
    assert url.startswith(f"{bq_config.rest_endpoint}/bigquery/v2/projects/")
    assert authorization == "Bearer token-for-the-test"
    assert proxy_authorization == "Basic " + base64.b64encode(b"loader:s3cret").decode()


@pytest.mark.parametrize("for_metadata", ["false", "true"])
def test_a_query_runs_in_the_parent_project_and_names_it_quota_project_only_if_asked(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    proxy: RecordingProxy,
    for_metadata: str,
) -> None:
    """As the spark-bigquery-connector: the job is created in ``parentProject`` (billed
    there), and the ``x-goog-user-project`` header, which needs
    ``serviceusage.services.use`` on that project, is sent only with
    ``useParentProjectForMetadataOperations=true``."""
    table = f"{dataset}.billed"
    rest.create_table(bigquery.Table(table, schema=[bigquery.SchemaField("id", "INT64")]))
    parent = str(bq_config.project or rest.project)
    connection = connection_options({
        "gcpAccessToken": "token-for-the-test",
        "bigQueryHttpEndpoint": str(bq_config.rest_endpoint),
        "proxyAddress": f"127.0.0.1:{proxy.port}",  # the connector's form
        "parentProject": parent,
        "useParentProjectForMetadataOperations": for_metadata,
    })  # fmt: skip
    client = bigquery_client(real(connection, project="data-prod-elsewhere"))
    rows = list(client.query_and_wait(f"SELECT COUNT(*) AS n FROM `{table}`"))
    assert [row["n"] for row in rows] == [0]
    calls = [url for url, _ in proxy.quota_projects]
    assert any(f"/bigquery/v2/projects/{parent}/queries" in url for url in calls), calls
    assert not any("data-prod-elsewhere" in url for url in calls)
    expected = parent if for_metadata == "true" else None
    assert {header for _, header in proxy.quota_projects} == {expected}


def test_the_storage_write_channel_opens_through_the_proxy(
    key_file: Path, proxy: RecordingProxy
) -> None:
    """gRPC reaches the endpoint with HTTP CONNECT through the proxy: the proxy sees
    the endpoint asked for (and refuses it, being a test's)."""
    connection = connection_options({
        "credentialsFile": str(key_file),
        "bigQueryStorageGrpcEndpoint": "bigquerystorage.us-east4.rep.googleapis.com:443",
        "proxyAddress": f"127.0.0.1:{proxy.port}",  # the connector's form
    })  # fmt: skip
    client = write_client(real(connection))
    transport: Any = client.transport
    channel = transport.grpc_channel
    threading.Thread(target=lambda: _try_connect(channel), daemon=True).start()
    wait_until(
        "the CONNECT at the proxy",
        lambda: next((s for s in proxy.seen if s[0] == "CONNECT"), None),
        20,
    )
    assert ("CONNECT", "bigquerystorage.us-east4.rep.googleapis.com:443", None, None) in proxy.seen


def _try_connect(channel: Any) -> None:
    import grpc

    with contextlib.suppress(OSError, grpc.FutureTimeoutError):
        grpc.channel_ready_future(channel).result(timeout=15)


def test_nothing_given_keeps_application_default_credentials() -> None:
    assert connection_options({}).is_default
    assert replace(Connection(), proxy=None).is_default
