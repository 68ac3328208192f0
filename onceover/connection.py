"""How the sink reaches real BigQuery, beyond Application Default Credentials.

The sink's options name these as Google's spark-bigquery-connector names the same
things, so a job moving from one to the other keeps its options:

==================================  ==================================================
option                              meaning
==================================  ==================================================
``credentialsFile``                 a credentials file: a service account's key, a
                                    user's (``gcloud auth application-default login``)
                                    or a workload identity federation configuration
                                    (``"type": "external_account"``: a token from a file,
                                    a URL, AWS or an executable, exchanged at Google's
                                    STS); on a cluster, at the same path on every node
``credentials``                     the same file's JSON inline, base64-encoded (as the
                                    connector takes it) or as plain JSON
``gcpAccessToken``                  an OAuth access token, used as it is (it is not
                                    refreshed: for jobs shorter than its life)
``gcpImpersonationServiceAccount``  a service account to act as, with the credentials
                                    above (or the default ones) as the source
``parentProject``                   the project BigQuery jobs run in and are billed to
                                    (the REST client's project), and the project of a
                                    table named without one; tables named with one keep it
``useParentProjectForMetadataOperations``
                                    ``true``: ``parentProject`` is also the quota project
                                    of every call (``x-goog-user-project``, which needs
                                    ``serviceusage.services.use`` on it); default
                                    ``false``: calls count against the credentials' own
``bigQueryStorageGrpcEndpoint``     the Storage Write API endpoint, ``host:port``
                                    (regional: ``bigquerystorage.<region>.rep.googleapis.com:443``;
                                    Private Service Connect: your endpoint)
``bigQueryHttpEndpoint``            the BigQuery REST endpoint, ``https://host[:port]``
``proxyAddress``                    an HTTP proxy for both: ``host:port`` (the
                                    connector's form), ``http://host:port`` or
                                    ``https://host:port``, each taken as
                                    ``http://host:port`` (module docstring)
``proxyUsername``, ``proxyPassword`` the proxy's credentials
==================================  ==================================================

The proxy is always spoken to in plain HTTP (CONNECT for TLS to Google), whichever scheme
``proxyAddress`` names: the connector drops the scheme the same way (its transport makes
an HTTP proxy of any address), and gRPC ignores a proxy URL that is not ``http://`` and
would connect directly. An address without a port, or with another scheme (``socks5://``),
is refused.

Secrets (``credentials``, ``gcpAccessToken``, ``proxyPassword``) travel to the executors
inside the task, as the connector's do, and are never printed: :class:`Connection`
leaves them out of its ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceover.errors import ConfigurationError

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

SCOPES = (
    "https://www.googleapis.com/auth/bigquery",
    "https://www.googleapis.com/auth/cloud-platform",
)

OPTIONS = {
    "credentialsfile": "credentials_file",
    "credentials": "credentials_json",
    "gcpaccesstoken": "access_token",
    "gcpimpersonationserviceaccount": "impersonate",
    "parentproject": "parent_project",
    "useparentprojectformetadataoperations": "parent_for_metadata",
    "bigquerystoragegrpcendpoint": "storage_endpoint",
    "bigqueryhttpendpoint": "http_endpoint",
    "proxyaddress": "proxy",
    "proxyusername": "proxy_username",
    "proxypassword": "proxy_password",
}
"""The sink's option (lower case, as Spark hands them over) → :class:`Connection` field."""
OPTION_NAMES = {
    "credentials_file": "credentialsFile",
    "credentials_json": "credentials",
    "access_token": "gcpAccessToken",
    "impersonate": "gcpImpersonationServiceAccount",
    "parent_project": "parentProject",
    "parent_for_metadata": "useParentProjectForMetadataOperations",
    "storage_endpoint": "bigQueryStorageGrpcEndpoint",
    "http_endpoint": "bigQueryHttpEndpoint",
    "proxy": "proxyAddress",
    "proxy_username": "proxyUsername",
    "proxy_password": "proxyPassword",
}

_HOST_PORT_RE = re.compile(r"^[A-Za-z0-9.-]+:\d{1,5}$")
_HTTP_URL_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?/?$")
_PROXY_RE = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?/?$"
)
_ACCOUNT_RE = re.compile(r"^[^@\s]+@[A-Za-z0-9.-]+$")
_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")


class ConnectionOptionError(ConfigurationError, ValueError):
    """A connection option is wrong; the message names it."""

    def __init__(self, option: str, problem: str) -> None:
        self.option = option
        super().__init__(f"option {option!r}: {problem}")


@dataclass(frozen=True)
class Connection:
    """How to reach real BigQuery (module docstring); all unset: Application Default
    Credentials and Google's global endpoints."""

    credentials_file: str | None = None
    credentials_json: str | None = field(default=None, repr=False)
    """The credentials file's JSON text (decoded from the option's base64)."""
    access_token: str | None = field(default=None, repr=False)
    impersonate: str | None = None
    parent_project: str | None = None
    parent_for_metadata: bool = False
    """``useParentProjectForMetadataOperations``: ``parent_project`` is the quota project."""
    storage_endpoint: str | None = None
    http_endpoint: str | None = None
    proxy: str | None = None
    proxy_username: str | None = None
    proxy_password: str | None = field(default=None, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Connection:
        """The connection the sink's ``options`` (lower-case names) ask for; a wrong
        value raises :class:`ConnectionOptionError` naming the option."""
        given: dict[str, Any] = {
            name: options[key].strip()
            for key, name in OPTIONS.items()
            if options.get(key, "").strip()
        }
        if "credentials_json" in given:
            given["credentials_json"] = _decoded_credentials(given["credentials_json"])
        if "proxy" in given:
            given["proxy"] = _proxy_address(given["proxy"])
        if "parent_for_metadata" in given:
            given["parent_for_metadata"] = _flag(
                given["parent_for_metadata"], OPTION_NAMES["parent_for_metadata"]
            )
        connection = cls(**given)
        connection.check()
        connection._load_given()
        return connection

    def check(self) -> None:
        """Refuse what cannot work, naming the option."""
        sources = [
            n for n in ("credentials_file", "credentials_json", "access_token") if getattr(self, n)
        ]
        if len(sources) > 1:
            named = " and ".join(OPTION_NAMES[n] for n in sources)
            raise ConnectionOptionError(
                OPTION_NAMES[sources[1]], f"give one source of credentials, not {named}"
            )
        if self.credentials_file is not None and not Path(self.credentials_file).is_file():
            raise ConnectionOptionError(
                "credentialsFile",
                f"{self.credentials_file} is not a readable file here (on a cluster it must "
                "be at that path on the driver and on every executor)",
            )
        if self.impersonate is not None and not _ACCOUNT_RE.match(self.impersonate):
            raise ConnectionOptionError(
                "gcpImpersonationServiceAccount",
                f"{self.impersonate!r} is not a service account (name@project.iam."
                "gserviceaccount.com)",
            )
        if self.parent_project is not None and not _PROJECT_RE.match(self.parent_project):
            raise ConnectionOptionError(
                "parentProject", f"{self.parent_project!r} is not a project id"
            )
        if self.storage_endpoint is not None and not _HOST_PORT_RE.match(self.storage_endpoint):
            raise ConnectionOptionError(
                "bigQueryStorageGrpcEndpoint", f"{self.storage_endpoint!r} is not host:port"
            )
        if self.http_endpoint is not None and not _HTTP_URL_RE.match(self.http_endpoint):
            raise ConnectionOptionError(
                "bigQueryHttpEndpoint",
                f"{self.http_endpoint!r} is not an http(s)://host[:port] URL",
            )
        if self.proxy is not None and _proxy_address(self.proxy) != self.proxy:
            raise ConnectionOptionError(
                "proxyAddress", f"{self.proxy!r} is not in the form http://host:port"
            )
        if (self.proxy_username or self.proxy_password) and self.proxy is None:
            raise ConnectionOptionError("proxyUsername", "given without proxyAddress")
        if bool(self.proxy_username) != bool(self.proxy_password):
            missing = "proxyPassword" if self.proxy_username else "proxyUsername"
            raise ConnectionOptionError(missing, "give proxyUsername and proxyPassword together")

    def _load_given(self) -> None:
        """Load the credentials given as a file or inline, so that a kind not taken or a
        configuration that does not load is refused on the driver, naming the option.
        Loading fetches nothing: tokens are asked for by the first call."""
        if self.credentials_json is not None:
            _from_info(json.loads(self.credentials_json), "credentials")
        elif self.credentials_file is not None:
            _from_info(_read_file(self.credentials_file), "credentialsFile")

    @property
    def is_default(self) -> bool:
        return all(getattr(self, f.name) == f.default for f in fields(self))

    @property
    def quota_project(self) -> str | None:
        """The project every call counts against (``x-goog-user-project``), as the
        connector sends it: ``parentProject`` only with
        ``useParentProjectForMetadataOperations=true``; else None, and the calls count
        against the credentials' own project. ``parentProject`` alone bills the jobs
        (the REST client's project, :func:`onceover.bigquery.bigquery_client`)."""
        return self.parent_project if self.parent_for_metadata else None

    def proxy_url(self) -> str | None:
        """The proxy with its credentials, as HTTP clients and gRPC take it."""
        if self.proxy is None:
            return None
        if self.proxy_username is None:
            return self.proxy
        scheme, rest = self.proxy.split("://", 1)
        return f"{scheme}://{self.proxy_username}:{self.proxy_password}@{rest}"

    def credentials(self) -> tuple[Credentials, str | None]:
        """The credentials to call BigQuery with, and the project they name (if any)."""
        import google.auth
        from google.auth import impersonated_credentials

        project: str | None
        if self.access_token is not None:
            from google.oauth2.credentials import Credentials as TokenCredentials

            credentials: Any = TokenCredentials(self.access_token)
            project = None
        elif self.credentials_json is not None:
            credentials, project = _from_info(json.loads(self.credentials_json), "credentials")
        elif self.credentials_file is not None:
            credentials, project = _from_info(_read_file(self.credentials_file), "credentialsFile")
        else:
            credentials, project = google.auth.default(scopes=SCOPES)
        if self.impersonate is not None:
            credentials = impersonated_credentials.Credentials(
                source_credentials=credentials,
                target_principal=self.impersonate,
                target_scopes=list(SCOPES),
            )
        if self.quota_project is not None and hasattr(credentials, "with_quota_project"):
            credentials = credentials.with_quota_project(self.quota_project)
        return credentials, project


def _read_file(path: str) -> dict[str, Any]:
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConnectionOptionError(
            "credentialsFile", f"{path} is not a credentials file's JSON ({exc})"
        ) from None
    if not isinstance(info, dict):
        raise ConnectionOptionError("credentialsFile", f"{path} is not a credentials file's JSON")
    return info


def _from_info(info: dict[str, Any], option: str) -> tuple[Any, str | None]:
    """Credentials of the kinds a credentials file holds: a service account's key, a
    user's (``gcloud auth application-default login``), or workload identity federation
    (``external_account``). Loaded by kind, each with its own class, never by whatever a
    file claims to be (Google's advice for configurations from outside)."""
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

    kind = info.get("type")
    if kind == "service_account":
        account = service_account.Credentials.from_service_account_info(info, scopes=SCOPES)
        return account, info.get("project_id")
    if kind == "authorized_user":
        user = user_credentials.Credentials.from_authorized_user_info(info, scopes=list(SCOPES))
        return user, info.get("quota_project_id")
    if kind == "external_account":
        return _external_account(info, option), info.get("quota_project_id")
    raise ConnectionOptionError(
        option,
        f"holds credentials of type {kind!r}; give a service account's key, a user's "
        "credentials (authorized_user) or a workload identity federation configuration "
        "(external_account), or impersonate a service account",
    )


def _external_account(info: dict[str, Any], option: str) -> Any:
    """Workload identity federation: the external token comes from where the
    configuration's ``credential_source`` says (AWS, an executable, else a file, a URL
    or a certificate); nothing is fetched until the first call needs a token. The
    project is the configuration's ``quota_project_id`` if any: asking Google for the
    pool's project would be a call."""
    from google.auth import aws, identity_pool, pluggable

    source = info.get("credential_source")
    source = source if isinstance(source, dict) else {}
    kind: Any
    if str(source.get("environment_id", "")).startswith("aws"):
        kind = aws.Credentials
    elif "executable" in source:
        kind = pluggable.Credentials  # runs only with GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1
    else:
        kind = identity_pool.Credentials
    try:
        return kind.from_info(info, scopes=list(SCOPES))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConnectionOptionError(
            option, f"holds an external_account configuration that does not load: {exc}"
        ) from None


def _proxy_address(text: str) -> str:
    """``proxyAddress`` as ``http://host:port``: from ``host:port`` (the connector's form),
    ``http://host:port`` or ``https://host:port`` (module docstring: spoken to in HTTP)."""
    match = _PROXY_RE.match(text)
    if match is None:
        raise ConnectionOptionError(
            "proxyAddress",
            f"{text!r} is not host:port or http://host:port (a proxy's user and password "
            "go in proxyUsername and proxyPassword)",
        )
    scheme, host, port = match.group("scheme"), match.group("host"), match.group("port")
    if scheme is not None and scheme.lower() not in ("http", "https"):
        raise ConnectionOptionError(
            "proxyAddress",
            f"{text!r}: a {scheme} proxy is not supported; give an HTTP proxy as host:port "
            "or http://host:port",
        )
    if port is None:
        raise ConnectionOptionError("proxyAddress", f"{text!r} has no port: give host:port")
    if not 0 < int(port) < 65536:
        raise ConnectionOptionError("proxyAddress", f"{text!r}: port {port} is out of range")
    return f"http://{host}:{int(port)}"


def _flag(text: str, option: str) -> bool:
    """A boolean option, as the connector reads one (``true`` or ``false``, any case)."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ConnectionOptionError(option, f"{text!r} is neither true nor false")


def _decoded_credentials(text: str) -> str:
    """The ``credentials`` option: base64 of the JSON (the connector's form), or the JSON."""
    if not text.startswith("{"):
        try:
            text = base64.b64decode(text, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ConnectionOptionError(
                "credentials", "is neither base64-encoded JSON nor JSON"
            ) from None
    try:
        info = json.loads(text)
    except ValueError:
        raise ConnectionOptionError("credentials", "does not hold JSON") from None
    if not isinstance(info, dict) or "type" not in info:
        raise ConnectionOptionError(
            "credentials", "is not a credentials file's JSON (it has no 'type')"
        )
    return text
