"""The control-plane benchmark against real PostgreSQL served by ``onceover serve
--workers 2``: every event posted is stored (counted in the database), the report
names the worker count; its workload's runs as far apart as asked, its bodies the
bytes the sink's emitter posts. Figures are not asserted (a benchmark, not a timed
test)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from onceover_jobs.outbox import EventEmitter
from onceover_tools.bench.control_plane_workload import build_workload

from onceover import events as ev
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


def test_run_every_spaces_the_runs_so_a_larger_size_adds_older_history() -> None:
    work = build_workload(12_000, 12_000, 2, 500, run_every_s=175)

    started = sorted(
        event.time
        for queue in work.clients
        for _, body in queue
        for event in ev.EVENT_LIST.validate_json(body)
        if isinstance(event, ev.RunStarted)
    )
    assert len(started) == work.runs >= 3
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(started)} == {175.0}


@pytest.mark.parametrize("seconds", ["0", "nan", "inf", "86401"])
def test_run_every_out_of_range_is_refused_by_name(
    subprocess_env: dict[str, str], seconds: str
) -> None:
    done = _bench("--run-every", seconds, env=subprocess_env)

    assert done.returncode == 2
    assert "--run-every must be seconds > 0 and <= 86,400" in done.stderr


def test_the_bench_posts_the_bodies_the_sinks_emitter_posts(tmp_path: Path) -> None:
    work = build_workload(1_200, 1_200, 1, 300)
    count, body = work.clients[0][0]
    events = ev.EVENT_LIST.validate_json(body)
    posted: list[bytes] = []

    def receive(request: httpx.Request) -> httpx.Response:
        posted.append(request.content)
        return httpx.Response(200, json={"stored": len(events)})

    emitter = EventEmitter(
        "http://127.0.0.1:9", "t", tmp_path / "spool", batch_size=count,
        transport=httpx.MockTransport(receive),
    )  # fmt: skip
    for event in events:
        emitter.emit(event)
    assert emitter.flush(10)
    emitter.close(1)

    assert posted == [body]  # the same bytes: compact JSON, as the emitter sends it
