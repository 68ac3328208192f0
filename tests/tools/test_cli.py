"""The ``onceover`` command line, run as a user runs it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from onceover.preflight import check_port_free, free_port
from tests.conftest import REPO_ROOT
from tests.helpers.processes import ONCEOVER, LineReader, run_onceover, running
from tests.helpers.waiting import wait_until


def _one_clear_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("onceover:")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_up_serves_the_dashboard_and_health_then_stops_cleanly(
    subprocess_env: dict[str, str], stop_signal: signal.Signals
) -> None:
    assert (REPO_ROOT / "frontend" / "dist" / "index.html").is_file(), "run `make frontend` first"
    port, rest_port, grpc_port = free_port(), free_port(), free_port()
    with running(
        [*ONCEOVER, "up", "--port", str(port), "--rest-port", str(rest_port),
         "--grpc-port", str(grpc_port)],
        env=subprocess_env, stdout=subprocess.PIPE,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        output = LineReader(process.stdout)
        output.wait_for("Ctrl-C to stop.", timeout_s=120)
        base = f"http://127.0.0.1:{port}"

        page = httpx.get(f"{base}/", timeout=10)
        health = httpx.get(f"{base}/api/health", timeout=30)

        assert page.status_code == 200
        assert '<div id="root">' in page.text
        assert '<script type="module"' in page.text
        assert health.status_code == 200, health.text
        assert health.json()["database"]["status"] == "ok"
        assert health.json()["bigquery"]["status"] == "ok"
        assert f"127.0.0.1:{grpc_port}" in health.json()["bigquery"]["target"]
        assert f"http://127.0.0.1:{rest_port}" in "".join(output.lines)
        roles = {"ingest", "viewer", "operator"}
        printed = [line.split()[-2:] for line in output.lines if len(line.split()) >= 2]
        tokens = {role: token for role, token in printed if role in roles}
        assert set(tokens) == {"ingest", "viewer", "operator"}
        viewer = {"Authorization": f"Bearer {tokens['viewer']}"}
        runs = httpx.get(f"{base}/api/runs", headers=viewer, timeout=10)
        assert runs.status_code == 200, runs.text
        assert httpx.get(f"{base}/api/runs", timeout=10).status_code == 401
        assert f"ONCEOVER_MONITOR_TOKEN={tokens['ingest']}" in "".join(output.lines)

        process.send_signal(stop_signal)
        assert process.wait(timeout=60) == 0
        output.wait_for("Onceover stopped.", timeout_s=5)
    for held in (port, rest_port, grpc_port):  # both children are gone
        check_port_free("127.0.0.1", held, "--port")


def test_serve_on_a_busy_port_is_one_line(subprocess_env: dict[str, str], busy_port: int) -> None:
    result = run_onceover("serve", "--port", str(busy_port), env=subprocess_env)

    _one_clear_line(result, f"port {busy_port} on 127.0.0.1 is already in use", "--port")


def test_bigquery_on_a_busy_port_is_one_line(
    subprocess_env: dict[str, str], busy_port: int
) -> None:
    result = run_onceover("bigquery", "--rest-port", str(busy_port), env=subprocess_env)

    _one_clear_line(result, f"port {busy_port}", "--rest-port")


def test_up_refuses_a_busy_backend_port_before_starting_anything(
    subprocess_env: dict[str, str], busy_port: int
) -> None:
    result = run_onceover("up", "--port", str(busy_port), "--rest-port", "0",
                          "--grpc-port", "0", env=subprocess_env)  # fmt: skip

    _one_clear_line(result, f"port {busy_port}", "--port")


def test_half_a_bigquery_configuration_is_one_line(subprocess_env: dict[str, str]) -> None:
    env = {**subprocess_env, "ONCEOVER_BIGQUERY_REST": "http://127.0.0.1:9050"}

    result = run_onceover("serve", "--port", "0", env=env)

    _one_clear_line(result, "ONCEOVER_BIGQUERY_GRPC is not")


def test_demo_without_java_is_one_line(subprocess_env: dict[str, str], tmp_path: Path) -> None:
    env = {**subprocess_env, "PATH": str(tmp_path)}
    env.pop("JAVA_HOME", None)

    result = run_onceover("demo", env=env)

    _one_clear_line(result, "Java 17 or newer", "JAVA_HOME")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("serve", "--port", "99999"), "--port: '99999' is not a port (0-65535)"),
        (("bench", "--soak-minutes", "-1"), "--soak-minutes: '-1' is not a number of minutes"),
        (("bench", "--soak-minutes", "nan"), "--soak-minutes: 'nan' is not a number of minutes"),
    ],
    ids=["port", "negative-minutes", "nan-minutes"],
)
def test_bad_arguments_name_the_option(
    subprocess_env: dict[str, str], argv: tuple[str, ...], said: str
) -> None:
    result = run_onceover(*argv, env=subprocess_env)

    assert result.returncode == 2
    assert said in result.stderr


def test_a_stopped_child_stops_up(subprocess_env: dict[str, str]) -> None:
    """If the local BigQuery dies, `up` stops the backend too and says which child died."""
    port = free_port()
    with running(
        [*ONCEOVER, "up", "--port", str(port), "--rest-port", "0", "--grpc-port", "0"],
        env=subprocess_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        assert process.stderr is not None
        output = LineReader(process.stdout)
        output.wait_for("BigQuery REST", timeout_s=120)
        rest_url = next(line for line in output.lines if "BigQuery REST" in line).split()[-1]
        bigquery_pid = wait_until(
            "finding the BigQuery child", lambda: _pid_listening_on(rest_url), 10
        )

        subprocess.run(["kill", "-KILL", str(bigquery_pid)], check=True)

        assert process.wait(timeout=60) == 2
        assert "the local BigQuery exited unexpectedly" in process.stderr.read()
    check_port_free("127.0.0.1", port, "--port")


def _pid_listening_on(url: str) -> int | None:
    port = url.rsplit(":", 1)[1]
    found = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True,
                           check=False).stdout  # fmt: skip
    marker = "pid="
    if marker not in found:
        return None
    return int(found.split(marker, 1)[1].split(",", 1)[0])


def test_an_old_python_is_one_line_before_make_builds_anything(tmp_path: Path) -> None:
    """The Makefile checks the Python it is given before creating any environment."""
    old_python = tmp_path / "python3"
    old_python.write_text('#!/bin/sh\ncase "$2" in *print*) echo 3.9.18;; *) exit 1;; esac\n')
    old_python.chmod(0o755)

    result = subprocess.run(
        ["bash", "scripts/preflight.sh", "python", str(old_python)], cwd=REPO_ROOT,
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"onceover: Python 3.11 or newer is needed, '{old_python}' is Python 3.9.18; "
        "install it or run make PYTHON=/path/to/python3.11"
    ]


def test_the_bench_writes_outside_the_repository_unless_told() -> None:
    """The tracked figures of record change only on purpose (``--out docs``)."""
    from onceover_tools.cli import build_parser

    parsed = build_parser().parse_args(["bench", "--quick"])
    repository = Path(__file__).resolve().parents[2]
    assert parsed.out == Path.home() / ".onceover" / "bench"
    assert repository not in parsed.out.resolve().parents
    assert build_parser().parse_args(["bench", "--out", "docs"]).out == Path("docs")


def test_redrive_takes_the_run_and_its_dead_letter_table() -> None:
    from onceover_tools.cli import build_parser, cmd_redrive

    args = build_parser().parse_args(
        ["redrive", "orders-1", "--dead-letter", "p.d.orders_dead_letters", "--key", "id"]
    )
    assert (args.run_id, args.dead_letter, args.key, args.handler) == (
        "orders-1", "p.d.orders_dead_letters", "id", cmd_redrive,
    )  # fmt: skip
    with pytest.raises(SystemExit):
        build_parser().parse_args(["redrive", "orders-1"])  # no dead-letter table: usage
