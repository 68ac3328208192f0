"""Check 1: the credentials the job would use load, get a token, and name a project."""

from __future__ import annotations

from onceover.bigquery import BigQueryConfig
from onceover_jobs.preflight.report import Check, fail, ok
from onceover_jobs.sink.job.options import SinkOptions

NAME = "credentials"


def _source(config: BigQueryConfig) -> str:
    """Where the credentials come from, as the user gave it."""
    connection = config.connection
    if connection.access_token is not None:
        source = "gcpAccessToken"
    elif connection.credentials_json is not None:
        source = "credentials (inline)"
    elif connection.credentials_file is not None:
        source = f"credentialsFile {connection.credentials_file}"
    else:
        source = "Application Default Credentials"
    if connection.impersonate is not None:
        source += f", impersonating {connection.impersonate}"
    return source


def check_credentials(config: BigQueryConfig, options: SinkOptions) -> Check:
    """A token is asked for now (the job's first call would ask for one too); one given
    as it is (``gcpAccessToken``) is tried by the next check's call."""
    if config.is_local:
        return ok(
            NAME,
            f"local BigQuery at {config.rest_endpoint} (no credentials needed); project "
            f"{config.resolved_project()}, table in {options.project}",
        )
    import google.auth.transport.requests
    from google.auth.exceptions import GoogleAuthError

    source = _source(config)
    try:
        credentials, project = config.connection.credentials()
        if not credentials.valid:  # a token given as it is (gcpAccessToken) is not renewed
            credentials.refresh(google.auth.transport.requests.Request())
    except (GoogleAuthError, OSError, ValueError) as exc:
        return fail(
            NAME,
            f"{source} could not get a token: {exc}",
            "sign in with `gcloud auth application-default login`, or give the job's "
            "credentialsFile / credentials option (a service account's key); with "
            "gcpImpersonationServiceAccount the source needs "
            "roles/iam.serviceAccountTokenCreator on that account",
        )
    who = getattr(credentials, "service_account_email", None) or "a user"
    billed = config.connection.parent_project or project or options.project
    return ok(
        NAME,
        f"{source} ({who}) got a token; they name project {project or '(none)'}, jobs "
        f"are billed to {billed}, the table is in {options.project}",
    )
