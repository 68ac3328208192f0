"""Helpers to run the ``onceover`` command under test and read its output with deadlines."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

ONCEOVER = [sys.executable, "-m", "onceover_tools"]


class LineReader:
    """Collects a stream's lines on a thread so a test can wait for one with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line with {text!r} within {timeout_s} s: {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"output ended before {text!r}: {self.lines}")
            self.lines.append(line)
            if text in line:
                return line


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """Run ``argv``; on the way out, SIGTERM it if still running (so it stops its
    children), and SIGKILL only if that did not work."""
    with subprocess.Popen(argv, env=env, text=True, **popen) as process:
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()


def run_onceover(
    *args: str, env: dict[str, str], timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ONCEOVER, *args], env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
