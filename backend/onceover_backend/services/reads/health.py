"""Checks that the control plane's dependencies answer: the database and BigQuery."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from onceover import __version__
from onceover.bigquery import BigQueryConfig, bigquery_client, write_client
from onceover_backend.models import DependencyHealth, HealthPublic


def _timed(target: str, check: Callable[[], None]) -> DependencyHealth:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:  # a health check reports every failure, whatever its type
        error: str | None = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    else:
        error = None
    latency_ms = round((time.perf_counter() - started) * 1000, 1)
    return DependencyHealth(
        status="ok" if error is None else "error", target=target, latency_ms=latency_ms, error=error
    )


def check_database(engine: Engine) -> DependencyHealth:
    """``SELECT 1`` on a pooled connection."""

    def select_one() -> None:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    return _timed(engine.url.render_as_string(hide_password=True), select_one)


class BigQueryProbe:
    """Checks BigQuery over REST (list one dataset) and gRPC (the Write API channel connects).

    Clients are built on first use, not at start-up, so a backend without
    credentials still starts and reports why BigQuery is unreachable.
    """

    def __init__(self, config: BigQueryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._clients: tuple[Any, Any] | None = None

    @property
    def target(self) -> str:
        if self.config.is_local:
            return (
                f"local BigQuery REST {self.config.rest_endpoint} gRPC {self.config.grpc_endpoint}"
            )
        return "BigQuery (Application Default Credentials)"

    def _get_clients(self) -> tuple[Any, Any]:
        with self._lock:
            if self._clients is None:
                self._clients = (bigquery_client(self.config), write_client(self.config))
            return self._clients

    def check(self, timeout_s: float) -> DependencyHealth:
        def answer() -> None:
            import grpc

            rest, write = self._get_clients()
            # retry=None: a health check reports the first failure instead of retrying for minutes.
            list(rest.list_datasets(max_results=1, retry=None, timeout=timeout_s))
            try:
                grpc.channel_ready_future(write.transport.grpc_channel).result(timeout=timeout_s)
            except grpc.FutureTimeoutError:
                raise ConnectionError(
                    f"the Storage Write API channel did not connect within {timeout_s:g} s"
                ) from None

        return _timed(self.target, answer)


@dataclass
class _Dependency:
    """One dependency's check, the one in flight, and the last answer."""

    target: str
    check: Callable[[], DependencyHealth]
    running: Future[DependencyHealth] | None = None
    answer: DependencyHealth | None = None
    ended: float = 0.0  # time.monotonic() when ``answer`` came


class ClientPacing:
    """Turns for callers by address: one every ``interval_s`` per address, in order.

    A caller early for its turn waits for it, holding no thread; past ``max_waiting``
    callers waiting from one address, more are let through at once (waiting is for
    callers that wait for their answers; one that does not costs the same either way).
    """

    def __init__(self, interval_s: float, max_waiting: int = 256) -> None:
        self.interval_s = interval_s
        self.max_waiting = max_waiting
        self._next: dict[str, float] = {}  # address -> time.monotonic() of its next turn
        self._waiting: dict[str, int] = {}
        self._prune_at = 1024

    async def turn(self, address: str) -> None:
        now = time.monotonic()
        if len(self._next) > self._prune_at:  # forget addresses whose turn has passed
            self._next = {a: t for a, t in self._next.items() if t > now}
            self._prune_at = max(1024, 2 * len(self._next))
        turn = max(now, self._next.get(address, now))
        waiting = self._waiting.get(address, 0)
        if turn > now and waiting >= self.max_waiting:
            return  # through at once, not queued
        self._next[address] = turn + self.interval_s
        if turn == now:
            return
        self._waiting[address] = waiting + 1
        try:
            await asyncio.sleep(turn - now)
        finally:
            if self._waiting[address] > 1:
                self._waiting[address] -= 1
            else:
                del self._waiting[address]


class HealthChecks:
    """What ``/api/health`` answers, at a bounded cost however often it is called.

    Each dependency is checked by at most one thread at a time, on two threads of this
    object's own (never the default executor, which other work shares): concurrent
    callers wait for the check in flight and share its answer, which is served for
    ``cache_s`` after it ends (``age_s`` says how old it is). No caller waits longer
    than ``timeout_s`` and a second for a check: one that overruns its deadline is
    reported as failed and left to end on its own, and no second one starts beside it.

    Answers to one client address are paced (``client_interval_s``): a flood from one
    address waits its turns instead of keeping the event loop busy, which slowed ingest
    even with every answer cached; other addresses (a load balancer's
    probes) are not held up by it.
    """

    GRACE_S = 1.0

    def __init__(
        self,
        engine: Engine,
        probe: BigQueryProbe,
        timeout_s: float,
        cache_s: float,
        client_interval_s: float = 0.0,
    ) -> None:
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._pacing = ClientPacing(client_interval_s) if client_interval_s > 0 else None
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._database = _Dependency(
            engine.url.render_as_string(hide_password=True), lambda: check_database(engine)
        )
        self._bigquery = _Dependency(probe.target, lambda: probe.check(timeout_s))

    async def health(self, client: str | None, unauthenticated: int = 0) -> HealthPublic:
        """Both dependencies as they were at most ``cache_s`` ago, once it is the turn of
        ``client`` (an address)."""
        if self._pacing is not None and client is not None:
            await self._pacing.turn(client)
        database, bigquery = await asyncio.gather(
            self._answer(self._database), self._answer(self._bigquery)
        )
        ok = database.status == "ok" and bigquery.status == "ok"
        return HealthPublic(
            status="ok" if ok else "degraded",
            version=__version__,
            database=database,
            bigquery=bigquery,
            unauthenticated_requests=unauthenticated,
        )

    def close(self) -> None:
        """Stop the threads (a check under way ends on its own); a later call starts new ones."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def _answer(self, dependency: _Dependency) -> DependencyHealth:
        started = time.monotonic()
        with self._lock:
            if dependency.answer is not None and started - dependency.ended < self.cache_s:
                age_s = round(started - dependency.ended, 1)
                return dependency.answer.model_copy(update={"age_s": age_s})
            if dependency.running is None:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(2, thread_name_prefix="onceover-health")
                dependency.running = self._executor.submit(self._run, dependency)
            running = dependency.running
        try:
            # shield: a caller that gives up must not cancel the check the others share.
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(running)), self.timeout_s + self.GRACE_S
            )
        except TimeoutError:
            return DependencyHealth(
                status="error",
                target=dependency.target,
                latency_ms=round((time.monotonic() - started) * 1000, 1),
                error=f"TimeoutError: the check did not end within {self.timeout_s:g} s",
            )

    def _run(self, dependency: _Dependency) -> DependencyHealth:
        try:
            answer = dependency.check()
            with self._lock:
                dependency.answer, dependency.ended = answer, time.monotonic()
            return answer
        finally:
            with self._lock:
                dependency.running = None
