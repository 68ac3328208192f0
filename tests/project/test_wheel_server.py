"""The control plane installed as an operator installs it: the project's wheel with its
``server`` extra in a fresh virtualenv, then ``onceover serve`` started from an empty
folder, with nothing of this checkout on the path. It migrates an empty database (SQLite,
then PostgreSQL) to the migrations' head, which the wheel carries, and serves the API.

Installed offline from uv's cache (filled by ``make install``), at the versions of
``uv.lock``: nothing is downloaded."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import zipfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from onceover_backend.core.migrate import alembic_config
from sqlalchemy import create_engine, text

from onceover.preflight import free_port
from tests.conftest import own_postgres_database
from tests.helpers.waiting import wait_until
from tests.project.test_wheel_install import uv

VIEWER = "viewer-token-0123456789"
START_S = 120.0


@pytest.fixture(scope="module")
def server_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the wheel and its ``server`` extra alone (the Python it runs)."""
    tmp = tmp_path_factory.mktemp("wheel-server")
    uv("build", "--wheel", "--no-build-isolation", "--out-dir", str(tmp / "dist"))
    (wheel,) = (tmp / "dist").glob("onceover-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "onceover_backend/migrations/env.py" in names
    assert "onceover_backend/migrations/script.py.mako" in names
    assert any(n.startswith("onceover_backend/migrations/versions/") for n in names)
    lock = tmp / "pylock.server.toml"
    uv("export", "--frozen", "--format", "pylock.toml", "--no-emit-project", "--extra", "server",
       "-o", str(lock))  # fmt: skip
    venv = tmp / "venv"
    uv("venv", "--python", "3.11", str(venv))
    python = venv / "bin" / "python"
    uv("pip", "install", "--offline", "--python", str(python), "-r", str(lock), timeout=600)
    uv("pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel))
    uv("pip", "check", "--python", str(python))
    installed = {
        entry["name"].lower()
        for entry in json.loads(uv("pip", "list", "--python", str(python), "--format", "json"))
    }
    assert {"onceover", "fastapi", "alembic"} <= installed
    assert not installed & {"pyspark", "bqemulator", "pytest"}, installed
    return venv


def _heads() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def _serve(venv: Path, folder: Path, database_url: str) -> Iterator[str]:
    """``onceover serve`` from ``folder`` until the block ends; yields its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({
        "ONCEOVER_DATABASE_URL": database_url,
        "ONCEOVER_TOKENS": f"viewer:{VIEWER}",
        "ONCEOVER_LOG_FORMAT": "text",
    })  # fmt: skip
    log_path = folder.parent / f"{folder.name}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(venv / "bin" / "onceover"), "serve", "--port", str(port)],
            cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"

        def answers() -> bool | None:
            try:
                return httpx.get(f"{url}/api/health", timeout=2).status_code in (200, 503) or None
            except httpx.TransportError:
                return None

        def alive() -> None:
            assert process.poll() is None, log_path.read_text()[-3000:]

        try:
            wait_until("onceover serve answering", answers, START_S, every_s=0.2,
                       between=alive, seen=lambda: log_path.read_text()[-2000:])  # fmt: skip
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


def _answers_as_a_server(url: str) -> None:
    runs = httpx.get(f"{url}/api/runs", headers={"Authorization": f"Bearer {VIEWER}"}, timeout=10)
    assert runs.status_code == 200, runs.text
    assert runs.json() == {"data": [], "count": 0}
    assert httpx.get(f"{url}/api/runs", timeout=10).status_code == 401
    # No dashboard in the wheel: the page says where one comes from; the API works.
    home = httpx.get(url, timeout=10)
    assert home.status_code == 503
    assert "ONCEOVER_FRONTEND_DIST" in home.text


# ``subprocess_env``: a command's test (the cli tier); its environment is not used: the
# server gets nothing of this checkout's.
def test_serve_from_the_wheel_migrates_sqlite_and_serves(
    server_venv: Path, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    database = tmp_path / "db" / "onceover.db"
    database.parent.mkdir()
    folder = tmp_path / "empty"
    for url in _serve(server_venv, folder, f"sqlite:///{database}"):
        _answers_as_a_server(url)
    with closing(sqlite3.connect(database)) as db:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert revision == _heads()
    assert sorted(p.name for p in folder.iterdir()) == []  # it wrote nothing where it ran


def test_serve_from_the_wheel_migrates_postgresql_and_serves(
    server_venv: Path, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    with own_postgres_database() as database_url:
        for url in _serve(server_venv, tmp_path / "empty", database_url):
            _answers_as_a_server(url)
        engine = create_engine(database_url)
        try:
            with engine.connect() as connection:
                revision = connection.execute(text("SELECT version_num FROM alembic_version"))
                assert revision.scalar() == _heads()
        finally:
            engine.dispose()
