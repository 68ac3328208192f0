"""Where the soak writes: the local BigQuery it starts, or real BigQuery through the
sink's connection options.

- **local**: a local BigQuery (in memory, or in DuckDB files under ``--data-dir``) and
  the gRPC fault proxy in front of its Storage Write API, which the query talks
  through; the table's streams are read from the local BigQuery's own account of them.
- **real**: nothing is started. The query is given the connection options
  (``credentialsFile``, ``parentProject``, ``bigQueryStorageGrpcEndpoint``, ...) as a
  user's job is, and a ``proxyAddress`` that is the soak's CONNECT proxy
  (:mod:`onceover_tools.soak.tunnel`), where the wire faults happen; a proxy the user
  gave is kept behind it. The soak's own reads (the counts, the verdict) go straight to
  BigQuery with the user's connection, never through the faults. The table's streams
  are the ones the sink reported to the control plane: BigQuery lists no write streams.
  Each soak writes a table of its own, named by its start (``rate_stream_<UTC time>``),
  and leaves it there, so a second soak never replaces the first's evidence.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import httpx
from google.cloud import bigquery

from onceover.bigquery import PROJECT_ENV, WRITE_API_HOST, BigQueryConfig, bigquery_client
from onceover.connection import OPTION_NAMES, Connection, ConnectionOptionError
from onceover.errors import ConfigurationError
from onceover_tools.chaos.proxy import FaultProxy, FiredWireFault, WireAction, WireFault
from onceover_tools.chaos.task_kill import kill_sender
from onceover_tools.localbq import LocalBigQueryOptions, LocalBigQueryProcess
from onceover_tools.localbq.admin import write_streams
from onceover_tools.soak.tunnel import TunnelFaultProxy, Upstream

LOCAL, REAL = "local", "real"
TARGETS = (LOCAL, REAL)
TABLE = "rate_stream"
PROXY_OPTIONS = ("proxyAddress", "proxyUsername", "proxyPassword")
"""Given to the soak's tunnel, which goes through that proxy; the job gets the tunnel."""


class WireFaults(Protocol):
    """What the soak's faults and samples need of a fault proxy (either kind)."""

    port: int
    plan: list[WireFault]
    fired: list[FiredWireFault]
    open_append_calls: int

    def arm_next(self, action: WireAction, method: str = ...) -> WireFault: ...


StreamFigures = Callable[[str], tuple[int, int]]
"""A table's write streams so far: (rows they took, streams created, ``_default`` aside)."""


@dataclass
class Target:
    describe: str
    direct: BigQueryConfig
    """The soak's and its control plane's own BigQuery: straight to it, not through the
    faults."""
    client: bigquery.Client
    """The soak's own reads, on :attr:`direct`."""
    job_bigquery: BigQueryConfig
    """The BigQuery the query's environment names (local: its endpoints, through the
    proxy; real: none, so the connection options decide)."""
    sink_options: dict[str, str]
    proxy: WireFaults
    table: str
    bigquery_pid: int | None = None
    streams: StreamFigures | None = None
    """``None``: from the control plane (real BigQuery lists no write streams)."""


def connection_options(given: list[tuple[str, str]]) -> dict[str, str]:
    """``--option NAME=VALUE`` pairs as the sink's options, each a connection option,
    checked as the sink checks them (a wrong one raises naming it)."""
    known = {name.lower(): name for name in OPTION_NAMES.values()}
    options: dict[str, str] = {}
    for name, value in given:
        if name.lower() not in known:
            raise ConnectionOptionError(
                name, f"not a connection option; they are {', '.join(sorted(known.values()))}"
            )
        options[known[name.lower()]] = value
    Connection.from_options({name.lower(): value for name, value in options.items()})
    return options


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d_%H%M%S")


@contextlib.contextmanager
def open_target(
    kind: str,
    *,
    dataset: str,
    options: dict[str, str],
    data_dir: Path | None,
    work: Path,
) -> Iterator[Target]:
    if kind == LOCAL:
        with _local(dataset, data_dir, work) as target:
            yield target
    else:
        with _real(dataset, options) as target:
            yield target


@contextlib.contextmanager
def _local(dataset: str, data_dir: Path | None, work: Path) -> Iterator[Target]:
    options = LocalBigQueryOptions(data_dir=data_dir)
    with LocalBigQueryProcess(options, log_path=work / "local-bigquery.log") as local:
        config = local.config
        assert config.grpc_endpoint is not None
        assert config.rest_endpoint is not None
        rest = config.rest_endpoint
        with FaultProxy(config.grpc_endpoint, on_kill=kill_sender) as proxy:
            client = bigquery_client(config)

            def streams(table: str) -> tuple[int, int]:
                found = write_streams(rest, table)
                return (
                    sum(int(s.get("rowCount") or 0) for s in found),
                    sum(s["streamType"] != "DEFAULT" for s in found),
                )

            yield Target(
                describe=f"the local BigQuery at {rest}",
                direct=config,
                client=client,
                job_bigquery=BigQueryConfig(rest, proxy.endpoint, config.project),
                sink_options={},
                proxy=proxy,
                table=f"{client.project}.{dataset}.{TABLE}",
                bigquery_pid=local.child.pid,
                streams=streams,
            )


@contextlib.contextmanager
def _real(dataset: str, options: dict[str, str]) -> Iterator[Target]:
    connection = Connection.from_options({k.lower(): v for k, v in options.items()})
    config = BigQueryConfig(project=os.environ.get(PROJECT_ENV) or None, connection=connection)
    upstream = (
        None
        if connection.proxy is None
        else Upstream(connection.proxy, connection.proxy_username, connection.proxy_password)
    )
    storage = _storage_endpoint(options)
    refuse_bypass(options, os.environ)
    with TunnelFaultProxy(storage, upstream=upstream, on_kill=kill_sender) as tunnel:
        sink_options = {k: v for k, v in options.items() if k not in PROXY_OPTIONS}
        sink_options["proxyAddress"] = tunnel.address
        project = config.table_project()
        yield Target(
            describe=f"real BigQuery, project {project}, Storage Write at {storage}",
            direct=config,
            client=bigquery_client(config),
            job_bigquery=BigQueryConfig(project=config.project),
            sink_options=sink_options,
            proxy=tunnel,
            table=f"{project}.{dataset}.{TABLE}_{_stamp()}",
        )


NO_PROXY_ENVS = ("no_grpc_proxy", "no_proxy", "NO_PROXY")
"""What gRPC (the first two) and the REST client (the last two) read to go around a proxy."""


def refuse_bypass(options: Mapping[str, str], environ: Mapping[str, str]) -> None:
    """Refuse an environment that would send the query around the soak's tunnel to the
    Storage Write endpoint: its wire faults would never fire, each failing the soak two
    minutes later, unexplained."""
    storage = _storage_endpoint(options)
    host = storage.rsplit(":", 1)[0].strip("[]").lower()
    for name in NO_PROXY_ENVS:
        value = environ.get(name) or ""
        for entry in (e.strip().lower() for e in value.split(",")):
            if entry and _bypasses(entry, host):
                raise ConfigurationError(
                    f"{name}={value} sends the query's connections to {storage} around "
                    "the soak's proxy, where worker_kill and connection_drop happen: unset "
                    f"it (or leave {entry} out) for the soak"
                )


def _bypasses(entry: str, host: str) -> bool:
    """Whether a ``no_proxy`` entry (``*``, a domain with or without a leading dot or
    ``*.``, a host, an address, a CIDR block, any with a port) covers ``host``."""
    if entry == "*":
        return True
    if "/" in entry:  # a CIDR block: only addresses fall in it
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
        return False
    bare = entry.removeprefix("*").removeprefix(".")
    if bare.count(":") == 1:  # host:port (an IPv6 address has more colons)
        bare = bare.split(":", 1)[0]
    bare = bare.strip("[]")
    return bool(bare) and (host == bare or host.endswith("." + bare))


def _storage_endpoint(options: Mapping[str, str]) -> str:
    given = {k.lower(): v for k, v in options.items()}.get("bigquerystoragegrpcendpoint")
    return given or f"{WRITE_API_HOST}:443"


def control_plane_streams(url: str, token: str) -> StreamFigures:
    """A table's streams as the sink reported them to the control plane (its one run's);
    while the control plane does not answer, the figures last read."""
    headers = {"Authorization": f"Bearer {token}"}
    last = (0, 0)

    def streams(table: str) -> tuple[int, int]:
        nonlocal last
        try:
            runs = httpx.get(
                f"{url}/api/runs", params={"table": table}, headers=headers, timeout=30
            )
            runs.raise_for_status()
            found = runs.json()["data"]
            if not found:
                return last
            run = httpx.get(f"{url}/api/runs/{found[0]['run_id']}", headers=headers, timeout=30)
            run.raise_for_status()
        except httpx.HTTPError:
            return last  # down for a moment: not a failed soak
        listed = [s for s in run.json()["streams"] if s["table"] == table]
        last = (
            sum(int(s["rows"]) for s in listed),
            sum(s["stream_type"] != "DEFAULT" for s in listed),
        )
        return last

    return streams
