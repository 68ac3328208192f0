"""An emitter across fork (:mod:`onceover_jobs.outbox.fork`), as Spark's daemon forks its
Python workers: the child's inherited emitter is closed and spools what it is given,
the parent sends its own buffer and the child's spool, and every event arrives once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.receiver import TOKEN, Receiver
from tests.outbox.test_emitter import make_events, spool_ids

REPO_ROOT = Path(__file__).resolve().parents[2]

FORKING = """
import json, os, sys
from pathlib import Path
from onceover_jobs.outbox import EventEmitter, emitter_for
from tests.outbox.test_emitter import make_events

url, token, spool, root = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
# A long interval: the parent's events are still in its buffer when it forks.
parent = EventEmitter(url, token, spool, flush_interval_s=60)
registered = emitter_for(url, token, root)
for event in make_events(3, run_id="parent"):
    parent.emit(event)
pid = os.fork()
if pid == 0:
    closed = parent.closed
    parent.emit(make_events(1, run_id="child")[0])
    fresh = emitter_for(url, token, root) is not registered
    names = sorted(p.name for p in spool.iterdir())
    said = {"closed": closed, "fresh": fresh, "pid": os.getpid(), "names": names}
    print(json.dumps(said), flush=True)
    os._exit(0)  # how Spark's forked workers end: no atexit, no close()
_, status = os.waitpid(pid, 0)
print(json.dumps({"status": status, "flushed": parent.flush(5), "closed": parent.closed}))
parent.close(1)
"""


def test_a_forked_child_spools_its_events_and_leaves_the_parents_buffer_to_the_parent(
    receiver: Receiver, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    done = subprocess.run(
        [sys.executable, "-c", FORKING, receiver.url, TOKEN, str(spool), str(tmp_path / "root")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    child, parent = (json.loads(line) for line in done.stdout.splitlines())

    # In the child: the inherited emitter is closed, what it is given is spooled at once
    # (a file of the child's own), and the registry builds an emitter of its own.
    assert (child["closed"], child["fresh"]) == (True, True)
    assert [name for name in child["names"] if f"-{child['pid']}-" in name] == child["names"]
    assert len(child["names"]) == 1

    # In the parent: the emitter still works, and sends its buffer and the child's spool.
    assert parent == {"status": 0, "flushed": True, "closed": False}
    ids = {e.id for e in [*make_events(3, run_id="parent"), *make_events(1, run_id="child")]}
    assert receiver.ids() == ids
    assert {receiver.received[i] for i in ids} == {1}  # the child sent none of the parent's
    assert spool_ids(spool) == []
