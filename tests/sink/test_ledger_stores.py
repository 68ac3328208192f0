"""The ledger's storage (``onceover.ledger_store``) against every store — a disk, the S3
stand-in, the Cloud Storage stand-in — and the storage it refuses before a row is written.

What the ledger needs of a store: a create that only the first writer wins, a
compare-and-swap on the version a reader saw, replaces, one-level listings and deletes;
two drivers racing for one scope are told apart by the store's compare-and-swap, not by
a lock. Refused: a FUSE mount of a bucket (s3fs over the S3 stand-in: no hard links), a
bucket that ignores conditional writes (the Cloud Storage stand-in without its patch),
and a store an executor cannot reach (named, with the cause).
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from onceover_jobs.sink.errors import ConcurrentDriverError, LedgerNotSharedError
from onceover_jobs.sink.ledger import leases
from onceover_jobs.sink.ledger.leases import check_probe, claim_driver, leave_probe
from onceover_tools.localstores import LocalGCS, LocalS3

from onceover.errors import LedgerStoreError, UnsuitableLedgerStorageError
from onceover.ledger_store import LedgerStore, Stored, open_store
from onceover.preflight import free_port
from tests.helpers.object_stores import bucket_name


def test_only_the_first_create_wins_and_a_swap_needs_the_version_it_read(ledger_root: str) -> None:
    store = open_store(ledger_root)
    first = store.create("q/t/batch-1.json", b'{"a": 1}')
    assert first is not None
    assert store.create("q/t/batch-1.json", b'{"a": 2}') is None  # another writer's
    found = store.read("q/t/batch-1.json")
    assert found == Stored(b'{"a": 1}', first)
    swapped = store.swap("q/t/batch-1.json", b'{"a": 3}', first)
    assert swapped is not None
    assert swapped != first
    assert store.swap("q/t/batch-1.json", b'{"a": 4}', first) is None  # stale version
    assert store.swap("q/t/absent.json", b"{}", first) is None
    replaced = store.put("q/t/batch-1.json", b'{"a": 5}')
    assert store.read("q/t/batch-1.json") == Stored(b'{"a": 5}', replaced)


def test_a_create_whose_answer_was_lost_is_known_as_this_writers_by_its_bytes(
    ledger_root: str,
) -> None:
    """A client retries a put whose answer it lost; the retry of one that took is refused
    by its own condition. The same bytes are this write; other bytes another's."""
    store = open_store(ledger_root)
    version = store.create("k.json", b"mine")
    assert store.create("k.json", b"mine") == version
    assert store.create("k.json", b"theirs") is None


def test_listings_are_one_level_deletes_forgive_what_is_gone(ledger_root: str) -> None:
    store = open_store(ledger_root)
    for key in ("s/t/batch-1.json", "s/t/batch-2.json", "s/t/partitions/1/0/v000000000.json",
                "s/t/writes/0/batch-3.json", "s/driver.json"):  # fmt: skip
        store.put(key, b"{}")
    listing = store.list("s/t")
    assert sorted(listing.files) == ["batch-1.json", "batch-2.json"]
    assert listing.folders == ("partitions", "writes")
    assert store.list("s/absent").files == {}
    assert sorted(k for k, _ in store.walk("s/t")) == [
        "s/t/batch-1.json", "s/t/batch-2.json", "s/t/partitions/1/0/v000000000.json",
        "s/t/writes/0/batch-3.json",
    ]  # fmt: skip
    store.delete_tree("s/t/partitions")
    store.delete_tree("s/t/partitions")  # gone already: nothing to do
    store.delete("s/t/batch-2.json")
    store.delete("s/t/batch-2.json")
    assert sorted(k for k, _ in store.walk("s")) == [
        "s/driver.json", "s/t/batch-1.json", "s/t/writes/0/batch-3.json",
    ]  # fmt: skip
    assert store.where("s/driver.json") == f"{ledger_root}/s/driver.json"


def test_two_drivers_racing_for_one_scope_are_told_apart_by_the_stores_swap(
    ledger_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two drivers on other hosts both read a lapsed claim before either writes; the
    store's compare-and-swap lets one write win, and the other, reading the winner's
    fresh claim again, is refused naming it."""
    store = open_store(ledger_root)
    lapsed = {"version": 1, "owner": "host-a pid 1 started 1", "renewed_at": 0.0}
    store.put("q/driver.json", json.dumps(lapsed).encode())
    both_read = threading.Barrier(2, timeout=30)
    first_reads: set[str] = set()
    read = leases._read_claim

    def read_then_wait(store: LedgerStore, key: str) -> tuple[dict[str, Any] | None, str | None]:
        found = read(store, key)
        me = threading.current_thread().name
        if me not in first_reads:
            first_reads.add(me)
            both_read.wait()  # neither writes before both have read the lapsed claim
        return found

    monkeypatch.setattr(leases, "_read_claim", read_then_wait)
    outcomes: dict[str, BaseException | None] = {}

    def start(owner: str) -> None:
        try:
            claim_driver(store, "q", "the query", lease_s=60, owner=owner)
            outcomes[owner] = None
        except BaseException as exc:  # recorded for the assertions below
            outcomes[owner] = exc

    owners = ("host-b pid 2 started 2", "host-c pid 3 started 3")
    drivers = [threading.Thread(target=start, args=(o,), name=o) for o in owners]
    for thread in drivers:
        thread.start()
    for thread in drivers:
        thread.join(60)
    won = [o for o, e in outcomes.items() if e is None]
    refused = [o for o, e in outcomes.items() if isinstance(e, ConcurrentDriverError)]
    assert len(won) == 1, outcomes
    assert len(refused) == 1, outcomes
    assert f"held by a driver on another host ({won[0]})" in str(outcomes[refused[0]])
    claim = json.loads(store.read("q/driver.json").data)  # type: ignore[union-attr]
    assert claim["owner"] == won[0]


# -- storage refused before a row -------------------------------------------------------


@pytest.fixture
def bucket_on_fuse(local_s3: LocalS3, s3_bucket: str, tmp_path: Path) -> Iterator[Path]:
    """A bucket of the S3 stand-in mounted with s3fs-fuse, as users mount buckets
    (gcsfuse, DBFS, s3fs): scripts/ensure-s3fs.sh installs it."""
    if shutil.which("s3fs") is None or not os.path.exists("/dev/fuse"):
        pytest.skip("needs s3fs and /dev/fuse (scripts/ensure-s3fs.sh)")
    environment = local_s3.environment()
    secrets = tmp_path / "passwd"
    secrets.write_text(f"{environment['AWS_ACCESS_KEY_ID']}:{environment['AWS_SECRET_ACCESS_KEY']}")
    secrets.chmod(0o600)
    mount = tmp_path / "mounted-bucket"
    mount.mkdir()
    bucket = s3_bucket.removeprefix("s3://")
    subprocess.run(
        ["s3fs", bucket, str(mount), "-o", f"url={environment['AWS_ENDPOINT_URL']}",
         "-o", "use_path_request_style", "-o", f"passwd_file={secrets}"],
        check=True, timeout=30, capture_output=True,
    )  # fmt: skip
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False, timeout=30)


def test_a_ledger_on_a_fuse_mounted_bucket_is_refused_with_the_buckets_url_as_the_fix(
    bucket_on_fuse: Path,
) -> None:
    with pytest.raises(UnsuitableLedgerStorageError) as refused:
        leave_probe(bucket_on_fuse / "ledger")
    message = str(refused.value)
    assert str(bucket_on_fuse / "ledger") in message
    assert "has no hard links" in message
    assert "gs://bucket/path, s3://bucket/path" in message
    assert "nothing was written" in message


def test_a_bucket_that_ignores_conditional_writes_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Cloud Storage stand-in without its patch accepts a second create-if-absent."""
    with LocalGCS(
        without_patches=("generation_preconditions",), log_path=tmp_path / "gcs.log"
    ) as careless:
        for name, value in careless.environment().items():
            monkeypatch.setenv(name, value)
        url = careless.create_bucket(bucket_name()) + "/ledger"
        with pytest.raises(UnsuitableLedgerStorageError) as refused:
            leave_probe(url)
    message = str(refused.value)
    assert f"the store at {url} ignores conditional writes" in message
    assert "ifGenerationMatch=0" in message
    assert "nothing was written" in message


def test_an_executor_that_cannot_reach_the_bucket_fails_before_a_row_naming_it(
    local_s3: LocalS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in local_s3.environment().items():
        monkeypatch.setenv(name, value)
    url = f"{s3_bucket}/ledger"
    probe = leave_probe(url)  # the driver reaches it
    # An executor given another endpoint (nothing listens there), with a short retry.
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port('127.0.0.1')}")
    monkeypatch.setenv("ONCEOVER_LEDGER_RETRY_TIMEOUT_S", "1")
    from onceover.ledger_store.objects import S3LedgerStore

    unreachable = S3LedgerStore(url)
    with pytest.raises(LedgerNotSharedError) as refused:
        check_probe(unreachable, probe, "partition 2 of batch 0")
    message = str(refused.value)
    assert f"partition 2 of batch 0 cannot reach the ledger the driver writes at {url}" in message
    assert "spark.executorEnv" in message
    assert "nothing was written" in message


def test_spark_s_checkpoint_is_read_where_it_is(ledger_root: str) -> None:
    """A checkpoint in a bucket (Spark's files as the Hadoop connectors write them): the
    query id, the offsets log's newest entry and a batch's source offsets, read there."""
    from onceover_jobs.sink.job.sink_job import streaming_query_id
    from onceover_jobs.sink.ledger.offsets_log import fingerprint, latest_batch, source_offsets

    checkpoint = open_store(ledger_root)
    checkpoint.put("metadata", b'{"id":"5b1e-query"}')
    for batch in (0, 1, 12):
        entry = f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{batch}}}\n'.encode()
        checkpoint.put(f"offsets/{batch}", entry)
    checkpoint.put("offsets/.12.crc", b"x")  # what the connectors leave beside them
    assert streaming_query_id(ledger_root) == "5b1e-query"
    assert latest_batch(ledger_root) == 12
    assert source_offsets(ledger_root, 1) == ('{"logOffset":1}',)
    assert fingerprint(ledger_root, 7) is None
    assert fingerprint(ledger_root, 0) != fingerprint(ledger_root, 1)


@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_a_bucket_that_does_not_exist_is_an_error_naming_it(
    kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = request.getfixturevalue(f"local_{kind}")
    for name, value in stand_in.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ONCEOVER_LEDGER_RETRY_TIMEOUT_S", "2")
    url = f"{'s3' if kind == 's3' else 'gs'}://{bucket_name()}/ledger"
    with pytest.raises(LedgerStoreError) as refused:
        leave_probe(url)
    assert f"the ledger at {url}" in str(refused.value)
    if kind == "s3":
        assert "NoSuchBucket" in str(refused.value)  # the store's own words, on one line


class _ConflictingS3(http.server.BaseHTTPRequestHandler):
    """In front of the S3 stand-in: answers the first ``conflicts`` conditional PUTs with
    409 ConditionalRequestConflict, as S3 does to a conditional write racing another on
    the key ("On a 409 failure you should retry the upload": the PutObject reference);
    forwards everything else."""

    upstream = ""
    conflicts = 0
    answered_409 = 0

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        conditional = "If-None-Match" in self.headers or "If-Match" in self.headers
        cls = type(self)
        if self.command == "PUT" and conditional and cls.answered_409 < cls.conflicts:
            cls.answered_409 += 1
            payload = (
                b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict'
                b"</Code><Message>A conflicting operation occurred.</Message></Error>"
            )
            self.send_response(409)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        answer = httpx.request(
            self.command, f"{cls.upstream}{self.path}", headers=headers, content=body
        )
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward  # noqa: N815 - http.server names them

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_conditional_write_s3_answers_409_to_is_retried_and_takes(
    local_s3: LocalS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in local_s3.environment().items():
        monkeypatch.setenv(name, value)
    _ConflictingS3.upstream = local_s3.environment()["AWS_ENDPOINT_URL"]
    _ConflictingS3.conflicts, _ConflictingS3.answered_409 = 2, 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ConflictingS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
        from onceover.ledger_store.objects import S3LedgerStore

        store = S3LedgerStore(f"{s3_bucket}/ledger")
        version = store.create("q/t/batch-1.json", b"intent")
        assert version is not None  # taken, after two 409s
        assert _ConflictingS3.answered_409 == 2
        assert store.create("q/t/batch-1.json", b"another") is None
        assert store.read("q/t/batch-1.json") == Stored(b"intent", version)
    finally:
        server.shutdown()
        server.server_close()
