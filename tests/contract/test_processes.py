"""``ChildProcess.stop``: a stop asks (SIGTERM) and warns only when it had to kill; a
kill meant (``grace_s=0``, a fault's, a control-plane outage's) kills at once and says
nothing, so a run's log warns only of what went wrong."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

import pytest

from onceover.processes import ChildProcess
from tests.helpers.waiting import wait_until

DEAF = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)
"""A child that will not stop when asked."""


def _started(tmp_path: Path) -> ChildProcess:
    log = tmp_path / "child.log"
    child = ChildProcess("the deaf child", [sys.executable, "-c", DEAF], log_path=log)
    child.start()
    wait_until("the child to ignore SIGTERM", lambda: "ready" in log.read_text() or None, 30)
    return child


def test_a_kill_meant_kills_at_once_and_warns_of_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    child = _started(tmp_path)
    with caplog.at_level(logging.WARNING, logger="onceover.processes"):
        status = child.stop(grace_s=0)
    assert status == -signal.SIGKILL
    assert caplog.records == []


def test_a_stop_not_heeded_is_warned_of_then_killed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    child = _started(tmp_path)
    with caplog.at_level(logging.WARNING, logger="onceover.processes"):
        status = child.stop(grace_s=0.5)
    assert status == -signal.SIGKILL
    assert [r.getMessage() for r in caplog.records] == [
        "the deaf child did not stop within 0.5 s; killing it"
    ]
