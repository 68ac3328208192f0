"""A real Prometheus server (Debian's, 2.42) on a free port of 127.0.0.1, scraping what a
test serves, for tests that check /metrics, the alert rules and the Grafana board as
Prometheus itself reads them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from onceover.preflight import free_port
from tests.helpers.waiting import wait_until

PROMETHEUS = os.environ.get("ONCEOVER_PROMETHEUS", "/usr/bin/prometheus")


def binary(name: str = "prometheus") -> str:
    """The server (or ``promtool`` beside it); the test fails saying how to install it."""
    path = str(Path(PROMETHEUS).with_name(name))
    if not (shutil.which(path) or Path(path).is_file()):
        pytest.fail(f"{name} not found at {path}: scripts/ensure-prometheus.sh installs it")
    return path


@dataclass(frozen=True)
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector (fails on a query Prometheus refuses)."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body = answer.json()
        assert body.get("status") == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def get(self, path: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}{path}", timeout=10)
        answer.raise_for_status()
        data: dict[str, Any] = answer.json()["data"]
        return data


@contextmanager
def prometheus(
    work: Path, target: str, *, bearer: str | None = None, rule_files: list[Path] | None = None
) -> Iterator[Prometheus]:
    """Prometheus scraping ``target`` (``host:port``) every second and evaluating
    ``rule_files`` every second, until the block ends."""
    work.mkdir(parents=True, exist_ok=True)
    job: dict[str, Any] = {
        "job_name": "onceover",
        "metrics_path": "/metrics",
        "static_configs": [{"targets": [target]}],
    }
    if bearer is not None:
        job["authorization"] = {"type": "Bearer", "credentials": bearer}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files or []],
        "scrape_configs": [job],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (work / "prometheus.log").open("w")
    process = subprocess.Popen(
        [binary(), f"--config.file={work / 'prometheus.yml'}",
         f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool | None:
        try:
            return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200 or None
        except httpx.TransportError:
            return None

    def alive() -> None:
        if process.poll() is not None:
            raise AssertionError(f"prometheus exited: {(work / 'prometheus.log').read_text()}")

    try:
        wait_until("prometheus ready", ready, 60, every_s=0.1, between=alive)
        yield Prometheus(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
