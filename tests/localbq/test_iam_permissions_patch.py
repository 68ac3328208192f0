"""The ``iam_permissions`` patch, pinned by the documented ``tables.testIamPermissions``.

Google's reference: "Returns permissions that a caller has on the specified resource.
If the resource does not exist, this will return an empty set of permissions, not a
NOT_FOUND error." The answer's ``permissions`` is "A subset of
``TestPermissionsRequest.permissions`` that the caller is allowed"
(``TestIamPermissionsResponse``). Every test fails with the patch off: bqemulator has no
such route and answers 405 Method Not Allowed.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
from google.cloud import bigquery
from onceover_tools.localbq import LocalBigQuery
from onceover_tools.localbq.limits import from_environment, limited

from onceover.errors import ConfigurationError

WRITER = ["bigquery.tables.updateData", "bigquery.tables.getData", "bigquery.tables.get"]


def _test_permissions(
    local_bigquery: LocalBigQuery, table_id: str, permissions: list[str]
) -> requests.Response:
    """The raw REST call, as Google's clients send it."""
    config = local_bigquery.config
    assert config.rest_endpoint is not None
    project, dataset, table = table_id.split(".")
    url = (
        f"{config.rest_endpoint.rstrip('/')}/bigquery/v2/projects/{project}/datasets/"
        f"{dataset}/tables/{table}:testIamPermissions"
    )
    return requests.post(url, json={"permissions": permissions}, timeout=30)


def _held(answer: requests.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return list(body.get("permissions", []))  # an empty set: the field left out, as JSON does


@pytest.fixture
def table_id(rest: bigquery.Client, dataset: str) -> str:
    table = rest.create_table(
        bigquery.Table(f"{dataset}.orders", schema=[bigquery.SchemaField("id", "INT64")])
    )
    return f"{table.project}.{table.dataset_id}.{table.table_id}"


def test_the_answer_is_the_subset_of_the_permissions_asked_that_the_caller_holds(
    local_bigquery: LocalBigQuery, table_id: str
) -> None:
    assert _held(_test_permissions(local_bigquery, table_id, WRITER)) == WRITER
    with limited(granted_permissions="bigquery.tables.get,bigquery.tables.getData"):
        narrowed = _held(_test_permissions(local_bigquery, table_id, WRITER))
    assert narrowed == ["bigquery.tables.getData", "bigquery.tables.get"]
    with limited(granted_permissions=""):
        assert _held(_test_permissions(local_bigquery, table_id, WRITER)) == []


def test_a_table_that_does_not_exist_answers_an_empty_set_not_not_found(
    local_bigquery: LocalBigQuery, dataset: str
) -> None:
    answer = _test_permissions(local_bigquery, f"{dataset}.no_such_table", WRITER)

    assert answer.status_code != 404
    assert _held(answer) == []


def test_the_google_client_reads_the_answer(rest: bigquery.Client, table_id: str) -> None:
    """``Client.test_iam_permissions`` is how a Python caller asks."""
    with limited(granted_permissions="bigquery.tables.get"):
        answer = rest.test_iam_permissions(table_id, WRITER)
    assert answer.get("permissions") == ["bigquery.tables.get"]


def test_a_missing_table_answers_no_permission_not_even_to_create_it(
    local_bigquery: LocalBigQuery, dataset: str
) -> None:
    """ "If the resource does not exist, this will return an empty set of permissions,
    not a NOT_FOUND error": ``bigquery.tables.create`` too, though it is held on the
    dataset."""
    missing = f"{dataset}.not_yet"
    asked = ["bigquery.tables.create", "bigquery.tables.get"]
    answer = _test_permissions(local_bigquery, missing, asked)
    assert answer.status_code == 200
    assert _held(answer) == []


def test_the_granted_set_is_read_from_its_variable_and_checked() -> None:
    variable = "ONCEOVER_LOCALBQ_GRANTED_PERMISSIONS"
    got = from_environment({variable: " bigquery.tables.get, bigquery.tables.getData "})
    assert got == {"granted_permissions": "bigquery.tables.get,bigquery.tables.getData"}
    with pytest.raises(ConfigurationError, match=f"{variable}='tables get' is not"):
        from_environment({variable: "tables get"})
