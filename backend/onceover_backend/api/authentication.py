"""Who a request is from: a bearer token (jobs, scripts, the dashboard signed in with a
token) or, without one, the dashboard's single sign-on session cookie. One function, so
the body guard (which authenticates before a body is read) and the routes' role checks
cannot disagree.

A write signed by the cookie must carry the session's CSRF token in ``X-CSRF-Token``: a
browser sends the cookie with any site's form or fetch, never a header of ours (another
origin cannot read the token). A bearer token needs none: no browser sends it by itself.
"""

from __future__ import annotations

import hmac
from typing import Any

import anyio.to_thread

from onceover_backend.core.security import Principal, TokenVerifier
from onceover_backend.errors import NotAllowedError, NotAuthenticatedError
from onceover_backend.services.access.sso import SESSION_COOKIE, SingleSignOn

CSRF_HEADER = "x-csrf-token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


async def authenticate(
    state: Any, *, method: str, authorization: str, cookies: dict[str, str], csrf: str | None
) -> Principal:
    """The request's principal, or NotAuthenticatedError / NotAllowedError saying why."""
    scheme, _, token = authorization.partition(" ")
    if authorization:
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticatedError("a bearer token is required (Authorization: Bearer TOKEN)")
        verifier: TokenVerifier = state.token_verifier
        principal = await verifier.verify(token.strip())
        if principal is None:
            raise NotAuthenticatedError("the bearer token is not valid")
        return principal
    sso: SingleSignOn = state.sso
    cookie = cookies.get(SESSION_COOKIE)
    if not (sso.enabled and cookie):
        raise NotAuthenticatedError("a bearer token is required (Authorization: Bearer TOKEN)")
    found = await anyio.to_thread.run_sync(sso.principal, cookie)
    if found is None:
        raise NotAuthenticatedError("the session has ended: sign in again")
    if method not in _SAFE and not (
        csrf and found.csrf_token and hmac.compare_digest(csrf, found.csrf_token)
    ):
        raise NotAllowedError(
            "a write from a signed-in session needs its CSRF token in the X-CSRF-Token "
            "header (GET /api/session gives it)"
        )
    return found
