"""Check 2: the dataset exists; its location, and the Storage Write endpoint for it."""

from __future__ import annotations

from onceover.bigquery import WRITE_API_HOST, BigQueryConfig
from onceover_jobs.preflight.report import Check, fail, ok
from onceover_jobs.sink.job.options import SinkOptions

NAME = "location"
REGIONAL_HOST = "bigquerystorage.{region}.rep.googleapis.com"
"""A location's regional Storage Write endpoint (traffic kept in the location)."""


def regional_endpoint(location: str) -> str:
    return f"{REGIONAL_HOST.format(region=location.lower())}:443"


def check_location(config: BigQueryConfig, options: SinkOptions) -> tuple[Check, str | None]:
    """The check, and the dataset's location (None when it could not be read)."""
    from google.api_core.exceptions import Forbidden, NotFound

    from onceover_jobs.sink.rows.schema import rest_client

    dataset = f"{options.project}.{options.dataset}"
    try:
        location: str = rest_client(config).get_dataset(dataset, timeout=30).location or "US"
    except NotFound:
        return fail(
            NAME,
            f"dataset {dataset} does not exist (the sink creates tables, never datasets)",
            f"create it in the location you want: bq mk --location=EU {options.project}:"
            f"{options.dataset}",
        ), None
    except Forbidden as exc:
        return fail(
            NAME,
            f"datasets.get on {dataset} was refused: {exc.message}",
            f"grant roles/bigquery.dataViewer (bigquery.datasets.get) on {dataset}, or "
            "roles/bigquery.dataEditor, which the write needs anyway",
        ), None
    if config.is_local:
        return ok(NAME, f"{dataset} is in {location}; Storage Write at {config.grpc_endpoint} "
                        "(local BigQuery)"), location  # fmt: skip
    return endpoint_check(dataset, location, config.connection.storage_endpoint), location


def endpoint_check(dataset: str, location: str, given: str | None) -> Check:
    """The Storage Write endpoint for a dataset in ``location``: the global one serves
    every location; a regional one given must be the location's own."""
    if given is None:
        return ok(
            NAME,
            f"{dataset} is in {location}; Storage Write at the global endpoint "
            f"{WRITE_API_HOST}:443, which serves every location (to keep the traffic in "
            f"{location}: bigQueryStorageGrpcEndpoint={regional_endpoint(location)})",
        )
    host = given.rsplit(":", 1)[0]
    if host.endswith(".rep.googleapis.com") and given != regional_endpoint(location):
        return fail(
            NAME,
            f"{dataset} is in {location}, but bigQueryStorageGrpcEndpoint={given} is "
            "another location's regional endpoint",
            f"give bigQueryStorageGrpcEndpoint={regional_endpoint(location)}, or leave it "
            "out for the global endpoint",
        )
    return ok(NAME, f"{dataset} is in {location}; Storage Write at {given} (given)")
