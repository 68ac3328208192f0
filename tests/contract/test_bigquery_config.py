"""The one BigQuery client helper: configuration from the environment, clear errors."""

from __future__ import annotations

import pickle

import pytest

from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig
from onceover.errors import ConfigurationError

LOCAL = {
    "ONCEOVER_BIGQUERY_REST": "http://127.0.0.1:9050",
    "ONCEOVER_BIGQUERY_GRPC": "127.0.0.1:9060",
}


def test_both_endpoints_mean_the_local_bigquery() -> None:
    config = BigQueryConfig.from_env(LOCAL)

    assert config.is_local
    assert config.resolved_project() == LOCAL_PROJECT
    assert config.env() == LOCAL


def test_no_endpoint_means_real_bigquery() -> None:
    config = BigQueryConfig.from_env({"ONCEOVER_PROJECT": "billing-prod"})

    assert not config.is_local
    assert config.resolved_project() == "billing-prod"


def test_empty_variables_count_as_unset() -> None:
    assert BigQueryConfig.from_env(
        {"ONCEOVER_BIGQUERY_REST": "", "ONCEOVER_BIGQUERY_GRPC": ""}
    ) == (BigQueryConfig())


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"ONCEOVER_BIGQUERY_REST": "http://127.0.0.1:9050"}, "ONCEOVER_BIGQUERY_GRPC is not"),
        ({"ONCEOVER_BIGQUERY_GRPC": "127.0.0.1:9060"}, "ONCEOVER_BIGQUERY_REST is not"),
        ({**LOCAL, "ONCEOVER_BIGQUERY_REST": "127.0.0.1:9050"}, "ONCEOVER_BIGQUERY_REST="),
        ({**LOCAL, "ONCEOVER_BIGQUERY_GRPC": "http://127.0.0.1:9060"}, "ONCEOVER_BIGQUERY_GRPC="),
        ({**LOCAL, "ONCEOVER_PROJECT": "Not A Project"}, "ONCEOVER_PROJECT="),
    ],
)
def test_a_bad_setting_is_named(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        BigQueryConfig.from_env(env)


def test_a_config_travels_to_spark_executors() -> None:
    config = BigQueryConfig.from_env({**LOCAL, "ONCEOVER_PROJECT": "metering-dev"})

    assert pickle.loads(pickle.dumps(config)) == config


def test_real_bigquery_without_credentials_says_how_to_sign_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Google credentials exist on this machine; the error must say what to do."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")

    with pytest.raises(
        ConfigurationError, match="ONCEOVER_BIGQUERY_REST and ONCEOVER_BIGQUERY_GRPC"
    ):
        BigQueryConfig().resolved_project()


def test_a_child_environment_names_exactly_one_bigquery() -> None:
    inherited = {
        "PATH": "/usr/bin",
        "ONCEOVER_BIGQUERY_REST": "http://elsewhere:1",
        "ONCEOVER_BIGQUERY_GRPC": "elsewhere:2",
        "ONCEOVER_PROJECT": "other-project",
    }

    assert BigQueryConfig.from_env(LOCAL).applied_to(inherited) == {"PATH": "/usr/bin", **LOCAL}
    assert BigQueryConfig().applied_to(inherited) == {"PATH": "/usr/bin"}
