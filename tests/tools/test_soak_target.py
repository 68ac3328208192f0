"""Where a soak writes, checked before anything starts: the connection options as the
sink checks them, the arguments that belong to one target only, and an environment that
would send the query around the soak's tunnel (its wire faults would never fire)."""

from __future__ import annotations

import re

import pytest
from onceover_tools.soak.target import connection_options, refuse_bypass

from onceover.errors import ConfigurationError


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--option", "parentProject=p-1234"], "--option parentProject: connection options are "
         "real BigQuery's; give --bigquery real"),
        (["--bigquery", "real", "--option", "table=x"], "option 'table': not a connection option"),
        (["--bigquery", "real", "--option", "bigQueryStorageGrpcEndpoint=https://x"],
         "option 'bigQueryStorageGrpcEndpoint': 'https://x' is not host:port"),
        (["--bigquery", "real", "--data-dir", "/tmp/d"], "--data-dir: the local BigQuery's"),
    ],
)  # fmt: skip
def test_a_wrong_target_is_refused_before_anything_starts_naming_the_argument(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from onceover_tools.cli import build_parser

    args = build_parser().parse_args(["soak", *argv])
    with pytest.raises(ConfigurationError) as refused:
        args.handler(args)
    assert problem in str(refused.value)
    assert capsys.readouterr().out == ""  # no soak began


def test_connection_options_take_the_connectors_names_in_any_case() -> None:
    given = [("PARENTPROJECT", "billing-1"), ("bigqueryhttpendpoint", "https://bq.example:8443")]
    assert connection_options(given) == {
        "parentProject": "billing-1",
        "bigQueryHttpEndpoint": "https://bq.example:8443",
    }


@pytest.mark.parametrize(
    ("environ", "bypassed"),
    [
        ({"no_proxy": "*"}, True),
        ({"NO_PROXY": "googleapis.com"}, True),
        ({"no_proxy": "localhost, .googleapis.com"}, True),
        ({"no_grpc_proxy": "*.googleapis.com"}, True),
        ({"no_proxy": "bigquerystorage.googleapis.com:443"}, True),
        ({"no_proxy": "localhost,127.0.0.1,.internal"}, False),
        ({"no_proxy": "notgoogleapis.com"}, False),
        ({"no_proxy": "10.0.0.0/8"}, False),
        ({}, False),
    ],
)
def test_an_environment_that_goes_around_the_tunnel_is_refused(
    environ: dict[str, str], bypassed: bool
) -> None:
    if not bypassed:
        refuse_bypass({}, environ)
        return
    with pytest.raises(ConfigurationError, match="around the soak's proxy") as refused:
        refuse_bypass({}, environ)
    assert "bigquerystorage.googleapis.com:443" in str(refused.value)
    assert next(iter(environ)) in str(refused.value)  # the variable named


def test_an_endpoint_given_as_an_address_is_matched_by_block() -> None:
    options = {"bigQueryStorageGrpcEndpoint": "10.1.2.3:443"}
    with pytest.raises(ConfigurationError, match=re.escape("no_proxy=10.0.0.0/8")):
        refuse_bypass(options, {"no_proxy": "10.0.0.0/8"})
    refuse_bypass(options, {"no_proxy": "192.168.0.0/16,::1"})


def test_the_command_refuses_it_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from onceover_tools.cli import build_parser

    monkeypatch.setenv("NO_PROXY", ".googleapis.com")
    args = build_parser().parse_args(["soak", "--bigquery", "real"])
    with pytest.raises(ConfigurationError, match=re.escape("NO_PROXY=.googleapis.com")):
        args.handler(args)
    assert capsys.readouterr().out == ""
