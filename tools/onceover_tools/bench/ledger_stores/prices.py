"""What a request costs at each store's list price: the one home of the bench's prices.

Standard storage, the request tiers the bench's request kinds fall in, in US dollars per
1,000 requests. Both providers charge by request, not by bytes, for objects this small
(a ledger record is under a kilobyte); storage and egress are left out. Regional and
dual-region buckets price Class A the same in Standard storage; multi-region buckets
charge Class A twice, which a reader can scale by.

Sources, as their pages read on :data:`AS_OF` (not fetched by the bench: update them here,
with the date, when a provider changes its list price):

- Cloud Storage: https://cloud.google.com/storage/pricing#operations-pricing
  (Class A: inserts, lists and other writes; Class B: reads; deletes free).
- S3: https://aws.amazon.com/s3/pricing/ (S3 Standard, US East: PUT, COPY, POST, LIST;
  GET, SELECT and all other requests; DELETE and CANCEL free).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

AS_OF = "2026-12-02"
"""The date these list prices were taken from the pages above."""
HOURS_PER_MONTH = 730.0
"""A month as both providers bill it (8,760 hours / 12)."""


@dataclass(frozen=True)
class Tier:
    """A price tier: its name on the provider's page and its price per 1,000 requests."""

    name: str
    usd_per_1000: float


@dataclass(frozen=True)
class PriceList:
    """One store's request prices: each request kind's tier; a kind in ``free`` costs
    nothing."""

    store: str
    source: str
    tiers: Mapping[str, Tier]
    """Request kind -> its tier."""
    free: frozenset[str]
    as_of: str = AS_OF

    def tier_of(self, kind: str) -> Tier | None:
        """``kind``'s tier; None for a free kind. A kind with no price raises: every kind
        the proxy counts must be priced (the tests hold each store's kinds to it)."""
        if kind in self.free:
            return None
        try:
            return self.tiers[kind]
        except KeyError:
            raise KeyError(f"{self.store}: no price for request kind {kind!r}") from None

    @property
    def tier_names(self) -> tuple[str, ...]:
        """The tiers, dearest first, each once."""
        unique = {tier.name: tier for tier in self.tiers.values()}
        return tuple(sorted(unique, key=lambda name: -unique[name].usd_per_1000))

    def per_tier(self, requests: Mapping[str, float]) -> dict[str, float]:
        """``requests`` (kind -> count) summed by tier, every tier named (0 when none)."""
        totals = dict.fromkeys(self.tier_names, 0.0)
        for kind, count in requests.items():
            tier = self.tier_of(kind)
            if tier is not None:
                totals[tier.name] += count
        return totals

    def dollars(self, requests: Mapping[str, float]) -> float:
        """What ``requests`` (kind -> count) cost at these prices."""
        total = 0.0
        for kind, count in requests.items():
            tier = self.tier_of(kind)
            if tier is not None:
                total += count * tier.usd_per_1000 / 1000
        return total


GCS_CLASS_A = Tier("Class A", 0.005)
GCS_CLASS_B = Tier("Class B", 0.0004)
GCS_STANDARD = PriceList(
    store="Cloud Storage (Standard storage)",
    source="https://cloud.google.com/storage/pricing#operations-pricing",
    tiers={
        "upload": GCS_CLASS_A,
        "list": GCS_CLASS_A,
        # Patches, copies, composes, bucket calls: most are Class A, and a request the
        # bench cannot name is priced at the dearer class rather than left out.
        "other": GCS_CLASS_A,
        "get_media": GCS_CLASS_B,
        "get_metadata": GCS_CLASS_B,
        "get_bucket": GCS_CLASS_B,
    },
    free=frozenset({"delete"}),
)

S3_WRITE = Tier("PUT, COPY, POST, LIST", 0.005)
S3_READ = Tier("GET, SELECT and all other", 0.0004)
S3_STANDARD = PriceList(
    store="S3 Standard (US East)",
    source="https://aws.amazon.com/s3/pricing/",
    tiers={
        "put": S3_WRITE,
        "post": S3_WRITE,
        "list": S3_WRITE,
        "get": S3_READ,
        "head": S3_READ,
        "other": S3_READ,  # "all other requests", as S3's page prices them
    },
    free=frozenset({"delete"}),
)
