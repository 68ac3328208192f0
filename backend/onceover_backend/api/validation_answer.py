"""The 422 answer to a request FastAPI found invalid: each error names where, as
FastAPI's does, but echoes only a bounded, encodable sample of what was sent.

FastAPI's own answer echoes each bad value whole: a 10 MB string came back whole,
and a value JSON cannot carry (a lone surrogate in a query, a non-finite float) made
the answer itself fail, a 500 that also dropped the connection. The answer is also kept
in the audit log, so a value under a secret-looking name is masked, and a ``url``
(a webhook's: its path is often its secret) shows its host only.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from onceover_backend.services.launch.redaction import MASK, secret_name
from onceover_backend.services.webhooks.urls import redacted

MAX_TEXT = 200
"""Characters of an echoed string."""
MAX_ITEMS = 10
"""Items of an echoed list, or keys of an echoed object."""
MAX_DEPTH = 4
MAX_ERRORS = 100
"""Errors listed in one answer (each names its place); a count says how many more."""


async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    detail = [_safe_error(error) for error in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        detail.append({
            "loc": [], "msg": f"and {len(errors) - MAX_ERRORS:,} more errors",
            "type": "too_many_errors",
        })  # fmt: skip
    return JSONResponse({"detail": detail}, status_code=422)


def _safe_error(error: Any) -> Any:
    if not isinstance(error, dict):
        return sample(error)
    shown = {key: value for key, value in error.items() if key not in ("input", "ctx", "url")}
    try:
        shown = jsonable_encoder(shown)
    except (TypeError, ValueError):  # an exception object in a message's context
        shown = {key: sample(value) for key, value in shown.items()}
    shown = {key: sample(value) for key, value in shown.items()}
    if "input" in error:
        loc = error.get("loc") or ()
        name = str(loc[-1]) if loc else ""
        shown["input"] = _masked(name, error["input"], 0) if name else sample(error["input"])
    if isinstance(error.get("ctx"), dict):
        shown["ctx"] = {str(k): sample(v) for k, v in error["ctx"].items()}
    return shown


def sample(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can carry it, cut to a size worth reading."""
    if isinstance(value, dict | list | tuple | set | frozenset):
        return "…" if depth >= MAX_DEPTH else _sample_container(value, depth)
    return _sample_scalar(value)


def _sample_scalar(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = str(value).encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_TEXT:
        return f"{text[:MAX_TEXT]}… ({len(text):,} characters)"
    return text


def _sample_container(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...] | set[Any] | frozenset[Any], depth: int
) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        shown = {
            _sample_scalar(str(k)): _masked(str(k), v, depth + 1) for k, v in items[:MAX_ITEMS]
        }
        if len(items) > MAX_ITEMS:
            shown["…"] = f"{len(items) - MAX_ITEMS:,} more keys"
        return shown
    listed = list(value)
    shown_items = [sample(v, depth + 1) for v in listed[:MAX_ITEMS]]
    if len(listed) > MAX_ITEMS:
        shown_items.append(f"… {len(listed) - MAX_ITEMS:,} more items")
    return shown_items


def _masked(name: str, value: Any, depth: int) -> Any:
    """``value`` sampled, unless ``name`` says it is a secret or a URL to hide."""
    if secret_name(name):
        return MASK
    if name == "url" and isinstance(value, str):
        return _sample_scalar(redacted(value))
    return sample(value, depth)
