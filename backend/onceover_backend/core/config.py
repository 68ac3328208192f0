"""The backend's settings: one object, read from ``ONCEOVER_*`` environment variables."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[3]  # backend/onceover_backend/core/config.py
DEFAULT_DATA_DIR = Path(".onceover")
ROLES = ("ingest", "viewer", "operator")
# Tokens that read like examples from a README: refused outside development.
PLACEHOLDER_TOKENS = frozenset({"changeme", "changethis", "secret", "token", "example", "test"})
MIN_TOKEN_LENGTH = 16
# The dashboard's longest preset range ("Last 30 days") is drawn from the rollups.
MIN_ROLLUP_RETENTION_DAYS = 30
# 100 years: more is "forever", which is 0; and a cutoff before year 1 cannot be computed.
MAX_RETENTION_DAYS = 36_500


class Settings(BaseSettings):
    """Control-plane configuration. BigQuery is configured apart, in :mod:`onceover.bigquery`."""

    model_config = SettingsConfigDict(env_prefix="ONCEOVER_", extra="ignore")

    environment: Literal["development", "production"] = Field(
        default="development",
        description="production refuses placeholder or short tokens",
    )
    data_dir: Path = Field(
        default=DEFAULT_DATA_DIR, description="Where the default SQLite database lives"
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL: empty for an SQLite file in data_dir, or "
        "postgresql+psycopg://user:password@host/database",
    )
    tokens: SecretStr = Field(
        default=SecretStr(""),
        description="Bearer tokens as role:TOKEN pairs, comma-separated "
        "(roles: ingest, viewer, operator); more are created with `onceover token create`",
    )
    stalled_after_s: float = Field(
        default=180.0, gt=0, description="A running run with no event for this long is stalled"
    )
    stall_check_interval_s: float = Field(
        default=15.0, gt=0, description="How often the backend looks for stalled runs"
    )
    stale_after_s: float = Field(
        default=86400.0,
        gt=0,
        description="The overview calls a table stale when its last commit is older than "
        "this (no alert rule kind watches freshness)",
    )
    change_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="How often /api/changes looks for changes other replicas made",
    )
    max_events_per_request: int = Field(
        default=5000, gt=0, description="Largest event batch POST /api/events accepts"
    )
    ingest_concurrency: int = Field(
        default=40,
        gt=0,
        description="Event batches one process parses and stores at once; the others "
        "wait their turn without taking CPU from the dashboard's reads",
    )
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024,
        gt=0,
        description="Largest request body any route accepts (413 above it, before it is "
        "read); a job's emitter sends 500 events per request, far below the default",
    )
    frontend_dist: Path = Field(
        default=REPO_ROOT / "frontend" / "dist",
        description="Directory of the built dashboard served at /",
    )
    health_timeout_s: float = Field(
        default=5.0, gt=0, description="Deadline of each dependency check in /api/health"
    )
    health_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="How long /api/health answers from its last check of a dependency "
        "(concurrent callers share one check in any case)",
    )
    health_client_interval_s: float = Field(
        default=0.1,
        ge=0,
        description="Least time between two /api/health answers to one client address; "
        "calls in between wait their turn (0: no pacing)",
    )
    reconcile_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Deadline of each BigQuery call a reconciliation makes, retries included "
        "(an unanswered call ends the check as an error result)",
    )
    reconcile_on_success: bool = Field(
        default=True, description="Reconcile every run automatically when it succeeds"
    )
    reconcile_workers: int = Field(
        default=2, ge=1, description="Threads making the automatic checks of succeeded runs"
    )
    reconcile_queue: int = Field(
        default=100,
        ge=0,
        description="Automatic checks that may wait for a thread; past that, a succeeded "
        "run's check is stored as an error saying it was not made",
    )
    launch_modules: list[str] = Field(
        default=["onceover_jobs."],
        description="Module prefixes a resume may launch (JSON list); a run whose spec names "
        "any other module is refused",
    )
    launch_with: Literal["python", "spark-submit"] = Field(
        default="python",
        description="python: `python -m MODULE ARGS`; spark-submit: `spark-submit --master "
        "MASTER [spark_submit_args] MODULE_FILE ARGS`",
    )
    launch_python: str = Field(
        default=sys.executable, description="The interpreter of launched jobs (and their workers)"
    )
    spark_submit: str = Field(
        default="",
        description="spark-submit to use (default: on PATH, else the one PySpark ships)",
    )
    spark_master: str = Field(
        default="",
        description="Spark master for launched jobs (replaces a --master the run was started "
        "with); empty: the job's own default",
    )
    spark_submit_args: list[str] = Field(
        default=[], description="Extra spark-submit arguments (JSON list), e.g. --conf pairs"
    )
    launch_monitor_url: str = Field(
        default="",
        description="The URL launched jobs post their events to (`onceover serve` fills in "
        "its own address when empty)",
    )
    launch_ingest_token: SecretStr = Field(
        default=SecretStr(""),
        description="The ingest token launched jobs post with (default: the first ingest "
        "token in ONCEOVER_TOKENS)",
    )
    launch_log_dir: Path | None = Field(
        default=None,
        description="Where each launched attempt's log goes (default: data_dir/attempts)",
    )
    auto_resume_interval_s: float = Field(
        default=10.0,
        gt=0,
        description="How often the backend looks for runs to resume by "
        "their jobs' auto-resume policy",
    )
    public_url: str = Field(
        default="",
        description="The dashboard's address, for the deep links alerts carry "
        "(`onceover serve` fills in its own address when empty)",
    )
    alert_eval_interval_s: float = Field(
        default=15.0, gt=0, description="How often the backend evaluates the alert rules"
    )
    webhook_poll_s: float = Field(
        default=1.0, gt=0, description="How often the backend looks for webhook deliveries due"
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, description="Deadline of one webhook request (connect to answer)"
    )
    webhook_max_attempts: int = Field(
        default=10, ge=1, description="Tries of one delivery before it is given up as failed"
    )
    webhook_backoff_s: float = Field(
        default=5.0,
        gt=0,
        description="Wait before the 2nd try; doubles each try (with ±25% jitter), up to "
        "webhook_max_backoff_s. A receiver's Retry-After is honoured up to the same cap",
    )
    webhook_max_backoff_s: float = Field(
        default=3600.0, gt=0, description="Longest wait between two tries of a delivery"
    )
    webhook_allowed_networks: list[str] = Field(
        default=[],
        description="Networks (JSON list of CIDRs) webhooks may reach although they are "
        "link-local or cloud metadata addresses, which are refused otherwise",
    )
    retention_events_days: int = Field(
        default=30,
        description="Days raw events are kept after they arrive (0: forever). Nothing shown "
        "is read from them; they let ingest recognise an event sent twice",
    )
    retention_rollups_days: int = Field(
        default=400,
        description="Days the per-minute write-request counts are kept (0: forever; else at "
        f"least {MIN_ROLLUP_RETENTION_DAYS}, the dashboard's longest range)",
    )
    retention_audit_days: int = Field(
        default=400, description="Days audit log rows are kept (0: forever)"
    )
    retention_deliveries_days: int = Field(
        default=90,
        description="Days finished webhook deliveries and their tries are kept (0: forever)",
    )
    retention_interval_s: float = Field(
        default=3600.0, gt=0, description="How often the backend deletes what is past retention"
    )
    log_format: Literal["json", "text"] = Field(
        default="json", description="json: Cloud Logging structured lines; text: for a terminal"
    )
    metrics_token: SecretStr = Field(
        default=SecretStr(""),
        description="A bearer token that may read GET /metrics and nothing else (a viewer's "
        "or operator's token may too); for a Prometheus's authorization credentials",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Also serve /metrics on this port, without a token (one server process: "
        "not with --workers above 1); unset: only on the API's port, behind a token",
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        description="The address metrics_port listens on; 0.0.0.0 only on a network "
        "nobody but the scraper reaches",
    )
    oidc_issuer: str = Field(
        default="",
        description="Single sign-on for the dashboard: the OpenID Provider's issuer URL "
        "(its /.well-known/openid-configuration is read); empty: tokens only",
    )
    oidc_client_id: str = Field(default="", description="The dashboard's client id there")
    oidc_client_secret: SecretStr = Field(
        default=SecretStr(""), description="Its client secret (empty: a public client, PKCE alone)"
    )
    oidc_scopes: str = Field(
        default="openid email profile", description="Scopes asked for, space-separated"
    )
    oidc_roles_claim: str = Field(
        default="groups",
        description="The ID token's claim whose values map to roles (a list or one string)",
    )
    oidc_roles: str = Field(
        default="",
        description="VALUE:ROLE pairs, comma-separated (roles: viewer, operator): who signs "
        "in with which role; a person whose claim names none is refused",
    )
    oidc_provider_name: str = Field(
        default="your identity provider", description="The sign-in button's name for it"
    )
    oidc_session_hours: float = Field(
        default=12.0, gt=0, le=720, description="How long a dashboard session lasts"
    )

    @field_validator("database_url")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator(
        "retention_events_days",
        "retention_rollups_days",
        "retention_audit_days",
        "retention_deliveries_days",
    )
    @classmethod
    def _check_retention(cls, days: int, info: ValidationInfo) -> int:
        name = f"ONCEOVER_{str(info.field_name).upper()}"
        if days < 0 or days > MAX_RETENTION_DAYS:
            raise ValueError(
                f"{name}: {days} is not a number of days from "
                f"1 to {MAX_RETENTION_DAYS:,}; 0 keeps the rows forever"
            )
        if info.field_name == "retention_rollups_days" and 0 < days < MIN_ROLLUP_RETENTION_DAYS:
            raise ValueError(
                f"{name}: {days} days is shorter than the dashboard's longest range "
                f"({MIN_ROLLUP_RETENTION_DAYS} days); give at least that, or 0 to keep forever"
            )
        return days

    @model_validator(mode="after")
    def _check_tokens(self) -> Settings:
        pairs = parse_tokens(self.tokens.get_secret_value())  # raises on a malformed pair
        if self.environment == "production":
            for role, token in pairs:
                if token.lower() in PLACEHOLDER_TOKENS or len(token) < MIN_TOKEN_LENGTH:
                    raise ValueError(
                        f"ONCEOVER_TOKENS: the {role} token is a placeholder or shorter than "
                        f"{MIN_TOKEN_LENGTH} characters; production needs a random secret "
                        "(`onceover token create` makes one)"
                    )
        roles = parse_role_map(self.oidc_roles)  # raises on a malformed pair
        if self.oidc_issuer and (not self.oidc_client_id or not roles):
            raise ValueError(
                "ONCEOVER_OIDC_ISSUER is set: ONCEOVER_OIDC_CLIENT_ID and ONCEOVER_OIDC_ROLES "
                "(VALUE:ROLE pairs) are needed too"
            )
        metrics_token = self.metrics_token.get_secret_value().strip()
        if (
            self.environment == "production"
            and metrics_token
            and (
                metrics_token.lower() in PLACEHOLDER_TOKENS or len(metrics_token) < MIN_TOKEN_LENGTH
            )
        ):
            raise ValueError(
                "ONCEOVER_METRICS_TOKEN: a placeholder or shorter than "
                f"{MIN_TOKEN_LENGTH} characters; production needs a random secret"
            )
        if not self.database_url:
            self.database_url = f"sqlite:///{self.data_dir / 'onceover.db'}"
        return self

    def oidc_role_map(self) -> dict[str, str]:
        return parse_role_map(self.oidc_roles)

    def token_pairs(self) -> list[tuple[str, str]]:
        return parse_tokens(self.tokens.get_secret_value())

    def launch_token(self) -> str | None:
        """The token launched jobs post events with, if one is configured."""
        given = self.launch_ingest_token.get_secret_value().strip()
        if given:
            return given
        return next((token for role, token in self.token_pairs() if role == "ingest"), None)

    def dashboard_url(self) -> str:
        """Where alerts' deep links point: public_url, else the backend's own address."""
        return (self.public_url or self.launch_monitor_url).rstrip("/")

    def attempt_log_dir(self) -> Path:
        return self.launch_log_dir or self.data_dir / "attempts"


def parse_tokens(text: str) -> list[tuple[str, str]]:
    """``"ingest:A,viewer:B"`` -> ``[("ingest", "A"), ("viewer", "B")]``; errors name the pair."""
    pairs: list[tuple[str, str]] = []
    for number, item in enumerate((part.strip() for part in text.split(",")), start=1):
        if not item:
            continue
        role, sep, token = item.partition(":")
        role = role.strip()
        token = token.strip()
        if not sep or not token:
            raise ValueError(f"ONCEOVER_TOKENS: pair {number} is not role:TOKEN")
        if role not in ROLES:
            raise ValueError(
                f"ONCEOVER_TOKENS: pair {number} has role {role!r}; roles are {', '.join(ROLES)}"
            )
        pairs.append((role, token))
    return pairs


SSO_ROLES = ("viewer", "operator")


def parse_role_map(text: str) -> dict[str, str]:
    """``"data-viewers:viewer,data-ops:operator"`` -> ``{"data-viewers": "viewer", ...}``;
    a value may hold colons (a claim value like ``urn:team:ops:operator``: the last one
    parts it). Errors name the pair."""
    roles: dict[str, str] = {}
    for number, item in enumerate((part.strip() for part in text.split(",")), start=1):
        if not item:
            continue
        value, sep, role = item.rpartition(":")
        if not sep or not value.strip():
            raise ValueError(f"ONCEOVER_OIDC_ROLES: pair {number} is not VALUE:ROLE")
        if role.strip() not in SSO_ROLES:
            raise ValueError(
                f"ONCEOVER_OIDC_ROLES: pair {number} has role {role.strip()!r}; "
                f"roles are {', '.join(SSO_ROLES)} (ingest is for jobs' tokens only)"
            )
        roles[value.strip()] = role.strip()
    return roles


@lru_cache
def get_settings() -> Settings:
    return Settings()
