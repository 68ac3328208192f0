"""``onceover.waiting.poll_until``: the one poll-with-a-deadline every wait is built on,
and the tests' own ``tests.helpers.waiting.wait_until`` over it."""

from __future__ import annotations

import threading

import pytest

from onceover.waiting import poll_until


def test_the_first_value_the_probe_returns_is_returned() -> None:
    answers = iter([None, None, 0, 7])
    assert poll_until(lambda: next(answers), 5, timed_out=AssertionError) == 0


def test_past_the_deadline_the_callers_exception_is_raised() -> None:
    misses: list[int] = []

    def probe() -> None:
        misses.append(1)

    with pytest.raises(TimeoutError, match="never"):
        poll_until(probe, 0.1, timed_out=lambda: TimeoutError("never"), every_s=0.01)
    assert len(misses) >= 2  # it kept looking until the deadline


def test_what_runs_between_looks_may_end_the_wait() -> None:
    def child_died() -> None:
        raise RuntimeError("the child exited with status 3")

    with pytest.raises(RuntimeError, match="status 3"):
        poll_until(lambda: None, 60, timed_out=AssertionError, between=child_died)


def test_a_set_stop_ends_the_wait_as_ctrl_c_would() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(KeyboardInterrupt):
        poll_until(lambda: None, 60, timed_out=AssertionError, stop=stop)


def test_the_tests_wait_fails_naming_what_and_what_was_seen() -> None:
    from tests.helpers.waiting import wait_until

    answers = iter([None, "there"])
    assert wait_until("an answer", lambda: next(answers), 5, every_s=0.01) == "there"
    with pytest.raises(AssertionError, match=r"^the run succeeding did not .* seen: running$"):
        wait_until("the run succeeding", lambda: None, 0.05, every_s=0.01, seen=lambda: "running")
