"""Why Spark's gateway exited at start in a loaded run (``JAVA_GATEWAY_EXITED``):
PySpark forks its JVM with ``preexec_fn``, and in a process hosting a gRPC server the
child can abort before ``exec`` while gRPC's fork handlers are on
(onceover/forking.py). Each side runs in a child process of its own, beside an idle
in-process local BigQuery, spawning children the way PySpark's ``launch_gateway`` does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SPAWNER = """
import sys
if sys.argv[1] == "grpc-first":
    import grpc  # before onceover: its fork policy comes too late
import json, os, signal, subprocess, time
from onceover_tools.localbq import LocalBigQuery

def like_launch_gateway():
    signal.signal(signal.SIGINT, signal.SIG_IGN)

deaths, spawns = {}, 0
with LocalBigQuery():
    deadline = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < deadline and not deaths and spawns < int(sys.argv[3]):
        child = subprocess.Popen(["true"], stdin=subprocess.PIPE, preexec_fn=like_launch_gateway)
        child.stdin.close()
        status = child.wait()
        spawns += 1
        if status != 0:
            deaths[status] = deaths.get(status, 0) + 1
policy = os.environ.get("GRPC_ENABLE_FORK_SUPPORT")
print(json.dumps({"spawns": spawns, "deaths": deaths, "policy": policy}))
"""


def spawn_beside_grpc(
    order: str, seconds: float, most: int, env: dict[str, str]
) -> dict[str, object]:
    """Spawn up to ``most`` children for at most ``seconds`` (or until one dies) in a
    fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", SPAWNER, order, str(seconds), str(most)],
        env=env, capture_output=True, text=True, timeout=seconds + 60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture
def env(subprocess_env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in subprocess_env.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}


def test_with_onceover_imported_first_no_child_dies_before_exec(env: dict[str, str]) -> None:
    # At the idle rate measured (21 deaths in 3,510), 1,000 spawns without a death
    # would happen by chance about once in 400 runs with the handlers on (~10 s on a
    # quiet machine; the deadline only bounds a loaded one).
    result = spawn_beside_grpc("onceover-first", 60, 1_000, env)
    assert result["policy"] == "0"
    assert result["deaths"] == {}, result
    spawns = result["spawns"]
    assert isinstance(spawns, int), result
    assert spawns >= 300, result


def test_with_grpc_imported_first_a_child_aborts_before_exec(env: dict[str, str]) -> None:
    """The hazard itself, so the test above can fail: gRPC's handlers on, a child
    dies of SIGABRT (stops at the first; ~170 spawns on average)."""
    result = spawn_beside_grpc("grpc-first", 40, 100_000, env)
    assert result["deaths"] == {"-6": 1}, result
