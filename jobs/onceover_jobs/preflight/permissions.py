"""Check 3: the caller's permissions, as ``tables.testIamPermissions`` answers them.

The write reads the table (``bigquery.tables.get``), appends to it through the Storage
Write API (``bigquery.tables.updateData``: CreateWriteStream and AppendRows) and reads
rows back for an overwrite, reconciliation and dead letters (``bigquery.tables.getData``).
A write that would create its table needs ``bigquery.tables.create`` on the dataset.
``roles/bigquery.dataEditor`` on the dataset holds all four. Google documents the method
as one for "permission-aware UIs and command-line tools, not for authorization checking"
(it may "fail open"): an ok here is strong evidence, not a promise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceover.bigquery import BigQueryConfig
from onceover_jobs.preflight.report import Check, fail, ok, warn
from onceover_jobs.sink.job.options import SinkOptions

if TYPE_CHECKING:
    from google.cloud.bigquery import Client, Table

NAME = "permissions"
ROLE = "roles/bigquery.dataEditor"
"""The predefined role that holds every permission below."""
ON_TABLE = ("bigquery.tables.updateData", "bigquery.tables.getData", "bigquery.tables.get")
"""What a write needs on an existing table."""
CREATE = "bigquery.tables.create"
"""What a write that creates its table needs on the dataset."""


def check_permissions(config: BigQueryConfig, options: SinkOptions) -> tuple[Check, Table | None]:
    """The check, and the table when it exists (None: missing, or unreadable)."""
    from google.api_core.exceptions import Forbidden, NotFound

    from onceover_jobs.sink.rows.schema import rest_client

    client = rest_client(config)
    dataset = f"{options.project}.{options.dataset}"
    try:
        table = client.get_table(options.table, timeout=30)
    except NotFound:
        table = None
    except Forbidden as exc:
        return fail(
            NAME,
            f"tables.get on {options.table} was refused ({exc.message}): the caller lacks "
            "bigquery.tables.get",
            f"grant {ROLE} on the dataset {dataset} to the job's credentials",
        ), None
    if table is None:
        return missing_table_check(client, options, dataset), None
    answer = client.test_iam_permissions(options.table, list(ON_TABLE), timeout=30)
    held = set(answer.get("permissions", []))
    lacking = [permission for permission in ON_TABLE if permission not in held]
    if lacking:
        return fail(
            NAME,
            f"the caller lacks {', '.join(lacking)} on {options.table}",
            f"grant {ROLE} on the dataset {dataset} (it holds {', '.join(ON_TABLE)}) to "
            "the job's credentials",
        ), table
    return ok(NAME, f"{', '.join(ON_TABLE)} held on {options.table}"), table


def missing_table_check(client: Client, options: SinkOptions, dataset: str) -> Check:
    """The check of a table that does not exist: may the write create it?"""
    if options.creation.disposition == "CREATE_NEVER":
        return fail(
            NAME,
            f"{options.table} does not exist and createDisposition is CREATE_NEVER",
            "create the table first, or leave createDisposition out to have the write "
            "create it from the DataFrame",
        )
    from google.api_core.exceptions import NotFound

    cannot_tell = warn(
        NAME,
        f"{options.table} does not exist; the write creates it, which needs {CREATE} on "
        f"{dataset}, and BigQuery cannot be asked that beforehand (tables.testIamPermissions "
        "answers no permissions for a table that does not exist)",
        f"make sure the job's credentials hold {ROLE} on the dataset {dataset} (it holds "
        f"{CREATE}), or create the table first and check again",
    )
    try:
        answer = client.test_iam_permissions(options.table, [CREATE], timeout=30)
    except NotFound:
        # Google's reference in some languages: a missing resource answers NOT_FOUND
        # "if the caller has permissions to the parent resource" (which ones, unsaid).
        return cannot_tell
    if CREATE not in answer.get("permissions", []):
        # The documented answer for a missing table: the empty set, whatever is held.
        return cannot_tell
    return ok(NAME, f"{options.table} does not exist; the write creates it ({CREATE} held "
                    f"on {dataset})")  # fmt: skip
