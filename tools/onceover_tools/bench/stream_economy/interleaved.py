"""The runs: the modes' queries (and the floor's) interleaved, one micro-batch at a time,
in rounds; and the untimed warm-up before them."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onceover_tools.bench.stream_economy import counting
from onceover_tools.bench.stream_economy.figures import QueryFigure
from onceover_tools.bench.stream_economy.plan import BATCH_S, FIRST_BATCH_S, FLOOR
from onceover_tools.bench.stream_economy.progress import Progress
from onceover_tools.bench.stream_economy.report import figure_line, say
from onceover_tools.bench.stream_economy.session import Bench


@dataclass
class Running:
    """One mode's query in the interleaved run."""

    figure: QueryFigure
    table_id: str = ""
    files: list[Path] = field(default_factory=list)
    progress: Progress | None = None
    put: int = 0
    """Files put in its directory so far."""

    @property
    def name(self) -> str:
        return self.figure.name


def _running(modes: list[tuple[str, str | None]], rows: int, *, floor: bool) -> list[Running]:
    """The queries of an interleaved run: ``modes`` (name, mode option), then the floor."""
    from onceover_tools.bench.handoff import FORMAT

    running = [Running(QueryFigure(name, mode, expected_rows=rows)) for name, mode in modes]
    if floor:
        running.append(Running(QueryFigure(FLOOR, None, expected_rows=rows, sink=FORMAT)))
    return running


def schedule(batches: int, segment: int, modes: int) -> list[list[tuple[int, int]]]:
    """The rounds after the first batches: each a list of (mode index, files), the order
    rotated by one mode a round, until every mode has ``batches`` in all."""
    rounds: list[list[tuple[int, int]]] = []
    left = batches - 1
    while left > 0:
        files, number = min(segment, left), len(rounds) + 1
        rounds.append([((number - 1 + i) % modes, files) for i in range(modes)])
        left -= files
    return rounds


def run_modes(
    bench: Bench,
    modes: list[tuple[str, str | None]],
    batches: int,
    segment: int,
    round_loads: list[float] | None = None,
    *,
    floor: bool = False,
) -> list[QueryFigure]:
    """``batches`` micro-batches of each of ``modes`` (name, mode option), interleaved:
    every query started, then their first batches one after the other, then rounds
    of ``segment`` batches each (:func:`schedule`). With ``floor``, the same query into
    Spark's hand-off runs as one more mode, its figure last. A mode that fails is
    recorded and left out of the rounds after; the others go on."""
    running = _running(modes, batches * bench.rows_per_batch, floor=floor)
    loads = round_loads if round_loads is not None else []

    def attempt(run: Running, step: Callable[..., None], *args: Any) -> None:
        if run.figure.failed:
            return
        try:
            step(run, *args)
        except Exception as exc:
            run.figure.failed = f"{type(exc).__name__}: {exc}"[:600]
            say(f"FAILED: {run.name}: {run.figure.failed}")
            traceback.print_exc()

    def begin(run: Running) -> None:
        run.table_id = "" if run.figure.is_floor else bench.fresh_table(run.name)
        run.files = bench.files(run.name, 0, batches)
        run.progress = bench.start(run.name, run.table_id, run.figure.mode, run.figure.sink)
        stack.callback(end, run)

    def end(run: Running) -> None:
        assert run.progress is not None
        try:
            bench.stop(run.progress)
        except Exception as exc:
            if not run.figure.failed:
                run.figure.failed = f"{type(exc).__name__}: {exc}"[:600]
                say(f"FAILED: {run.name}: {run.figure.failed}")

    def turn(run: Running, files: int, number: int, timeout_s: float) -> None:
        assert run.progress is not None
        bench.put(run.name, run.files[run.put : run.put + files])
        run.put += files
        run.progress.wait_for(run.put, timeout_s)
        run.progress.tag(number)

    def first(run: Running) -> None:
        turn(run, 1, 0, FIRST_BATCH_S)
        if not run.figure.is_floor:
            run.figure.streams.first_batch = counting.created(bench, run.table_id)

    def settle(run: Running) -> None:
        assert run.progress is not None
        counting.settle(bench, run.figure, run.progress, run.table_id)

    with ExitStack() as stack:
        for run in running:
            attempt(run, begin)
        loads.append(round(os.getloadavg()[0], 2))
        for run in running:
            attempt(run, first)
        rounds = schedule(batches, segment, len(running))
        for number, turns in enumerate(rounds, start=1):
            loads.append(round(os.getloadavg()[0], 2))
            if len(running) > 1:
                say(f"  round {number} of {len(rounds)}, load {loads[-1]:.2f}")
            for index, files in turns:
                attempt(running[index], turn, files, number, FIRST_BATCH_S + files * BATCH_S)
    for run in running:
        attempt(run, settle)
    for run in running:
        if not run.figure.failed:
            say(figure_line(run.figure))
    return [run.figure for run in running]


def run_mode(bench: Bench, name: str, mode: str | None, batches: int) -> QueryFigure:
    """``batches`` micro-batches of one query alone (the warm-up)."""
    return run_modes(bench, [(name, mode)], batches, batches)[0]


def warm_up(bench: Bench, batches: int) -> None:
    """A few untimed batches of ``pending`` (it alone uses every kind of worker):
    the JVM's JIT and the workers' imports are not any mode's figure."""
    if batches < 1:
        return
    started = time.perf_counter()
    figure = run_mode(bench, "warmup", "pending", batches)
    if figure.failed:
        raise RuntimeError(f"the warm-up query failed: {figure.failed}")
    say(f"  warm-up, untimed: {time.perf_counter() - started:.1f} s")
