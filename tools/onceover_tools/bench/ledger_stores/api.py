"""Each store's HTTP API as the bench counts it: which request is which kind, named as
the store's own documentation and price list name it, and which bucket it is for.

A request is classified at the server side of the wire (the counting proxy,
:mod:`~onceover_tools.bench.ledger_stores.proxy`), from its method, path and query
alone, so what every process sends is counted the same way, whichever client sent it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from onceover_tools.bench.ledger_stores.prices import GCS_STANDARD, S3_STANDARD, PriceList

OTHER = "other"


@dataclass(frozen=True)
class Classified:
    """A request's kind and the bucket it addressed ("" for none: a service call)."""

    kind: str
    bucket: str


class StoreApi(ABC):
    """One store's request kinds (key -> label, in the order the report shows them), how
    a request is told to be one, and their prices."""

    name: str
    scheme: str
    """The URL scheme of its buckets (``s3``, ``gs``)."""
    kinds: ClassVar[Mapping[str, str]]
    prices: PriceList

    @abstractmethod
    def classify(self, method: str, target: str) -> Classified:
        """The kind and bucket of a request for ``target`` (path and query)."""


class S3Api(StoreApi):
    """S3's REST API, path-style (``/bucket/key``), as an S3 client speaks it to an
    endpoint it is given (obstore, boto3 and the AWS CLI do so to a custom endpoint)."""

    name = "S3"
    scheme = "s3"
    kinds: ClassVar[Mapping[str, str]] = {
        "put": "PUT (PutObject)",
        "get": "GET object (GetObject)",
        "head": "HEAD (HeadObject)",
        "list": "LIST (ListObjectsV2)",
        "delete": "DELETE (DeleteObject)",
        "post": "POST (DeleteObjects: obstore's delete)",
        OTHER: "other",
    }
    prices = S3_STANDARD

    def classify(self, method: str, target: str) -> Classified:
        parts = urlsplit(target)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        query = parse_qs(parts.query, keep_blank_values=True)
        method = method.upper()
        if method == "GET" and not key:
            # ListObjectsV2 says list-type=2; a version-1 listing names a prefix or a
            # delimiter, or nothing at all. A bucket's sub-resources (?location, ?acl) are
            # other calls.
            listing = "list-type" in query or not query or {"prefix", "delimiter"} & set(query)
            return Classified("list" if bucket and listing else OTHER, unquote(bucket))
        simple = {"GET": "get", "HEAD": "head", "PUT": "put", "DELETE": "delete", "POST": "post"}
        return Classified(simple.get(method, OTHER), unquote(bucket))


class GcsApi(StoreApi):
    """Cloud Storage's JSON API (``/storage/v1/b/<bucket>/o[/<object>]``, uploads under
    ``/upload/``, media downloads with ``alt=media`` or under ``/download/``), as Google's
    clients speak it."""

    name = "Cloud Storage"
    scheme = "gs"
    kinds: ClassVar[Mapping[str, str]] = {
        "upload": "upload (objects.insert)",
        "get_media": "GET object media (alt=media)",
        "get_metadata": "GET metadata (objects.get)",
        "get_bucket": "GET bucket (buckets.get)",
        "list": "LIST (objects.list)",
        "delete": "DELETE (objects.delete)",
        OTHER: "other",
    }
    prices = GCS_STANDARD

    def classify(self, method: str, target: str) -> Classified:
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        segments = parts.path.strip("/").split("/")
        media = False
        if segments[:1] in (["upload"], ["download"]):
            media = segments[0] == "download"
            uploading = segments[0] == "upload"
            segments = segments[1:]
        else:
            uploading = False
        # storage/v1/b/<bucket>[/o[/<object>]]
        if segments[:3] != ["storage", "v1", "b"] or len(segments) < 4:
            return Classified(OTHER, "")
        bucket = unquote(segments[3])
        return Classified(self._kind(method.upper(), segments[4:], query, media, uploading), bucket)

    @staticmethod
    def _kind(
        method: str, rest: list[str], query: dict[str, list[str]], media: bool, uploading: bool
    ) -> str:
        """The kind of a request for ``rest``, the path after ``/storage/v1/b/<bucket>``."""
        objects = rest[:1] == ["o"]
        if uploading and method in ("POST", "PUT") and objects:
            return "upload"
        if not rest:  # the bucket's own resource (google-cloud-storage reads it before a
            # fresh client's first upload)
            return "get_bucket" if method == "GET" else OTHER
        kind = OTHER  # patches, rewrites, composes, ACLs, a bucket's other resources
        if objects and len(rest) == 1 and method == "GET":
            kind = "list"
        elif objects and len(rest) == 2 and method == "GET":
            alt = query.get("alt", [""])[0]
            kind = "get_media" if media or alt == "media" else "get_metadata"
        elif objects and len(rest) == 2 and method == "DELETE":
            kind = "delete"
        return kind


APIS: dict[str, StoreApi] = {"s3": S3Api(), "gcs": GcsApi()}
"""The object stores the bench counts, by the name its options give them."""
