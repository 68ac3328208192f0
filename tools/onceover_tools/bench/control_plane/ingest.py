"""The two ways events go in: filled in-process, then posted over HTTP from several
clients while the dashboard's reads run; their rates over each tenth."""

from __future__ import annotations

import threading
import time

import httpx

from onceover_tools.bench.control_plane.reads import Readers
from onceover_tools.bench.control_plane.server import bearer
from onceover_tools.bench.control_plane_workload import Workload


def fill(
    database_url: str, work: Workload, batch: int, *, progress: bool = False
) -> tuple[float, list[float]]:
    """Store ``work``'s oldest events in-process, ``batch`` events a transaction, made
    run by run as they go in: the seconds it took, and the events/s over each tenth
    (none when a batch is more than a tenth)."""
    from onceover_backend.core.db import build_engine
    from onceover_backend.services.ingest.transaction import ingest_events

    engine = build_engine(database_url)
    marks: list[float] = []  # seconds since the start at each tenth
    stored = 0
    started = time.perf_counter()
    try:
        for events in work.fill_batches(batch):
            ingest_events(engine, events)
            stored += len(events)
            while len(marks) < 10 and stored >= work.fill_events * (len(marks) + 1) / 10:
                marks.append(time.perf_counter() - started)
                if progress:
                    print(f"    filled {stored:,} in {marks[-1]:.0f} s", flush=True)
    finally:
        engine.dispose()
    seconds = time.perf_counter() - started
    if batch > work.fill_events / 10:
        return seconds, []
    tenth = work.fill_events / 10
    return seconds, [tenth / (b - a) for a, b in zip([0.0, *marks], marks, strict=False)]


def post_all(
    base: str, work: Workload, readers: Readers | None = None
) -> tuple[float, list[float], list[float]]:
    """Post every client's bodies from its own thread (``readers`` reading meanwhile):
    the wall seconds, each POST's milliseconds, and the events/s over each tenth of the
    events posted."""
    latencies: list[list[float]] = [[] for _ in work.clients]
    done: list[tuple[float, int]] = []  # (seconds since the start, events) of each POST
    errors: list[str] = []
    start = [0.0]  # set when every client is ready, before any POST

    def begin() -> None:
        start[0] = time.perf_counter()
        if readers is not None:
            readers.start()

    gate = threading.Barrier(len(work.clients) + 1, action=begin)

    def client(number: int) -> None:
        headers = {**bearer("ingest"), "Content-Type": "application/json"}
        with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
            gate.wait()
            for count, body in work.clients[number]:
                sent = time.perf_counter()
                response = http.post("/api/events", content=body)
                answered = time.perf_counter()
                latencies[number].append((answered - sent) * 1000)
                done.append((answered - start[0], count))
                if response.status_code != 200:
                    errors.append(f"POST answered {response.status_code}: {response.text[:300]}")
                    return
                stored = response.json()["stored"]
                if stored != count:
                    errors.append(f"POST stored {stored} of {count} new events")
                    return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(work.clients))]
    for thread in threads:
        thread.start()
    gate.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start[0]
    if readers is not None:
        readers.stop()
    if errors:
        raise RuntimeError(errors[0])
    return seconds, [ms for per_client in latencies for ms in per_client], by_tenth(done)


def by_tenth(done: list[tuple[float, int]]) -> list[float]:
    """Events/s over each tenth of the events, from (seconds, events) per POST."""
    total = sum(count for _, count in done)
    if not done or max(count for _, count in done) > total / 10:
        return []  # too few POSTs to tell tenths apart
    rates: list[float] = []
    stored = 0
    previous = 0.0
    for seconds, count in sorted(done):
        stored += count
        while len(rates) < 10 and stored >= total * (len(rates) + 1) / 10:
            rates.append(total / 10 / max(seconds - previous, 1e-9))
            previous = seconds
    return rates
