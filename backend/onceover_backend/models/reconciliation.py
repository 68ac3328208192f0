"""Reconciliations: expected rows against what BigQuery holds, per batch or run."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, Field

from onceover.identifiers import COLUMN_NAME_RE, TABLE_ID_RE

ReconciliationStatus = Literal["ok", "mismatch", "error"]


class DuplicateKeyPublic(BaseModel):
    """A key found more than once in the table."""

    key: str = Field(description="the key as text (INT64 keys past 2**53 keep every digit)")
    count: int = Field(description="rows holding it in the whole table")
    batch_id: int | None = Field(
        default=None, description="the run's batch holding it (stamped runs)"
    )
    run_id: str | None = Field(
        default=None, description="the stamped run holding it (table checks)"
    )


class ReceiptKeyPublic(BaseModel):
    """A key a receipt check found duplicated, missing or unexpected in one batch."""

    key: str | None = Field(
        description="the key as text; null for a STRING key known only by its hash"
    )
    key_hash: str = Field(
        description="the first 10 hex digits of MD5(CAST(key AS STRING)): its checksum term "
        "and its bucket (SUBSTR(TO_HEX(MD5(CAST(key AS STRING))), 1, 10) finds it)"
    )
    copies: int = Field(
        description="rows holding it: duplicated, in the whole table; missing, 0; "
        "unexpected, in the batch"
    )


class UnresolvedBucketPublic(BaseModel):
    """A key-hash bucket of a batch whose difference no single key explains: two keys
    missing, a key missing and another unexpected, or rows with a NULL key."""

    bucket: int | None = Field(description="the bucket; null: the rows whose key is NULL")
    expected_rows: int = Field(description="rows of the bucket in the batch's receipt")
    actual_rows: int = Field(description="rows found, extra copies of duplicated keys left out")


class BatchReconciliationPublic(BaseModel):
    """One batch of a stamped run: what the control plane recorded against BigQuery."""

    batch_id: int | None = Field(description="None for a batch write")
    status: Literal["ok", "mismatch"]
    expected_rows: int = Field(description="rows of the batch's commit (0: never committed)")
    actual_rows: int = Field(description="rows stamped with this run and batch")
    distinct_keys: int | None
    duplicate_keys: int = Field(description="keys of the batch found more than once")
    duplicate_rows: int
    expected_checksum: int | None = Field(
        default=None, description="checked by receipt: the key checksum of its receipt"
    )
    actual_checksum: int | None = Field(
        default=None, description="checked by receipt: the same sum over the rows found"
    )
    keys_duplicated: list[ReceiptKeyPublic] = Field(
        default=[], description="checked by receipt: its keys held more than once"
    )
    keys_missing: list[ReceiptKeyPublic] = Field(
        default=[],
        description="checked by receipt: keys of its receipt absent from the table, INT64 "
        "keys by value, STRING keys by hash",
    )
    keys_unexpected: list[ReceiptKeyPublic] = Field(
        default=[], description="checked by receipt: keys stamped with it its receipt lacks"
    )
    unresolved_buckets: list[UnresolvedBucketPublic] = Field(
        default=[], description="checked by receipt: differences no single key explains"
    )


class RunReconciliationPublic(BaseModel):
    """One run's rows within a table check (stamped runs; ``run_id`` None: unstamped rows)."""

    run_id: str | None
    status: Literal["ok", "mismatch"]
    expected_rows: int
    actual_rows: int
    distinct_keys: int | None
    duplicate_keys: int
    duplicate_rows: int


class ReconciliationPublic(BaseModel):
    """Expected rows (committed batches the control plane recorded) against BigQuery.

    ``ok`` means every count agrees: rows = distinct keys = expected, no key twice in
    the table, every batch (or run) agreeing. ``mismatch`` names what differs; ``error``
    means BigQuery could not answer (``error`` says why) and nothing was compared.
    """

    id: int
    scope: Literal["run", "table"]
    run_id: str | None
    table: str
    key: str | None = Field(description="the key column compared; None: rows counted only")
    stamped: bool = Field(description="the run's rows were counted in place by their stamps")
    status: ReconciliationStatus
    expected_rows: int | None
    actual_rows: int | None
    distinct_keys: int | None
    rows_without_key: int | None = Field(description="rows whose key is NULL")
    duplicate_key_count: int | None = Field(description="keys found more than once")
    duplicate_rows: int | None = Field(description="copies of those keys beyond the first")
    duplicate_keys: list[DuplicateKeyPublic] = Field(
        description="up to 20 duplicated keys, most copies first"
    )
    missing_rows: int | None = Field(description="expected rows whose key is absent")
    extra_rows: int | None = Field(description="rows beyond the expected: copies and unknown keys")
    rows_set_aside: int | None = Field(
        None,
        description="rows the committed batches set aside in a dead-letter table: expected, "
        "never missing (not in expected_rows)",
    )
    rows_redriven: int | None = Field(
        None,
        description="a run's check: of its rows set aside, those its re-drives had landed "
        "when it was checked (their committed rows); null: nothing was set aside, or a "
        "table's check",
    )
    dead_letter_table: str | None = Field(
        None, description="the dead-letter table the batches named, if any"
    )
    rows_in_dead_letter_table: int | None = Field(
        None,
        description="the run's (or table's runs') rows found in the dead-letter table "
        "(run_id = the run); a count other than the rows set aside there is a mismatch",
    )
    overwrite: bool = Field(
        default=False,
        description="the run overwrote the table: the scope it replaced (the whole table, or "
        "replaced_partitions) was counted against the rows it staged, its other rows not",
    )
    replaced_partitions: list[str] | None = Field(
        default=None,
        description="an overwrite's check: the partitions it replaced, by BigQuery's "
        "partition ids, whose rows were counted; null: the whole table (or no overwrite)",
    )
    batches: list[BatchReconciliationPublic] = Field(description="per batch (stamped runs)")
    runs: list[RunReconciliationPublic] = Field(description="per run (table checks)")
    mismatched_batches: list[int | None] = Field(description="batch ids that differ")
    method: Literal["receipts", "counts", "changes"] | None = Field(
        default=None,
        description="receipts: each batch's rows and key checksum against its receipt, a "
        "differing batch's keys found by key-hash bucket (stamped runs whose batches carry "
        "a key tally); counts: rows, distinct keys and duplicates counted; changes: a "
        "change data capture table, each primary key held once (expected_rows null: the "
        "changes sent are in warnings); null before 0009",
    )
    queries: int | None = Field(
        default=None, description="BigQuery queries the check ran (null before 0009)"
    )
    compared_with: str | None = Field(
        default=None,
        description="a change data capture check given the source's state as a table "
        "(against=): that table; missing_rows are its keys the table lacks, extra_rows the "
        "table's keys it lacks (and copies), keys_differing those whose rows differ",
    )
    keys_differing: int | None = Field(
        default=None,
        description="a CDC check against a source: keys of both whose rows differ in a "
        "column both have (an older version kept); null without a source",
    )
    warnings: list[str]
    error: str | None
    trigger: Literal["api", "run_succeeded"]
    actor: str
    checked_at: AwareDatetime
    duration_ms: float


class ReconciliationsPublic(BaseModel):
    data: list[ReconciliationPublic]
    count: int


class TableReconcileRequest(BaseModel):
    """``POST /api/tables/{table}/reconcile``: the key column, if not the runs' own."""

    key: Annotated[str, Field(pattern=COLUMN_NAME_RE.pattern)] | None = Field(
        default=None,
        description="column identifying a row; default: the key of the table's latest run",
    )
    against: Annotated[str, Field(max_length=1100, pattern=TABLE_ID_RE.pattern)] | None = Field(
        default=None,
        description="a change data capture table: the source's state as a table (a snapshot, "
        "an export) to compare it with key by key",
    )
