"""Errors the control plane raises on purpose, and the HTTP answer each one becomes.

The tree::

    ControlPlaneError          anything the backend raises on purpose (HTTP 400)
    ├── NotAuthenticatedError   no bearer token, or one nobody issued (401)
    ├── NotAllowedError         a valid token whose role may not do this (403)
    ├── NotFoundError           the run (or other thing) named does not exist (404)
    ├── InvalidParameterError   a query parameter is wrong; names it (422)
    ├── ResumeConflictError     the run cannot be resumed now: it is not failed or
    │                           stalled, or an attempt of it is live (409)
    │   └── SpecNotApprovedError  the launch spec its job reported has no operator's
    │                           approval (409): see onceover_backend.services.launch.specs
    ├── UnresumableError        the run's stored spec or checkpoint cannot be used to
    │                           resume it: no spec, a module outside the allowlist, a
    │                           checkpoint missing, unreadable or another run's (422)
    ├── RedriveConflictError    the run's set-aside rows cannot be re-driven now: it set
    │                           nothing aside, every row is re-driven, a re-drive of it is
    │                           live, or the plan confirmed is not the plan now (409)
    ├── NotRedrivableError      the control plane does not know how to re-drive the run:
    │                           no ledger it can name, a re-drive run, a dead-letter
    │                           table it cannot pass on (422)
    ├── LaunchFailedError       the control plane is not set up to launch jobs, or the
    │                           process did not start (503)
    └── ReconciliationFailedError  BigQuery could not answer a reconciliation: the table
                                is gone, a column is missing, BigQuery is unreachable.
                                Never an HTTP error: the check is stored as an ``error``
                                result with this reason, and the answer is 200.

Routes raise these; one handler in :mod:`onceover_backend.main` turns each into JSON
``{"detail": ...}`` with its status, the shape FastAPI uses for its own errors.
Anything else is a bug: a 500 whose log line carries the request id.
"""

from __future__ import annotations

from typing import Any


class ControlPlaneError(Exception):
    status_code = 400

    def __init__(self, detail: Any) -> None:
        self.detail = detail
        super().__init__(str(detail))


class NotAuthenticatedError(ControlPlaneError):
    status_code = 401


class NotAllowedError(ControlPlaneError):
    status_code = 403


class NotFoundError(ControlPlaneError):
    status_code = 404


class InvalidParameterError(ControlPlaneError):
    """A parameter is invalid; ``detail`` is FastAPI's list shape, naming it and where it
    was (``query`` or ``body``)."""

    status_code = 422

    def __init__(self, name: str, message: str, value: Any = None, where: str = "query") -> None:
        loc = [where] if name == where else [where, name]
        super().__init__([{"loc": loc, "msg": message, "type": "value_error", "input": value}])


class ResumeConflictError(ControlPlaneError):
    status_code = 409


class SpecNotApprovedError(ResumeConflictError):
    """Nothing launches a spec an ingest token sent until an operator approves it."""


class UnresumableError(ControlPlaneError):
    status_code = 422


class RedriveConflictError(ControlPlaneError):
    status_code = 409


class NotRedrivableError(ControlPlaneError):
    status_code = 422


class LaunchFailedError(ControlPlaneError):
    status_code = 503


class ReconciliationFailedError(ControlPlaneError):
    """Why a reconciliation could not compare; its message is the stored reason."""

    status_code = 502


class SignInRefusedError(ControlPlaneError):
    """A single sign-on that did not end in a session. ``reason`` names what failed
    (``state``, ``nonce``, ``issuer``, ``audience``, ``expired``, ``token``, ``role``,
    ``provider``); the callback answers it with a page saying what to do."""

    def __init__(self, reason: str, message: str, *, status_code: int = 400,
                 who: str | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.reason = reason
        self.status_code = status_code
        self.who = who
