"""The one place that builds BigQuery clients.

Every component (the sink on the driver and on executors, the jobs, the backend)
gets its clients here, configured by three environment variables:

==============================  ====================================================
``ONCEOVER_BIGQUERY_REST``      REST endpoint of a local BigQuery, e.g.
                                ``http://127.0.0.1:9050``
``ONCEOVER_BIGQUERY_GRPC``      gRPC (Storage Write API) endpoint of a local
                                BigQuery, e.g. ``127.0.0.1:9060``
``ONCEOVER_PROJECT``            the Google Cloud project; defaults to
                                ``onceover-local`` locally and to the project of
                                the Application Default Credentials otherwise
==============================  ====================================================

Both endpoints unset means real BigQuery, with Application Default Credentials unless
the configuration's :class:`~onceover.connection.Connection` (the sink's connection
options: a credentials file, impersonation, the project jobs are billed to, regional or
private endpoints, a proxy) says otherwise; set one endpoint, set both. A
:class:`BigQueryConfig` is a small frozen value, so it can be pickled into a Spark task
and turned into clients on the executor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from onceover import __version__
from onceover.connection import Connection
from onceover.errors import ConfigurationError

if TYPE_CHECKING:
    import grpc
    from google.cloud import bigquery
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient

REST_ENV = "ONCEOVER_BIGQUERY_REST"
GRPC_ENV = "ONCEOVER_BIGQUERY_GRPC"
PROJECT_ENV = "ONCEOVER_PROJECT"
LOCAL_PROJECT = "onceover-local"

_REST_RE = re.compile(r"^https?://[^/\s:]+(:\d{1,5})?/?$")
_GRPC_RE = re.compile(r"^[^/\s:]+:\d{1,5}$")
# Optionally domain-scoped ("example.com:my-project"), then 6-30 characters.
_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")

# gRPC's default 4 MiB receive cap is below BigQuery's 10 MB request cap; the
# official transport lifts both limits the same way.
GRPC_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]

WRITE_API_HOST = "bigquerystorage.googleapis.com"
"""The Storage Write API's global endpoint (the client library's ``DEFAULT_HOST``)."""
WRITE_API_SCOPES = (
    "https://www.googleapis.com/auth/bigquery",
    "https://www.googleapis.com/auth/bigquery.insertdata",
    "https://www.googleapis.com/auth/cloud-platform",
)
"""The scopes the client library asks for by default (its transport's ``AUTH_SCOPES``)."""
MTLS_ENV = "GOOGLE_API_USE_CLIENT_CERTIFICATE"


@dataclass(frozen=True)
class BigQueryConfig:
    """Where BigQuery is: a local endpoint pair, or real BigQuery when both are ``None``."""

    rest_endpoint: str | None = None
    grpc_endpoint: str | None = None
    project: str | None = None
    connection: Connection = field(default_factory=Connection)
    """How to reach real BigQuery (credentials, endpoints, proxy); unused locally."""

    def __post_init__(self) -> None:
        if (self.rest_endpoint is None) != (self.grpc_endpoint is None):
            missing = REST_ENV if self.rest_endpoint is None else GRPC_ENV
            given = GRPC_ENV if self.rest_endpoint is None else REST_ENV
            raise ConfigurationError(
                f"{given} is set but {missing} is not: set both for a local BigQuery, "
                "or neither for real BigQuery"
            )
        if self.rest_endpoint is not None and not _REST_RE.match(self.rest_endpoint):
            raise ConfigurationError(
                f"{REST_ENV}={self.rest_endpoint!r} is not an http(s)://host:port URL"
            )
        if self.grpc_endpoint is not None and not _GRPC_RE.match(self.grpc_endpoint):
            raise ConfigurationError(f"{GRPC_ENV}={self.grpc_endpoint!r} is not host:port")
        if self.project is not None and not _PROJECT_RE.match(self.project):
            raise ConfigurationError(f"{PROJECT_ENV}={self.project!r} is not a project id")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BigQueryConfig:
        """Read the ``ONCEOVER_*`` variables (empty counts as unset)."""
        env = os.environ if environ is None else environ
        return cls(
            rest_endpoint=env.get(REST_ENV) or None,
            grpc_endpoint=env.get(GRPC_ENV) or None,
            project=env.get(PROJECT_ENV) or None,
        )

    @property
    def is_local(self) -> bool:
        """True for a local BigQuery (endpoints set), False for real BigQuery."""
        return self.rest_endpoint is not None

    def resolved_project(self) -> str:
        """The project to bill and to qualify tables with."""
        if self.project:
            return self.project
        if self.is_local:
            return LOCAL_PROJECT
        from google.auth.exceptions import DefaultCredentialsError

        try:
            _, project = self.connection.credentials()
        except DefaultCredentialsError as exc:
            raise ConfigurationError(
                f"no BigQuery configured: set {REST_ENV} and {GRPC_ENV} for a local "
                "BigQuery, or sign in with `gcloud auth application-default login` "
                f"for real BigQuery ({exc})"
            ) from exc
        if not project:
            raise ConfigurationError(
                f"{PROJECT_ENV} is not set and the Application Default Credentials "
                "name no project; set it"
            )
        return str(project)

    def table_project(self) -> str:
        """The project of a table named without one (``save("dataset.table")``): the
        connector's, which qualifies such a table with its client's project, so
        ``parentProject`` when the write gives one, else :meth:`resolved_project`."""
        return self.connection.parent_project or self.resolved_project()

    def env(self) -> dict[str, str]:
        """The environment variables that reproduce this configuration in a child process."""
        values = {
            REST_ENV: self.rest_endpoint,
            GRPC_ENV: self.grpc_endpoint,
            PROJECT_ENV: self.project,
        }
        return {name: value for name, value in values.items() if value}

    def applied_to(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` with this configuration instead of whatever BigQuery it named."""
        cleaned = {k: v for k, v in environ.items() if k not in (REST_ENV, GRPC_ENV, PROJECT_ENV)}
        return {**cleaned, **self.env()}


def _config(config: BigQueryConfig | None) -> BigQueryConfig:
    return BigQueryConfig.from_env() if config is None else config


def bigquery_client(config: BigQueryConfig | None = None) -> bigquery.Client:
    """A google-cloud-bigquery ``Client`` (REST: datasets, tables, queries)."""
    from google.api_core.client_info import ClientInfo
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery

    config = _config(config)
    client_info = ClientInfo(user_agent=f"onceover/{__version__}")
    if not config.is_local:
        return _remote_bigquery_client(config, client_info)
    return bigquery.Client(
        project=config.resolved_project(),
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=config.rest_endpoint),
        client_info=client_info,
    )


def write_client(config: BigQueryConfig | None = None) -> BigQueryWriteClient:
    """A Storage Write API ``BigQueryWriteClient`` (gRPC: streams, appends, commits)."""
    from google.api_core.gapic_v1.client_info import ClientInfo
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
    from google.cloud.bigquery_storage_v1.services.big_query_write.transports import (
        BigQueryWriteGrpcTransport,
    )

    config = _config(config)
    client_info = ClientInfo(user_agent=f"onceover/{__version__}")
    if not config.is_local:
        return _remote_write_client(config.connection, client_info)
    import grpc

    assert config.grpc_endpoint is not None  # is_local guarantees it
    channel = grpc.insecure_channel(config.grpc_endpoint, options=GRPC_OPTIONS)
    transport = BigQueryWriteGrpcTransport(channel=channel)
    return BigQueryWriteClient(transport=transport, client_info=client_info)


def write_channel(config: BigQueryConfig | None = None) -> grpc.Channel:
    """A gRPC channel to the Storage Write API, as :func:`write_client`'s transport opens
    its own, for callers that send raw requests (the sink: :mod:`onceover_jobs.sink.wire.write_api`)
    and must not import the client library (seconds, and pandas where it is installed)."""
    import grpc

    config = _config(config)
    options: list[tuple[str, str | int]] = [
        *GRPC_OPTIONS,
        ("grpc.primary_user_agent", f"onceover/{__version__}"),
        # Connections of its own: gRPC shares them between channels to one endpoint, and
        # a channel made to replace a broken one would find the broken connection again,
        # waiting out its reconnect backoff (onceover_jobs.sink.wire.write_api).
        ("grpc.use_local_subchannel_pool", 1),
    ]
    if config.is_local:
        assert config.grpc_endpoint is not None  # is_local guarantees it
        return grpc.insecure_channel(config.grpc_endpoint, options=options)
    if config.connection.is_default and os.environ.get(MTLS_ENV, "").lower() == "true":
        # Client certificates (mTLS) are the client library's to find and present.
        transport: Any = write_client(config).transport
        return transport.grpc_channel
    return _remote_write_channel(config.connection, options)


def _remote_write_channel(connection: Connection, options: list[tuple[str, str | int]]) -> Any:
    """What the client library's transport does with the same connection: its credentials
    (Application Default Credentials if none are given, service accounts signing their own
    tokens) and quota project (:attr:`Connection.quota_project`), its endpoint, TLS, through
    its proxy."""
    import google.auth
    from google.api_core import grpc_helpers
    from google.oauth2 import service_account

    if connection.is_default:
        credentials, _ = google.auth.default(default_scopes=WRITE_API_SCOPES)
        if isinstance(credentials, service_account.Credentials):
            credentials = credentials.with_always_use_jwt_access(True)
    else:
        credentials, _ = connection.credentials()
    proxy = connection.proxy_url()
    if proxy is not None:
        options = [*options, ("grpc.http_proxy", proxy)]
    host = connection.storage_endpoint or WRITE_API_HOST
    return grpc_helpers.create_channel(
        host if ":" in host else f"{host}:443",
        credentials=credentials,
        quota_project_id=connection.quota_project,
        default_scopes=WRITE_API_SCOPES,
        default_host=WRITE_API_HOST,
        options=options,
    )


def _remote_bigquery_client(config: BigQueryConfig, client_info: Any) -> bigquery.Client:
    """Real BigQuery's REST client, as the connection says: its credentials, its project
    (``parentProject``: the jobs it runs, queries and copies, run and are billed there), its
    endpoint, through its proxy. The quota project is the credentials' own unless
    ``useParentProjectForMetadataOperations`` (:attr:`Connection.quota_project`)."""
    from google.api_core.client_options import ClientOptions
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import bigquery

    connection = config.connection
    if connection.is_default:
        return bigquery.Client(project=config.resolved_project(), client_info=client_info)
    credentials, named = connection.credentials()
    session = AuthorizedSession(credentials)
    proxy = connection.proxy_url()
    if proxy is not None:
        session.proxies = {"http": proxy, "https": proxy}
    options = (
        ClientOptions(api_endpoint=connection.http_endpoint) if connection.http_endpoint else None
    )
    return bigquery.Client(
        project=connection.parent_project or config.project or named or config.resolved_project(),
        credentials=credentials,
        _http=session,
        client_options=options,
        client_info=client_info,
    )


def _remote_write_client(connection: Connection, client_info: Any) -> BigQueryWriteClient:
    """Real BigQuery's Storage Write client, as the connection says: a TLS channel to
    its endpoint (Google's global one by default) with its credentials and quota
    project (:attr:`Connection.quota_project`), through its proxy (HTTP CONNECT)."""
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
    from google.cloud.bigquery_storage_v1.services.big_query_write.transports import (
        BigQueryWriteGrpcTransport,
    )

    if connection.is_default:
        return BigQueryWriteClient(client_info=client_info)
    credentials, _ = connection.credentials()
    extra: list[tuple[str, str | int]] = list(GRPC_OPTIONS)
    proxy = connection.proxy_url()
    if proxy is not None:
        extra.append(("grpc.http_proxy", proxy))

    def channel(*args: Any, **kwargs: Any) -> Any:
        # The transport's own channel, with the proxy and message caps added.
        kwargs["options"] = [*(kwargs.get("options") or []), *extra]
        return BigQueryWriteGrpcTransport.create_channel(*args, **kwargs)

    transport = BigQueryWriteGrpcTransport(
        host=connection.storage_endpoint or BigQueryWriteClient.DEFAULT_ENDPOINT,
        credentials=credentials,
        quota_project_id=connection.quota_project,
        channel=channel,
    )
    return BigQueryWriteClient(transport=transport, client_info=client_info)
