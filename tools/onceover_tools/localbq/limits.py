"""The Storage Write API limits the local BigQuery enforces, settable while it runs.

BigQuery limits how many write streams a project may create, how many streams one
``BatchCommitWriteStreams`` may commit, how long a stream lives and how large one
``AppendRows`` request may be; bqemulator has none of these (its own request cap is
10 MiB with another error). The launcher's patches (:mod:`onceover_tools.localbq.patches`:
``create_stream_quota``, ``commit_stream_limit``, ``stream_lifetimes``,
``append_request_limit``) enforce them with the values held here, read again on every
call (a request's size: on every request), so a test can shorten a limit for a few
seconds::

    with limited(create_streams_per_window=3, create_window_s=1.0):
        ...  # the 4th CreateWriteStream within a second answers RESOURCE_EXHAUSTED

Five settings are not limits: ``repeated_flush``, how FlushRows answers an offset already
flushed (the ``buffered_flush`` patch), ``row_errors``, whether AppendRows checks
each row against the table's column rules (the ``row_errors`` patch; ``"off"`` answers
as bqemulator did, so a test can show what the patch changes),
``missing_stream_answer``, which of real BigQuery's shapes a missing stream is answered
in (the ``missing_stream_answers`` patch), ``arrow_rows``, whether the project takes
Arrow rows (the ``arrow_rows`` patch), and ``granted_permissions``, which IAM
permissions the caller holds on every table (the ``iam_permissions`` patch, which answers
``tables.testIamPermissions`` with them; ``"all"``, the default, holds every one).

The defaults are BigQuery's, but for ``repeated_flush``, which BigQuery does not
document: its default is the answer Apache Beam reads as "already flushed". A separately
launched local BigQuery (``onceover up``, ``onceover bigquery``) takes other values from
``ONCEOVER_LOCALBQ_<FIELD>`` environment variables (for example
``ONCEOVER_LOCALBQ_PENDING_LIFETIME_S=60``, ``ONCEOVER_LOCALBQ_REPEATED_FLUSH=ok``,
``ONCEOVER_LOCALBQ_ROW_ERRORS=off``,
``ONCEOVER_LOCALBQ_GRANTED_PERMISSIONS=bigquery.tables.get,bigquery.tables.getData``),
read once when the patches are installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from onceover.errors import ConfigurationError

ENV_PREFIX = "ONCEOVER_LOCALBQ_"
"""Prefix of the environment variables that set a limit: the field's name upper-cased."""

ALL_PERMISSIONS = "all"
"""``granted_permissions`` when the caller holds every permission (bqemulator has no IAM)."""
_PERMISSION_RE = re.compile(r"^[a-z][a-zA-Z0-9]*(\.[a-zA-Z0-9]+)+$")

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S

APPEND_REQUEST_CEILING_BYTES = 64 * 1024 * 1024
"""The largest ``append_request_max_bytes`` may be: the local BigQuery's gRPC server and
bqemulator's own request cap are raised this high (``append_request_limit``), so every
request up to it is read and answered in the stream; a larger one ends the connection
(gRPC's RESOURCE_EXHAUSTED), as bqemulator's transport did above its 10 MiB."""


@dataclass(frozen=True)
class WriteApiLimitValues:
    """One consistent set of limits. The defaults are BigQuery's (see the patches)."""

    create_streams_per_window: int = 10_000
    """CreateWriteStream calls one project may make per rolling window."""
    create_window_s: float = HOUR_S
    """The window of ``create_streams_per_window``."""
    commit_max_streams: int = 10_000
    """Streams one BatchCommitWriteStreams may name."""
    pending_lifetime_s: float = DAY_S
    """A PENDING stream not committed this long after its creation is deleted."""
    pending_buffer_s: float = 4 * HOUR_S
    """A finalized PENDING stream's rows are kept this long for a commit, then dropped
    (``pending_buffer``): "After the stream is finalized and before it is committed, the
    data can remain in the buffer for up to 4 hours"."""
    committed_idle_s: float = 3 * DAY_S
    """A COMMITTED stream without an append for this long is deleted."""
    buffered_idle_s: float = 7 * DAY_S
    """A BUFFERED stream without an append for this long is deleted."""
    arrow_rows: str = "accepted"
    """Whether the project takes Arrow rows (``arrow_rows``): ``"accepted"``, as
    BigQuery since Arrow ingestion's general availability; ``"refused"``, every Arrow
    append answered INVALID_ARGUMENT, as a project without it."""
    append_bytes_per_window: int = 3_000_000_000
    """Request bytes all AppendRows of a project may send per ``append_window_s``
    (``throughput_quota``): BigQuery's "Throughput: 3 GB per second per project" in a
    multi-region (300 MB in a region)."""
    append_window_s: float = 1.0
    """The window of ``append_bytes_per_window``."""
    append_refill_s: float = 10.0
    """Once the throughput quota is exceeded, every append of the project is refused for
    this long while it refills: "short-term quota can take up to 10s to refill ...
    long-term quota ... up to 10min", and "all append operations are rejected while a
    quota is being refilled" (Apache Beam PR #31837)."""
    connection_idle_s: float = 600.0
    """An AppendRows connection without a request for this long is closed with ABORTED
    (``idle_connections``): "Closing the stream because it has been inactive for 600
    seconds"."""
    append_request_max_bytes: int = 20_000_000
    """The largest serialized ``AppendRowsRequest`` taken; a larger one is refused in the
    stream with INVALID_ARGUMENT. BigQuery's "20 MB", read as 20,000,000 bytes: the
    decimal reading, the one Google's Java client checks before sending
    (``ConnectionWorker.getApiMaxRequestBytes()`` = ``20L * 1000L * 1000L``), and the
    smaller of the two (see ``append_request_limit``)."""
    repeated_flush: str = "already_exists"
    """How FlushRows answers an offset already flushed (BigQuery does not document it;
    see ``buffered_flush``): ``"already_exists"``, ALREADY_EXISTS with the StorageError
    ``OFFSET_ALREADY_EXISTS``, which Apache Beam's ``StorageApiFlushAndFinalizeDoFn``
    reads as "already flushed up to this point"; ``"ok"``, OK with the requested offset,
    nothing flushed again."""
    row_errors: str = "on"
    """Whether AppendRows checks every row against the table's column rules, as BigQuery
    does (``row_errors``): ``"on"``, a request with a bad row is refused whole with
    ``row_errors``; ``"off"``, rows are taken unchecked, as bqemulator did."""
    missing_stream_answer: str = "not_found"
    """How a call on a stream that does not exist is answered (``missing_stream_answers``):
    ``"not_found"``, NOT_FOUND with the StorageError ``STREAM_NOT_FOUND``; the other
    shapes real BigQuery also gives, ``"invalid_argument"`` and ``"failed_precondition"``
    (that code, the same StorageError), and ``"permission_denied"`` ("Permission
    'TABLES_UPDATE_DATA' denied on resource '...' (or it may not exist).", no
    StorageError)."""
    schema_update_lag_s: float = 0.0
    """How long a column a schema update added stays unseen by AppendRows, which refuses
    a writer schema naming it meanwhile (``schema_update_lag``): BigQuery's "after some
    time (in order of minutes)"; 0, the default, sees it at once, as bqemulator does."""
    granted_permissions: str = ALL_PERMISSIONS
    """The IAM permissions the caller holds on every table, as ``tables.testIamPermissions``
    answers them (``iam_permissions``): ``"all"``, every permission asked about; or a
    comma-separated list (``"bigquery.tables.get,bigquery.tables.getData"``; ``""``: none),
    so a test can take one away."""


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(WriteApiLimitValues))
_COUNTS = frozenset({"create_streams_per_window", "commit_max_streams", "append_bytes_per_window"})
_BYTES = frozenset({"append_request_max_bytes"})
_WHOLE = _COUNTS | _BYTES
_MAY_BE_NONE = frozenset({"schema_update_lag_s"})
"""Durations that may be 0: none of that delay."""
REPEATED_FLUSH_ANSWERS = ("already_exists", "ok")
"""The values ``repeated_flush`` takes."""
ROW_ERRORS_SETTINGS = ("on", "off")
"""The values ``row_errors`` takes."""
ARROW_ROWS_SETTINGS = ("accepted", "refused")
"""The values ``arrow_rows`` takes."""
MISSING_STREAM_ANSWERS = (
    "not_found",
    "invalid_argument",
    "failed_precondition",
    "permission_denied",
)
"""The values ``missing_stream_answer`` takes."""
_CHOICES: dict[str, tuple[str, ...]] = {
    "repeated_flush": REPEATED_FLUSH_ANSWERS,
    "row_errors": ROW_ERRORS_SETTINGS,
    "missing_stream_answer": MISSING_STREAM_ANSWERS,
    "arrow_rows": ARROW_ROWS_SETTINGS,
}
_PERMISSION_LISTS = frozenset({"granted_permissions"})
_KINDS = {
    "granted_permissions": f"{ALL_PERMISSIONS!r} or comma-separated IAM permissions",
    **dict.fromkeys(_COUNTS, "a whole number >= 0"),
    **dict.fromkeys(_BYTES, f"a whole number of bytes in 1..{APPEND_REQUEST_CEILING_BYTES}"),
    **{name: f"one of {', '.join(choices)}" for name, choices in _CHOICES.items()},
    **dict.fromkeys(_MAY_BE_NONE, "a number of seconds >= 0"),
}

LimitValue: TypeAlias = float | str
"""A field's value: a number, or one of a few words (``repeated_flush``, ``row_errors``,
``missing_stream_answer``)."""


def _checked(name: str, value: object) -> LimitValue:
    """``value`` for field ``name``, or ``ValueError``/``TypeError`` saying what is wrong."""
    if name not in FIELDS:
        raise TypeError(f"no Storage Write API limit is called {name!r}; the limits: {FIELDS}")
    if name in _CHOICES:
        choices = _CHOICES[name]
        if not isinstance(value, str):
            raise TypeError(f"{name} must be one of {choices}, not {value!r}")
        if value not in choices:
            raise ValueError(f"{name} must be one of {choices}, not {value!r}")
        return value
    if name in _PERMISSION_LISTS:
        return _permission_list(name, value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {value!r}")
    if name in _COUNTS:
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    elif name in _BYTES:
        if not isinstance(value, int) or not 1 <= value <= APPEND_REQUEST_CEILING_BYTES:
            raise ValueError(
                f"{name} must be a whole number of bytes in 1..{APPEND_REQUEST_CEILING_BYTES}, "
                f"not {value!r}"
            )
    elif not (value >= 0 if name in _MAY_BE_NONE else value > 0):  # also refuses NaN
        least = ">= 0" if name in _MAY_BE_NONE else "> 0"
        raise ValueError(f"{name} must be a duration in seconds {least}, not {value!r}")
    return value


def _permission_list(name: str, value: object) -> str:
    """``value`` as ``"all"`` or a comma-separated list of permissions, blanks dropped."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be {ALL_PERMISSIONS!r} or a text of permissions, not {value!r}"
        )
    if value.strip() == ALL_PERMISSIONS:
        return ALL_PERMISSIONS
    permissions = [part.strip() for part in value.split(",") if part.strip()]
    wrong = [p for p in permissions if not _PERMISSION_RE.match(p)]
    if wrong:
        raise ValueError(
            f"{name}: {', '.join(map(repr, wrong))} is not an IAM permission "
            f"(service.resource.verb, e.g. bigquery.tables.get), nor {ALL_PERMISSIONS!r}"
        )
    return ",".join(permissions)


def granted(values: WriteApiLimitValues, requested: list[str]) -> list[str]:
    """Of ``requested``, the permissions ``values.granted_permissions`` holds, in order."""
    if values.granted_permissions == ALL_PERMISSIONS:
        return list(requested)
    held = set(values.granted_permissions.split(","))
    return [permission for permission in requested if permission in held]


class WriteApiLimits:
    """The process-wide limits: read by the patches on every call, changed by tests.

    Each field reads the current value; :meth:`snapshot` gives all of them at once,
    consistent with each other. Changes go through :meth:`update` (or
    :func:`limited`), which checks them, under a lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = WriteApiLimitValues()

    def snapshot(self) -> WriteApiLimitValues:
        return self._values  # frozen: replaced whole, never changed in place

    def update(self, **overrides: LimitValue) -> WriteApiLimitValues:
        """Set the given fields; return the values as they were before."""
        checked: dict[str, Any] = {n: _checked(n, value) for n, value in overrides.items()}
        with self._lock:
            previous = self._values
            self._values = dataclasses.replace(previous, **checked)
            return previous

    def restore(self, values: WriteApiLimitValues) -> None:
        """Put back values :meth:`update` returned (or :class:`WriteApiLimitValues`())."""
        with self._lock:
            self._values = values

    @property
    def create_streams_per_window(self) -> int:
        return self._values.create_streams_per_window

    @property
    def create_window_s(self) -> float:
        return self._values.create_window_s

    @property
    def commit_max_streams(self) -> int:
        return self._values.commit_max_streams

    @property
    def pending_lifetime_s(self) -> float:
        return self._values.pending_lifetime_s

    @property
    def pending_buffer_s(self) -> float:
        return self._values.pending_buffer_s

    @property
    def arrow_rows(self) -> str:
        return self._values.arrow_rows

    @property
    def schema_update_lag_s(self) -> float:
        return self._values.schema_update_lag_s

    @property
    def connection_idle_s(self) -> float:
        return self._values.connection_idle_s

    @property
    def append_bytes_per_window(self) -> int:
        return self._values.append_bytes_per_window

    @property
    def append_window_s(self) -> float:
        return self._values.append_window_s

    @property
    def append_refill_s(self) -> float:
        return self._values.append_refill_s

    @property
    def committed_idle_s(self) -> float:
        return self._values.committed_idle_s

    @property
    def buffered_idle_s(self) -> float:
        return self._values.buffered_idle_s

    @property
    def append_request_max_bytes(self) -> int:
        return self._values.append_request_max_bytes

    @property
    def repeated_flush(self) -> str:
        return self._values.repeated_flush

    @property
    def row_errors(self) -> str:
        return self._values.row_errors

    @property
    def missing_stream_answer(self) -> str:
        return self._values.missing_stream_answer

    @property
    def granted_permissions(self) -> str:
        return self._values.granted_permissions


WRITE_API_LIMITS = WriteApiLimits()
"""The limits every local BigQuery in this process enforces."""


class CreateStreamQuota:
    """CreateWriteStream calls per project over the rolling window of :data:`WRITE_API_LIMITS`.

    Every local BigQuery in the process shares it, as the projects of BigQuery do.
    """

    def __init__(self, limits: WriteApiLimits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._calls: dict[str, deque[float]] = {}

    def _recent(self, project: str, now: float) -> deque[float]:
        calls = self._calls.setdefault(project, deque())
        horizon = now - self._limits.create_window_s
        while calls and calls[0] <= horizon:
            calls.popleft()
        return calls

    def admit(self, project: str) -> float | None:
        """Count one call and return ``None``; over the quota count nothing and return
        the seconds until the oldest counted call leaves the window."""
        with self._lock:
            now = time.monotonic()
            calls = self._recent(project, now)
            if len(calls) >= self._limits.create_streams_per_window:
                oldest = calls[0] if calls else now
                return max(0.0, oldest + self._limits.create_window_s - now)
            calls.append(now)
            return None

    def count(self, project: str) -> int:
        """Calls of ``project`` counted in the current window."""
        with self._lock:
            return len(self._recent(project, time.monotonic()))

    def reset(self) -> None:
        """Forget every counted call."""
        with self._lock:
            self._calls.clear()


CREATE_STREAM_QUOTA = CreateStreamQuota(WRITE_API_LIMITS)
"""The quota ``create_stream_quota`` enforces."""


class ThroughputQuota:
    """AppendRows request bytes per project over the rolling window of
    :data:`WRITE_API_LIMITS`; once over it, every append of the project is refused until
    ``append_refill_s`` has passed (the quota refilling)."""

    def __init__(self, limits: WriteApiLimits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._sent: dict[str, deque[tuple[float, int]]] = {}
        self._refilled_at: dict[str, float] = {}

    def admit(self, project: str, size: int) -> bool:
        """Count a request of ``size`` bytes and return True; while the quota refills, or
        when the request would exceed it, count nothing and return False."""
        with self._lock:
            now = time.monotonic()
            if now < self._refilled_at.get(project, 0.0):
                return False
            sent = self._sent.setdefault(project, deque())
            horizon = now - self._limits.append_window_s
            while sent and sent[0][0] <= horizon:
                sent.popleft()
            if sum(n for _, n in sent) + size > self._limits.append_bytes_per_window:
                self._refilled_at[project] = now + self._limits.append_refill_s
                sent.clear()
                return False
            sent.append((now, size))
            return True

    def reset(self) -> None:
        with self._lock:
            self._sent.clear()
            self._refilled_at.clear()


THROUGHPUT_QUOTA = ThroughputQuota(WRITE_API_LIMITS)
"""The quota ``throughput_quota`` enforces."""


def create_stream_calls(project: str) -> int:
    """How many CreateWriteStream calls of ``project`` the quota counts right now (in the
    current window; refused calls are not counted)."""
    return CREATE_STREAM_QUOTA.count(project)


@contextlib.contextmanager
def limited(**overrides: LimitValue) -> Iterator[WriteApiLimitValues]:
    """Enforce other limits inside the block (each read on every call); yields them.

    The quota's counters start from zero inside the block and again after it, when
    the previous limits are back.
    """
    previous = WRITE_API_LIMITS.update(**overrides)
    CREATE_STREAM_QUOTA.reset()
    THROUGHPUT_QUOTA.reset()
    try:
        yield WRITE_API_LIMITS.snapshot()
    finally:
        WRITE_API_LIMITS.restore(previous)
        CREATE_STREAM_QUOTA.reset()
        THROUGHPUT_QUOTA.reset()


def from_environment(environ: Mapping[str, str]) -> dict[str, LimitValue]:
    """The limits ``ONCEOVER_LOCALBQ_<FIELD>`` variables of ``environ`` set, checked.

    A word (``repeated_flush``, ``row_errors``) is read without surrounding blanks, in
    any case.
    Raises :class:`ConfigurationError` naming the variable when a value is wrong.
    """
    overrides: dict[str, LimitValue] = {}
    for name in FIELDS:
        variable = ENV_PREFIX + name.upper()
        text = environ.get(variable)
        if text is None or not text.strip():
            continue
        try:
            value: LimitValue
            if name in _CHOICES:
                value = text.strip().lower()
            elif name in _PERMISSION_LISTS:
                value = text.strip()
            else:
                value = int(text) if name in _WHOLE else float(text)
            overrides[name] = _checked(name, value)
        except (TypeError, ValueError) as exc:
            kind = _KINDS.get(name, "a number of seconds > 0")
            raise ConfigurationError(f"{variable}={text!r} is not {kind} ({exc})") from exc
    return overrides


def apply_environment(environ: Mapping[str, str] | None = None) -> dict[str, LimitValue]:
    """Set the limits ``environ`` (default: ``os.environ``) names; return what was set."""
    overrides = from_environment(os.environ if environ is None else environ)
    if overrides:
        WRITE_API_LIMITS.update(**overrides)
    return overrides
