"""The Compose stack as files: ``docker-compose config`` accepts it, and everything the
production guide names (services, images, build contexts, ports, variables) exists.

No Docker daemon is needed: ``docker-compose config`` (Debian's package) parses,
interpolates and validates the files. The images themselves are not built here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from onceover_backend.core.config import Settings

from tests.conftest import REPO_ROOT

COMPOSE = REPO_ROOT / "docker-compose.yml"
ENV_EXAMPLE = REPO_ROOT / ".env.example"
GUIDE = REPO_ROOT / "docs" / "guides" / "production.md"
SERVICES = {
    "postgres", "backend", "bigquery", "spark-master", "spark-worker", "prometheus", "grafana",
}  # fmt: skip
SECRETS = {
    "POSTGRES_PASSWORD": "a-database-password",
    "INGEST_TOKEN": "ingest-0123456789abcdef",
    "VIEWER_TOKEN": "viewer-0123456789abcdef",
    "OPERATOR_TOKEN": "operator-0123456789abcdef",
    "GRAFANA_ADMIN_PASSWORD": "a-grafana-password",
}


def _compose(
    *args: str, env: dict[str, str], env_file: Path = ENV_EXAMPLE
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose not found: apt-get install -y docker-compose")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ONCEOVER_", "COMPOSE_"))}
    return subprocess.run(
        [binary, "--project-directory", str(REPO_ROOT), "--env-file", str(env_file),
         "-f", str(COMPOSE), *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _config(*files: str, env: dict[str, str], env_file: Path = ENV_EXAMPLE) -> dict[str, Any]:
    extra = [arg for file in files for arg in ("-f", str(REPO_ROOT / file))]
    done = _compose(*extra, "config", env=env, env_file=env_file)
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = yaml.safe_load(done.stdout)
    return parsed


def _published(port: str | dict[str, Any]) -> tuple[str, int]:
    """(host address, host port) of a published port as ``docker-compose config`` prints
    it: ``{published, target}`` without an address, ``"127.0.0.1:9050:9050/tcp"`` with one
    (docker-compose 1.29); ``host_ip`` in the long form (Compose v2)."""
    if isinstance(port, dict):
        return str(port.get("host_ip", "0.0.0.0")), int(port["published"])
    address, _, rest = port.split("/")[0].rpartition(":")[0].rpartition(":")
    return address or "0.0.0.0", int(rest)


def _known_variables() -> set[str]:
    """Every ONCEOVER_* variable something reads: the backend's settings, and the
    variables the jobs and the command line read (constants named ``*_ENV``)."""
    known = {f"ONCEOVER_{name.upper()}" for name in Settings.model_fields}
    for package in ("onceover", "jobs"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            known |= set(re.findall(r'_ENV\s*=\s*"(ONCEOVER_[A-Z0-9_]+)"', path.read_text()))
    return known


def test_the_stack_validates_with_the_example_settings() -> None:
    config = _config(env=SECRETS)

    assert set(config["services"]) == SERVICES
    assert "COMPOSE_PROFILES=local-bigquery" in ENV_EXAMPLE.read_text().splitlines()
    backend = config["services"]["backend"]
    assert backend["environment"]["ONCEOVER_TOKENS"] == (
        f"ingest:{SECRETS['INGEST_TOKEN']},viewer:{SECRETS['VIEWER_TOKEN']},"
        f"operator:{SECRETS['OPERATOR_TOKEN']}"
    )
    assert backend["environment"]["ONCEOVER_SPARK_MASTER"] == "spark://spark-master:7077"
    assert backend["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "/api/health" in " ".join(backend["healthcheck"]["test"])
    for service in ("backend", "spark-worker"):
        mounts = {v.split(":")[1] for v in config["services"][service]["volumes"]}
        assert {"/checkpoints", "/data"} <= mounts, service


def test_without_its_secrets_the_stack_is_refused_naming_them() -> None:
    done = _compose("config", env={})

    assert done.returncode != 0
    assert "POSTGRES_PASSWORD" in done.stderr


def test_real_bigquery_leaves_the_local_one_out_and_mounts_credentials(tmp_path: Path) -> None:
    # .env as the guide says to edit it for real BigQuery.
    edits = {
        "COMPOSE_PROFILES": "",
        "ONCEOVER_BIGQUERY_REST": "",
        "ONCEOVER_BIGQUERY_GRPC": "",
        "ONCEOVER_PROJECT": "my-project",
        "GOOGLE_CREDENTIALS_DIR": "/etc/onceover-google",
    }
    lines = [
        f"{line.split('=', 1)[0]}={edits[line.split('=', 1)[0]]}"
        if "=" in line and line.split("=", 1)[0] in edits
        else line
        for line in ENV_EXAMPLE.read_text().splitlines()
    ]
    env_file = tmp_path / ".env"
    env_file.write_text("\n".join(lines) + "\n")
    config = _config("docker/real-bigquery.yml", env=SECRETS, env_file=env_file)

    # docker-compose 1.29's `config` lists services of every profile; `up` starts a
    # profiled service only while its profile is active. So: the local BigQuery is the
    # only profiled service, and nothing depends on it, so the stack starts without it.
    profiled = {name for name, spec in config["services"].items() if spec.get("profiles")}
    assert profiled == {"bigquery"}
    assert config["services"]["bigquery"]["profiles"] == ["local-bigquery"]
    for name, spec in config["services"].items():
        assert "bigquery" not in spec.get("depends_on", {}), name
    for service in ("backend", "spark-worker"):
        spec = config["services"][service]
        assert spec["environment"]["GOOGLE_APPLICATION_CREDENTIALS"].startswith("/secrets/google")
        assert any(v.startswith("/etc/onceover-google:/secrets/google:ro") for v in spec["volumes"])
    backend = config["services"]["backend"]["environment"]
    assert (backend["ONCEOVER_BIGQUERY_REST"], backend["ONCEOVER_PROJECT"]) == ("", "my-project")


def test_every_service_has_an_image_or_a_build_that_exists() -> None:
    config = _config(env=SECRETS)

    for name, service in config["services"].items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            context = Path(service["build"]["context"])
            dockerfile = context / service["build"].get("dockerfile", "Dockerfile")
            assert dockerfile.is_file(), (name, dockerfile)
            for source in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile.read_text(), re.M):
                for path in source.split():
                    assert (context / path).exists(), (name, path)


def test_no_secret_is_written_into_the_files() -> None:
    for path in (COMPOSE, REPO_ROOT / "Dockerfile", REPO_ROOT / "docker" / "real-bigquery.yml"):
        text = path.read_text()
        assert not re.search(r"oo_[A-Za-z0-9_-]{16,}", text), path
        assert "PASSWORD=" not in text.replace("POSTGRES_PASSWORD=", ""), path
    example = dict(
        line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#")
    )  # fmt: skip
    assert all(example[name] == "" for name in SECRETS), "secrets in .env.example must be empty"


def test_every_variable_the_files_and_the_guide_name_exists() -> None:
    known = _known_variables()
    example = {
        line.split("=", 1)[0]
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#")
    }
    compose_text = COMPOSE.read_text()
    interpolated = set(re.findall(r"\$\{([A-Z0-9_]+)", compose_text))
    assert interpolated <= example, f"not in .env.example: {sorted(interpolated - example)}"

    config = _config(env=SECRETS)
    set_in_compose = {
        name
        for service in config["services"].values()
        for name in service.get("environment", {})
        if name.startswith("ONCEOVER_")
    }
    named = set_in_compose | {n for n in example if n.startswith("ONCEOVER_")}
    named |= set(re.findall(r"`(ONCEOVER_[A-Z0-9_]+)`", GUIDE.read_text()))
    assert named <= known, f"named but read by nothing: {sorted(named - known)}"


def test_the_guide_names_only_services_and_ports_the_stack_has() -> None:
    config = _config(env=SECRETS)
    rows = [
        line.split("|")[1:-1]
        for line in GUIDE.read_text().splitlines()
        if line.startswith("| `") and "`" in line.split("|")[1]
    ]
    table = {cells[0].strip().strip("`"): cells for cells in rows}
    services_in_guide = {name for name in table if name in SERVICES or "-" in name}
    assert services_in_guide == SERVICES

    published = {
        _published(port)[1]
        for service in config["services"].values()
        for port in service.get("ports", [])
    }
    for name in SERVICES:
        service = config["services"][name]
        ports_cell = table[name][2]
        for port in re.findall(r"`(\d{4,5})`", ports_cell):
            # Published on the host, or (inside the network) the port the command opens.
            assert int(port) in published or port in service.get("command", []), (name, port)
        image_cell = table[name][1]
        if "build" in service:
            assert "built from" in image_cell, name
        else:
            assert image_cell.split("`")[1].split(":")[0] in service["image"], name


def test_only_the_backend_is_published_beyond_this_host() -> None:
    # The local BigQuery answers anyone, the Spark master's UI and Prometheus's have no
    # login, and the backend's metrics port no token.
    config = _config(env=SECRETS)

    published = {
        (name, *_published(port))
        for name, service in config["services"].items()
        for port in service.get("ports", [])
    }
    assert published == {
        ("backend", "0.0.0.0", 8000),
        ("bigquery", "127.0.0.1", 9050),
        ("bigquery", "127.0.0.1", 9060),
        ("spark-master", "127.0.0.1", 8080),
        ("prometheus", "127.0.0.1", 9090),
        ("grafana", "127.0.0.1", 3000),
    }
    backend = config["services"]["backend"]
    assert backend["environment"]["ONCEOVER_METRICS_PORT"] == "9464"
    assert 9464 not in {_published(port)[1] for port in backend["ports"]}
    behind_a_proxy = _config(env={**SECRETS, "BACKEND_HOST_IP": "127.0.0.1"})
    assert [_published(p) for p in behind_a_proxy["services"]["backend"]["ports"]] == [
        ("127.0.0.1", 8000)
    ]


def test_the_stacks_retention_defaults_are_the_backends() -> None:
    backend = _config(env=SECRETS)["services"]["backend"]["environment"]
    defaults = Settings()

    retention = {n: v for n, v in backend.items() if n.startswith("ONCEOVER_RETENTION_")}
    assert retention == {
        f"ONCEOVER_{name.upper()}": str(getattr(defaults, name))
        for name in Settings.model_fields
        if name.startswith("retention_") and name.endswith("_days")
    }
