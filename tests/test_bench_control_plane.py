"""The control-plane benchmark against real PostgreSQL served by ``onceover serve
--workers 2``: every event posted is stored (counted in the database), the report
names the worker count. Figures are not asserted (a benchmark, not a timed test)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import POSTGRES_ADMIN_DSN


def _bench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onceover_tools.bench.control_plane", *args],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_postgresql_served_by_two_workers_stores_every_event_posted(
    subprocess_env: dict[str, str],
) -> None:
    done = _bench(
        "--events", "3000", "--databases", "postgresql", "--server-workers", "2",
        "--clients", "2", "--batch", "250", "--reads", "2",
        "--postgres-admin", POSTGRES_ADMIN_DSN, env=subprocess_env,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "postgresql, 2 workers:" in done.stdout
    assert "from 2 clients to 2 server processes" in done.stdout
    # The bench counts the stored events in the database and fails on any shortfall.
    assert "| events stored | 3,000 |" in done.stdout


def test_server_workers_below_one_are_refused_by_name(subprocess_env: dict[str, str]) -> None:
    done = _bench("--server-workers", "0", env=subprocess_env)

    assert done.returncode == 2
    assert "--server-workers must be >= 1" in done.stderr
