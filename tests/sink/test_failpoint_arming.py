"""A failpoint armed while the job runs (``arm_once``): fired once, by one process, at
the next hit after it was armed; nothing armed, nothing fires."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from google.api_core.exceptions import ServiceUnavailable
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.failpoints import Action


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(failpoints.ENV, raising=False)
    monkeypatch.setenv(failpoints.STATE_ENV, str(tmp_path))
    failpoints.reset()
    return tmp_path


def test_an_armed_point_fires_at_its_next_hit_and_only_once(state: Path) -> None:
    assert failpoints.hit("commit.after") is False  # nothing armed yet
    failpoints.arm_once(state, "commit.after", Action.DROP)
    assert failpoints.hit("append.before") is False  # another point: not taken
    assert failpoints.hit("commit.after") is True
    assert failpoints.hit("commit.after") is False
    assert not list(state.glob("*.arm*"))
    assert (
        "failpoint commit.after fired: drop (armed by the harness)"
        in (state / "fired.log").read_text()
    )


def test_an_armed_error_raises_unavailable(state: Path) -> None:
    failpoints.arm_once(state, "flush.after", Action.ERROR)
    with pytest.raises(ServiceUnavailable, match=r"flush\.after"):
        failpoints.hit("flush.after")


def _race(state: str, name: str, wins: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import os

    os.environ[failpoints.STATE_ENV] = state
    os.environ.pop(failpoints.ENV, None)
    failpoints.reset()
    wins.put(failpoints.hit(name))


def test_of_processes_racing_to_the_point_exactly_one_fires(state: Path) -> None:
    failpoints.arm_once(state, "append.response", Action.DROP)
    context = multiprocessing.get_context("fork")
    wins: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    racers = [
        context.Process(target=_race, args=(str(state), "append.response", wins)) for _ in range(6)
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    outcomes = [wins.get(timeout=5) for _ in racers]
    assert outcomes.count(True) == 1


@pytest.mark.parametrize(
    ("name", "action", "field"),
    [
        ("commit.nowhere", Action.ERROR, "unknown failpoint"),
        ("commit.before", Action.DROP, "no response"),
    ],
)
def test_arming_a_point_that_cannot_do_it_is_refused(
    state: Path, name: str, action: Action, field: str
) -> None:
    with pytest.raises(SinkOptionError, match=field):
        failpoints.arm_once(state, name, action)
    assert not list(state.glob("*.arm"))
