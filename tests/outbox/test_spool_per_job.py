"""The spool per token under a per-user folder (issue 25).

Before: every job on a machine spooled into one folder, ``<tmp>/onceover-spool``, the
same for every user, and any job's emitter sent every file in it with its own token.
A job whose token was revoked drained the other jobs' events into ``rejected.jsonl``
(401 is final), and another user could read the folder or plant events in it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from onceover_backend.core.config import Settings
from onceover_backend.core.db import build_engine
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_backend.services.access.tokens import create_token, revoke_token
from onceover_jobs.outbox import (
    PARKED_DIR,
    REJECTED_FILE,
    SPOOL_DIR_ENV,
    EventEmitter,
    NullEmitter,
    default_spool_root,
    emitter_for,
    spool_dirs,
)

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from onceover.errors import ConfigurationError
from onceover.preflight import free_port
from tests.backend import factory as f
from tests.backend.conftest import TOKENS, VIEWER, bearer
from tests.backend.live import serving, wait_for_status
from tests.helpers.receiver import POISON_RUN, TOKEN, Receiver
from tests.helpers.waiting import wait_until
from tests.outbox.test_emitter import make_events, spool_ids


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's environment of this test's own: ``XDG_STATE_HOME``, ``HOME`` and the
    temporary folder all under ``tmp_path``, no ``ONCEOVER_SPOOL_DIR``."""
    monkeypatch.delenv(SPOOL_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


@contextmanager
def backend_on(app: FastAPI, port: int) -> Iterator[str]:
    """Serve ``app`` on ``port`` (where jobs already tried to send) until the block ends."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, name="test-backend", daemon=True)
    thread.start()
    wait_until(f"the backend on port {port} starting", lambda: server.started or None, 30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def control_plane(database: str, home: Path) -> FastAPI:
    """The backend's app on ``database`` (upgraded), with one token per role."""
    settings = Settings(
        database_url=database,
        tokens=TOKENS,
        frontend_dist=home / "no-dashboard",
        stall_check_interval_s=3600,
        auto_resume_interval_s=3600,
        alert_eval_interval_s=3600,
        reconcile_on_success=False,
    )
    return create_app(settings, bigquery=BigQueryConfig())


def of_job(events: list[ev.Event], job: str) -> list[ev.Event]:
    return [event.model_copy(update={"job": job}) for event in events]


def ids_in(folder: Path) -> list[str]:
    """Ids of the events in a folder's spool files (``spool_ids`` of that folder)."""
    return spool_ids(folder) if folder.is_dir() else []


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the emitter logged at WARNING and above."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("onceover_jobs.outbox.") and r.levelno >= logging.WARNING
    ]


def spool(emitter: object) -> Path:
    assert isinstance(emitter, EventEmitter), emitter
    return emitter.spool_dir


def test_a_revoked_token_parks_only_its_jobs_events_and_the_other_jobs_are_stored(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = f"sqlite:///{home / 'onceover.db'}"
    upgrade_to_head(database)
    engine = build_engine(database)
    orders_token = create_token(engine, "ingest", "orders", "test")
    refunds_token = create_token(engine, "ingest", "refunds", "test")
    engine.dispose()
    orders = of_job(f.full_run("orders-run"), "orders")
    refunds = of_job(f.full_run("refunds-run"), "refunds")
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    # The backend is down: both jobs spool into the default folder, and end.
    for token, events in ((orders_token, orders), (refunds_token, refunds)):
        emitter = emitter_for(url, token)
        for event in events:
            emitter.emit(event)
        emitter.close(2)
        assert emitter.spooled == len(events)
    caplog.clear()  # the outage's own warnings

    engine = build_engine(database)
    revoke_token(engine, "refunds", "test")  # an operator revokes the refunds job's token
    engine.dispose()
    with backend_on(control_plane(database, home), port):
        # The refunds job comes back first (still with its revoked token) and sends
        # what it finds in the spool; then the orders job.
        refused = emitter_for(url, refunds_token)
        assert refused.flush(10)
        later = of_job([f.heartbeat("refunds-run", "a2", 9)], "refunds")
        refused.emit(later[0])  # a refused job that goes on running
        assert refused.flush(10)
        accepted = emitter_for(url, orders_token)
        assert accepted.flush(10)

        run = wait_for_status(url, VIEWER, "orders-run", "succeeded", timeout_s=10)
        assert run["rows_committed"] == 100
        gone = httpx.get(f"{url}/api/runs/refunds-run", headers=bearer(VIEWER), timeout=10)
        assert gone.status_code == 404
        refused.close(1)
        accepted.close(1)

    assert (accepted.delivered, accepted.rejected, accepted.parked) == (len(orders), 0, 0)
    assert (refused.delivered, refused.rejected) == (0, 0)
    assert refused.parked == len(refunds) + 1
    root = home / "state" / "onceover" / "spool"
    assert spool(refused).parent == spool(accepted).parent == root
    # Parked whole, as spool files, in the refunds job's own folder; nothing else is.
    parked = spool(refused) / PARKED_DIR
    assert sorted(ids_in(parked)) == sorted(e.id for e in refunds + later)
    assert not any(root.rglob(REJECTED_FILE))
    assert ids_in(spool(refused)) == ids_in(spool(accepted)) == []
    # One line (for both batches) says whose events, where they are and what to do.
    (line,) = said(caplog)
    assert "refused this job's token (HTTP 401" in line
    assert "job 'refunds' (run refunds-run)" in line
    assert f"parked in {parked} " in line
    assert "Fix the job's token" in line
    assert f"mv {parked}/events-* {spool_dirs(root, url, None)[1]}/" in line


def test_a_token_without_the_ingest_role_parks_too(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = f"sqlite:///{home / 'onceover.db'}"
    upgrade_to_head(database)
    events = f.full_run("viewer-run")
    with serving(control_plane(database, home)) as url:
        emitter = emitter_for(url, VIEWER)  # a viewer's token given as the monitor token
        for event in events:
            emitter.emit(event)
        assert emitter.flush(10)
        emitter.close(1)
    assert (emitter.delivered, emitter.parked, emitter.rejected) == (0, len(events), 0)
    assert sorted(ids_in(spool(emitter) / PARKED_DIR)) == sorted(e.id for e in events)
    (line,) = said(caplog)
    assert "refused this job's token (HTTP 403" in line


def test_parked_events_are_sent_once_moved_where_the_log_says(
    receiver: Receiver, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = make_events(3, run_id="revoked-run")
    refused = emitter_for(receiver.url, "revoked")
    for event in events:
        refused.emit(event)
    assert refused.flush(5)
    refused.close(1)
    assert receiver.ids() == set()
    parked = spool(refused) / PARKED_DIR
    assert sorted(ids_in(parked)) == sorted(e.id for e in events)

    (line,) = said(caplog)
    command = line.split("send them with: ")[1]
    subprocess.run(["sh", "-c", command], check=True, timeout=30)  # as the log says
    assert ids_in(parked) == []
    shared = spool_dirs(default_spool_root(), receiver.url, None)[1]

    fixed = emitter_for(receiver.url, TOKEN)  # the job with its new token
    assert fixed.flush(5)
    assert receiver.ids() == {e.id for e in events}
    assert ids_in(shared) == []
    fixed.close(1)


def test_a_malformed_event_is_set_aside_in_its_own_jobs_folder(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SPOOL_DIR_ENV, str(tmp_path / "spool"))
    good = make_events(5, run_id="good-run")
    poison = make_events(1, run_id=POISON_RUN)[0]
    revoked = make_events(2, run_id="revoked-run")
    receiver.down()
    jobs = [(TOKEN, [*good[:2], poison, *good[2:]]), ("revoked", revoked)]
    emitters = []
    for token, events in jobs:
        emitter = emitter_for(receiver.url, token)
        for event in events:
            emitter.emit(event)
        emitter.close(1)
        emitters.append(emitter)

    receiver.up()
    for token, _ in reversed(jobs):  # the revoked job first, as above
        assert emitter_for(receiver.url, token).flush(5)
    assert receiver.ids() == {e.id for e in good}

    accepted, refused = (spool(emitter) for emitter in emitters)
    records = [json.loads(line) for line in (accepted / REJECTED_FILE).read_text().splitlines()]
    assert [(r["status"], [e["id"] for e in r["events"]]) for r in records] == [(422, [poison.id])]
    assert sorted(ids_in(refused / PARKED_DIR)) == sorted(e.id for e in revoked)
    assert not (refused / REJECTED_FILE).exists()
    assert not (accepted / PARKED_DIR).exists()
    for token, _ in jobs:
        emitter_for(receiver.url, token).close(1)


def _old_layout(folder: Path, run_id: str, count: int) -> list[str]:
    """A spool file as the emitter wrote it before spools were per token."""
    folder.mkdir(parents=True, exist_ok=True)
    events = make_events(count, run_id=run_id)
    name = f"events-00000000000000000001-{os.getpid()}-000000.jsonl"
    (folder / name).write_text("".join(e.model_dump_json() + "\n" for e in events))
    return [e.id for e in events]


def test_what_was_spooled_before_the_upgrade_is_sent_by_a_job_whose_token_works(
    receiver: Receiver, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old_default = home / "tmp" / "onceover-spool"  # <tmp>/onceover-spool, for every user
    backend_folder = spool_dirs(old_default, receiver.url, None)[1]
    before = _old_layout(backend_folder, "before-upgrade", 4)
    theirs: list[str] = []
    if os.getuid() == 0:  # only root can give a file to another user
        # Anyone could write in <tmp>/onceover-spool: what another user left is not sent.
        theirs = _old_layout(backend_folder / "x", "someone-else", 1)
        (planted,) = (backend_folder / "x").glob("events-*")
        os.chown(planted, 4242, 4242)
        planted.rename(backend_folder / planted.name.replace("-000000.", "-000001."))

    # A job with a revoked token leaves them where they are, and parks only its own.
    refused = emitter_for(receiver.url, "revoked")
    refused.emit(make_events(1, run_id="revoked-run")[0])
    assert refused.flush(5)
    assert sorted(ids_in(backend_folder)) == sorted(before + theirs)
    assert refused.parked == 1
    assert any("left where it is" in r.getMessage() for r in caplog.records)

    accepted = emitter_for(receiver.url, TOKEN)
    assert accepted.flush(5)
    assert receiver.ids() == set(before)
    assert ids_in(backend_folder) == theirs
    refused.close(1)
    accepted.close(1)


def test_the_old_layout_under_onceover_spool_dir_is_sent(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "spool"
    monkeypatch.setenv(SPOOL_DIR_ENV, str(root))
    shared = spool_dirs(root, receiver.url, TOKEN)[1]
    before = _old_layout(shared, "before-upgrade", 3)
    emitter = emitter_for(receiver.url, TOKEN)
    # Without a flush: a new emitter looks at once.
    wait_until("the old files sent", lambda: receiver.ids() == set(before) or None, 10)
    assert spool(emitter).parent == root
    wait_until("the old folder empty", lambda: ids_in(shared) == [] or None, 10)
    emitter.close(1)


def test_the_default_folder_is_per_user_and_private(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = default_spool_root()
    assert root == home / "state" / "onceover" / "spool"
    assert stat.S_IMODE((home / "state" / "onceover").stat().st_mode) == 0o700

    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_spool_root() == home / "home" / ".local" / "state" / "onceover" / "spool"
    assert stat.S_IMODE((home / "home" / ".local" / "state" / "onceover").stat().st_mode) == 0o700

    # Without a home to write in (a file here; HOME=/nonexistent for a service user,
    # which root could create): a folder of this user's own in the temporary folder.
    (home / "no-home").write_text("")
    monkeypatch.setenv("HOME", str(home / "no-home"))
    private = home / "tmp" / f"onceover-{os.getuid()}"
    assert default_spool_root() == private / "spool"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    private.chmod(0o755)  # ours, readable by others: closed again
    assert default_spool_root() == private / "spool"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700

    monkeypatch.setenv(SPOOL_DIR_ENV, str(home / "chosen"))
    assert default_spool_root() == home / "chosen"


def test_a_spool_is_private_to_its_token(receiver: Receiver, home: Path) -> None:
    emitter = emitter_for(receiver.url, TOKEN)
    other = emitter_for(receiver.url, "another-token")
    try:
        assert spool(emitter) != spool(other)
        assert spool(emitter).parent == spool(other).parent == default_spool_root()
        assert TOKEN not in str(spool(emitter))
        assert stat.S_IMODE(spool(emitter).stat().st_mode) == 0o700
    finally:
        emitter.close(1)
        other.close(1)


@pytest.mark.parametrize("how", ["world-writable", "group-writable", "another user's", "link"])
def test_a_temporary_folder_others_could_write_is_refused(
    how: str, home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (home / "no-home").write_text("")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(home / "no-home"))
    planted = home / "tmp" / f"onceover-{os.getuid()}"
    if how == "link":
        (home / "elsewhere").mkdir(mode=0o700)
        planted.symlink_to(home / "elsewhere")
    else:
        planted.mkdir(mode=0o700)
    if how == "world-writable":
        planted.chmod(0o777)
    elif how == "group-writable":
        planted.chmod(0o770)
    elif how == "another user's":
        if os.getuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(planted, 4242, 4242)

    with pytest.raises(ConfigurationError, match=f"refusing to spool events in {planted}"):
        default_spool_root()
    # A job is not stopped by it: its events are not recorded, and the log says why.
    assert isinstance(emitter_for("http://127.0.0.1:9", f"token-{how}"), NullEmitter)
    assert f"refusing to spool events in {planted}" in caplog.text
    assert SPOOL_DIR_ENV in caplog.text
    assert list(planted.iterdir()) == []  # nothing written there
