"""``onceover db upgrade`` and ``onceover token ...``, run as a user runs them."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import alembic_config
from onceover_backend.main import create_app
from onceover_backend.tables import AuditLog
from sqlmodel import Session, select

from onceover.bigquery import BigQueryConfig
from tests.helpers.processes import run_onceover


def _head() -> str:
    """The migrations' head revision, as the scripts in migrations/ say (not a copy)."""
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def _env(subprocess_env: dict[str, str], url: str) -> dict[str, str]:
    return {**subprocess_env, "ONCEOVER_DATABASE_URL": url}


def test_db_upgrade_creates_the_tables(subprocess_env: dict[str, str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'onceover.db'}"

    first = run_onceover("db", "upgrade", env=_env(subprocess_env, url))
    again = run_onceover("db", "upgrade", "--database-url", url, env=subprocess_env)

    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"Database {url} is at revision {_head()} (head)."
    assert again.returncode == 0, again.stderr


def test_db_upgrade_on_postgresql_hides_the_password(
    subprocess_env: dict[str, str], postgres_url: str
) -> None:
    result = run_onceover("db", "upgrade", "--database-url", postgres_url, env=subprocess_env)

    assert result.returncode == 0, result.stderr
    assert f"at revision {_head()} (head)" in result.stdout


def test_a_created_token_works_until_revoked(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'onceover.db'}"
    env = _env(subprocess_env, url)

    created = run_onceover("token", "create", "--role", "viewer", "--name", "dash", env=env)
    duplicate = run_onceover("token", "create", "--role", "viewer", "--name", "dash", env=env)

    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("oo_")
    assert "shown only this once" in created.stderr
    assert duplicate.returncode == 2
    assert "a token named 'dash' exists" in duplicate.stderr
    listed = run_onceover("token", "list", env=env)
    assert "dash\tviewer" in listed.stdout
    assert token not in listed.stdout + listed.stderr
    assert token not in (tmp_path / "onceover.db").read_bytes().decode(errors="replace")

    app = create_app(
        Settings(database_url=url, frontend_dist=tmp_path / "none"), bigquery=BigQueryConfig()
    )
    with TestClient(app) as client:
        headers = {"Authorization": f"Bearer {token}"}
        assert client.get("/api/runs", headers=headers).status_code == 200
        assert client.post("/api/events", json=[], headers=headers).status_code == 403

        revoked = run_onceover("token", "revoke", "--name", "dash", env=env)
        assert revoked.returncode == 0, revoked.stderr
        assert client.get("/api/runs", headers=headers).status_code == 401

    with Session(app.state.engine) as session:  # the command line's actions are audited too
        audited = session.exec(select(AuditLog).where(AuditLog.method == "CLI")).all()
    assert sorted(a.action for a in audited) == ["createToken", "revokeToken"]


def test_production_refuses_placeholder_tokens(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    env = {
        **_env(subprocess_env, f"sqlite:///{tmp_path / 'x.db'}"),
        "ONCEOVER_ENVIRONMENT": "production",
        "ONCEOVER_TOKENS": "viewer:changeme",
    }

    result = run_onceover("db", "upgrade", env=env)

    assert result.returncode == 2
    assert "ONCEOVER_TOKENS: the viewer token is a placeholder" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_malformed_token_setting_names_the_pair(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    env = {
        **_env(subprocess_env, f"sqlite:///{tmp_path / 'x.db'}"),
        "ONCEOVER_TOKENS": "viewer:abc,admin:xyz",
    }

    result = run_onceover("token", "list", env=env)

    assert result.returncode == 2
    assert "pair 2 has role 'admin'" in result.stderr
