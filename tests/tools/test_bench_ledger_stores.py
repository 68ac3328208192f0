"""The ledger-store bench's counting and arithmetic, without Spark: each request classified
as the store's API names it, the counting proxy forwarding requests unchanged and
recording each one, every kind priced, and what a run's batches come to per batch, per
hour and in dollars. The bench itself (Spark, the stand-ins) runs in
tests/tools/test_bench_command.py."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator

import pytest
from onceover_tools.bench.ledger_stores.api import APIS, GcsApi, S3Api
from onceover_tools.bench.ledger_stores.figures import BatchRequests, LedgerQuery, LedgerStores
from onceover_tools.bench.ledger_stores.plan import POSIX, window
from onceover_tools.bench.ledger_stores.prices import GCS_STANDARD, S3_STANDARD
from onceover_tools.bench.ledger_stores.proxy import CountingProxy
from onceover_tools.bench.ledger_stores.report import goals, section

BUCKET = "ledger-bench-pending"


@pytest.mark.parametrize(
    ("method", "target", "kind"),
    [
        ("PUT", f"/{BUCKET}/ledger/q/t/batch-1.json", "put"),
        ("GET", f"/{BUCKET}/ledger/q/t/batch-1.json", "get"),
        ("HEAD", f"/{BUCKET}/ledger/q/t/batch-1.json", "head"),
        ("GET", f"/{BUCKET}?list-type=2&prefix=ledger/q/&delimiter=/", "list"),
        ("GET", f"/{BUCKET}?prefix=ledger/q/", "list"),  # ListObjects, version 1
        ("GET", f"/{BUCKET}?location", "other"),  # a bucket's sub-resource, not a listing
        ("DELETE", f"/{BUCKET}/ledger/q/t/batch-1.json", "delete"),
        ("POST", f"/{BUCKET}?delete", "post"),  # DeleteObjects: how obstore deletes
        ("PATCH", f"/{BUCKET}/k", "other"),
    ],
)
def test_each_s3_request_is_the_kind_s3_names_it(method: str, target: str, kind: str) -> None:
    classified = S3Api().classify(method, target)
    assert (classified.kind, classified.bucket) == (kind, BUCKET)


@pytest.mark.parametrize(
    ("method", "target", "kind"),
    [
        ("POST", f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart&ifGenerationMatch=0",
         "upload"),
        ("GET", f"/download/storage/v1/b/{BUCKET}/o/ledger%2Fq%2Fa.json?alt=media", "get_media"),
        ("GET", f"/storage/v1/b/{BUCKET}/o/ledger%2Fq%2Fa.json?alt=media", "get_media"),
        ("GET", f"/storage/v1/b/{BUCKET}/o/ledger%2Fq%2Fa.json?projection=noAcl", "get_metadata"),
        ("GET", f"/storage/v1/b/{BUCKET}/o?prefix=ledger%2Fq%2F&delimiter=%2F", "list"),
        ("GET", f"/storage/v1/b/{BUCKET}?projection=noAcl", "get_bucket"),
        ("DELETE", f"/storage/v1/b/{BUCKET}/o/ledger%2Fq%2Fa.json", "delete"),
        ("PATCH", f"/storage/v1/b/{BUCKET}/o/ledger%2Fq%2Fa.json", "other"),
        ("POST", f"/storage/v1/b/{BUCKET}/o/a/rewriteTo/b/{BUCKET}/o/b", "other"),
    ],
)  # fmt: skip
def test_each_cloud_storage_request_is_the_kind_its_json_api_names_it(
    method: str, target: str, kind: str
) -> None:
    classified = GcsApi().classify(method, target)
    assert (classified.kind, classified.bucket) == (kind, BUCKET)
    assert GcsApi().classify("GET", "/storage/v1/b").kind == "other"  # buckets.list: no bucket


def test_every_kind_the_proxy_counts_has_a_price_and_deletes_are_free() -> None:
    for api in APIS.values():
        for kind in api.kinds:
            api.prices.tier_of(kind)  # raises for a kind with no price
        assert api.prices.tier_of("delete") is None
    assert GCS_STANDARD.tier_of("upload") == GCS_STANDARD.tier_of("list")
    assert GCS_STANDARD.tier_of("upload").usd_per_1000 == 0.005  # type: ignore[union-attr]
    assert GCS_STANDARD.tier_of("get_media").usd_per_1000 == 0.0004  # type: ignore[union-attr]
    assert S3_STANDARD.tier_of("post") == S3_STANDARD.tier_of("put")
    assert S3_STANDARD.tier_of("head") == S3_STANDARD.tier_of("get")
    with pytest.raises(KeyError, match="no price"):
        S3_STANDARD.tier_of("get_media")


def _query(store: str, counts: list[dict[str, int]]) -> LedgerQuery:
    batches = [BatchRequests(i, c, add_batch_ms=100.0 + i) for i, c in enumerate(counts)]
    return LedgerQuery(store, "pending", expected_rows=200 * len(counts), batches=batches,
                       counted=200 * len(counts), distinct=200 * len(counts))  # fmt: skip


def test_a_flat_count_costs_3600_batches_an_hour_at_list_price() -> None:
    steady = {"put": 8, "get": 32, "head": 8, "list": 4, "post": 0}
    figure = _query("s3", [{"put": 10, "get": 28}] + [dict(steady) for _ in range(20)])

    assert figure.window == window(21) == 10
    assert [b.batch_id for b in figure.early()] == list(range(1, 11))  # the first left out
    assert [b.batch_id for b in figure.late()] == list(range(11, 21))
    assert figure.growth == 1.0
    assert figure.per_batch()["get"] == 32
    assert figure.per_hour()["put"] == 8 * 3_600
    by_tier = figure.per_hour_by_tier()
    assert by_tier == {"PUT, COPY, POST, LIST": 12 * 3_600, "GET, SELECT and all other": 40 * 3_600}
    # 43,200 writes at $0.005 and 144,000 reads at $0.0004 per 1,000.
    assert figure.dollars_per_hour() == pytest.approx(0.216 + 0.0576)
    assert figure.dollars_per_month() == pytest.approx((0.216 + 0.0576) * 730)


def test_a_count_growing_with_the_ledger_is_shown_growing_and_priced_at_its_late_count() -> None:
    # A check that reads every record each batch: one GET more per batch stored.
    figure = _query("gcs", [{"upload": 8, "get_media": 8 + i} for i in range(31)])

    assert figure.mean(figure.early()) == pytest.approx(8 + 8 + 5.5)  # batches 1 to 10
    assert figure.mean(figure.late()) == pytest.approx(8 + 8 + 25.5)  # batches 21 to 30
    assert figure.growth == pytest.approx(41.5 / 21.5)
    assert figure.per_batch()["get_media"] == pytest.approx(33.5)
    assert figure.per_hour_by_tier()["Class B"] == pytest.approx(33.5 * 3_600)
    result = LedgerStores(31, 200, ["gcs", POSIX], ["pending"], queries=[
        figure, _query(POSIX, [{}] * 31),
    ])  # fmt: skip
    (goal,) = goals(result)  # the disk has no requests to hold flat
    assert goal.name.endswith("`pending` on Cloud Storage")
    assert goal.met is False
    markdown = "\n".join(section(result))
    assert "| **last / first** (1.00: flat in the batches stored) | 1.93 |" in markdown
    assert "| a disk (the reference) | `pending` |" in markdown
    again = LedgerStores.from_json(result.as_json())
    assert again.query("gcs", "pending").growth == figure.growth  # type: ignore[union-attr]


def test_a_failed_query_is_no_figure() -> None:
    figure = _query("s3", [{"put": 1}] * 5)
    figure.failed = "RuntimeError: the query failed"
    result = LedgerStores(5, 200, ["s3"], ["pending"], queries=[figure])
    assert result.any_failed
    assert figure.dollars_per_hour() is None
    assert goals(result)[0].value is None
    assert LedgerStores(5, 200, ["s3"], ["pending"]).any_failed  # no query at all


class _Upstream(http.server.BaseHTTPRequestHandler):
    """A store that answers each request with what it was sent."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        payload = f"{self.command} {self.path} {self.headers['Host']} ".encode() + body
        status = 404 if self.path.endswith("absent") else 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer  # noqa: N815 - http.server names them


@pytest.fixture
def upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_proxy_forwards_each_request_unchanged_and_records_its_kind(upstream: str) -> None:
    with CountingProxy(upstream, S3Api()) as proxy:
        port = int(proxy.endpoint.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # one kept alive
        client.request("PUT", f"/{BUCKET}/k.json", body=b'{"a": 1}')
        answer = client.getresponse()
        assert (answer.status, answer.read()) == (
            200, f'PUT /{BUCKET}/k.json 127.0.0.1:{port} {{"a": 1}}'.encode(),
        )  # fmt: skip
        assert answer.getheader("ETag") == '"v1"'
        mark = proxy.mark()
        client.request("HEAD", f"/{BUCKET}/k.json")
        head = client.getresponse()
        assert head.read() == b""
        assert int(head.getheader("Content-Length") or 0) > 0  # a GET's length, no body
        client.request("GET", f"/{BUCKET}/absent")
        absent = client.getresponse()
        absent.read()
        assert absent.status == 404
        # A body sent in chunks reaches the store whole.
        client.putrequest("PUT", "/other-bucket/k")
        client.putheader("Transfer-Encoding", "chunked")
        client.endheaders()
        client.send(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        assert client.getresponse().read().endswith(b" abcde")
        client.request("GET", f"/{BUCKET}?list-type=2&prefix=ledger/")
        client.getresponse().read()
        client.close()

        everything = proxy.since(0)
        assert [(r.kind, r.bucket, r.status) for r in everything] == [
            ("put", BUCKET, 200), ("head", BUCKET, 200), ("get", BUCKET, 404),
            ("put", "other-bucket", 200), ("list", BUCKET, 200),
        ]  # fmt: skip
        assert all(r.seconds > 0 for r in everything)
        assert [r.kind for r in proxy.since(mark, mark + 2)] == ["head", "get"]
        assert [r.kind for r in proxy.since(mark, bucket=BUCKET)] == ["head", "get", "list"]


def test_the_proxy_answers_502_when_the_store_is_gone_and_counts_the_request() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    gone = f"http://127.0.0.1:{server.server_address[1]}"
    server.server_close()  # nothing listens there any more
    with CountingProxy(gone, GcsApi()) as proxy:
        port = int(proxy.endpoint.rsplit(":", 1)[1])
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        client.request("GET", f"/storage/v1/b/{BUCKET}/o")
        assert client.getresponse().status == 502
        client.close()
        assert [(r.kind, r.status) for r in proxy.since(0)] == [("list", 502)]
