"""``/auth``: the dashboard's single sign-on (services/access/sso.py does the work).

``GET /auth/login`` sends the browser to the identity provider; ``GET /auth/callback``
takes it back, sets the session cookie and lands on the page the person came from, or
answers a page saying why the sign-in was refused; ``POST /auth/logout`` ends the session.
Each sign-in, refusal and sign-out is audited, naming the person where known."""

from __future__ import annotations

import html
import uuid
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from onceover_backend.api.authentication import CSRF_HEADER, authenticate
from onceover_backend.errors import SignInRefusedError
from onceover_backend.models import AuthConfigPublic, ErrorPublic
from onceover_backend.services.access import audit
from onceover_backend.services.access.sso import SESSION_COOKIE, SignedIn, SingleSignOn
from onceover_backend.tables import AuditLog

router = APIRouter(prefix="/auth", tags=["auth"])

# /auth/login and /auth/callback are the browser's (redirects and pages), not the API's:
# they are left out of the OpenAPI schema.


def _sso(request: Request) -> SingleSignOn:
    sso: SingleSignOn = request.app.state.sso
    return sso


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", None) or uuid.uuid4().hex)


def _audit(request: Request, *, action: str, status: int, outcome: str, actor: str,
           subject: str | None = None, role: str | None = None) -> None:  # fmt: skip
    audit.record(
        request.app.state.engine,
        AuditLog(actor=actor, subject=subject, role=role, action=action, method=request.method,
                 path=request.url.path, request_id=_request_id(request), status_code=status,
                 outcome=outcome),
    )  # fmt: skip


def _audit_refusal(request: Request, refused: SignInRefusedError) -> None:
    _audit(
        request, action="ssoSignIn", status=refused.status_code,
        outcome=f"refused ({refused.reason}): {refused.detail}",
        actor=f"sso:{refused.who}" if refused.who else "anonymous",
    )  # fmt: skip


@router.get("/config", operation_id="getAuthConfig", response_model=AuthConfigPublic)
def auth_config(request: Request) -> AuthConfigPublic:
    """Whether the sign-in page offers single sign-on (no token needed)."""
    sso = _sso(request)
    if not sso.enabled:
        return AuthConfigPublic(sso=False)
    return AuthConfigPublic(
        sso=True, provider=sso.settings.oidc_provider_name, login_path="/auth/login"
    )


@router.get("/login", response_class=RedirectResponse, include_in_schema=False)
def login(request: Request, next: Annotated[str | None, Query(max_length=2000)] = None) -> Response:
    """To the identity provider (302), to come back to ``next`` (a path here)."""
    sso = _sso(request)
    if not sso.enabled:
        return _not_configured()
    try:
        return RedirectResponse(sso.begin(next), status_code=302)
    except SignInRefusedError as refused:
        _audit_refusal(request, refused)
        return _refusal_page(refused)


@router.get("/callback", response_class=HTMLResponse, include_in_schema=False)
async def callback(request: Request) -> Response:
    """Back from the identity provider: the session cookie and a redirect, or a page
    saying why the sign-in was refused."""
    sso = _sso(request)
    if not sso.enabled:
        return _not_configured()
    params = dict(request.query_params)
    try:
        signed_in: SignedIn = await anyio.to_thread.run_sync(sso.complete, params)
    except SignInRefusedError as refused:
        await anyio.to_thread.run_sync(_audit_refusal, request, refused)
        return _refusal_page(refused)
    record = signed_in.session
    await anyio.to_thread.run_sync(lambda: _audit(
        request, action="ssoSignIn", status=302, outcome="ok",
        actor=f"sso:{record.email or record.subject}", subject=record.subject, role=record.role,
    ))  # fmt: skip
    answer = RedirectResponse(signed_in.next_path, status_code=302)
    answer.set_cookie(
        SESSION_COOKIE, signed_in.cookie, max_age=int(sso.settings.oidc_session_hours * 3600),
        path="/", secure=True, httponly=True, samesite="lax",
    )  # fmt: skip
    return answer


@router.post("/logout", operation_id="signOut", status_code=204, response_class=Response,
             responses={401: {"model": ErrorPublic, "description": "No live session"},
                        403: {"model": ErrorPublic, "description": "No CSRF token"}})  # fmt: skip
async def logout(request: Request) -> Response:
    """End the signed-in session (its CSRF token in X-CSRF-Token); the cookie is cleared."""
    sso = _sso(request)
    principal = await authenticate(
        request.app.state, method="POST", authorization="",
        cookies=request.cookies, csrf=request.headers.get(CSRF_HEADER),
    )  # fmt: skip
    cookie = request.cookies[SESSION_COOKIE]
    await anyio.to_thread.run_sync(sso.end, cookie)
    await anyio.to_thread.run_sync(lambda: _audit(
        request, action="ssoSignOut", status=204, outcome="ok", actor=principal.name,
        subject=principal.subject, role=principal.role,
    ))  # fmt: skip
    answer = Response(status_code=204)
    answer.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
    return answer


_TITLES = {
    "role": "No access to Onceover",
    "state": "This sign-in has expired",
    "provider": "The identity provider did not sign you in",
    "not_configured": "Single sign-on is not configured",
}


def _not_configured() -> HTMLResponse:
    return _refusal_page(SignInRefusedError(
        "not_configured", "Single sign-on is not configured here (ONCEOVER_OIDC_ISSUER): sign "
        "in with a token.", status_code=404,
    ))  # fmt: skip


def _refusal_page(refused: SignInRefusedError) -> HTMLResponse:
    """What the person sees: what went wrong and what to do (no inline script or style:
    the dashboard's content policy holds here too)."""
    title = _TITLES.get(refused.reason, "Sign-in refused")
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} · Onceover</title></head>
<body><main>
<h1>{html.escape(title)}</h1>
<p id="reason" data-reason="{html.escape(refused.reason)}">{html.escape(str(refused.detail))}</p>
<p><a href="/auth/login">Sign in again</a> · <a href="/">Sign in with a token instead</a></p>
</main></body></html>
"""
    return HTMLResponse(body, status_code=refused.status_code)
