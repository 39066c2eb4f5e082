"""Postbox: the inbox twin, a webmail modelled on PurelyMail's, for cases that need the user's own
e-mail (a confirmation code). It speaks PurelyMail's account API (POST /api/v0/createUser and
/deleteUser, JSON, the `Purelymail-Api-Token` header), so the harness makes and ends a trial's
account here exactly as it does on purelymail.com; the token is made per process and read by the
harness from `app.state`, never shown to a page. People sign in at /login and read their mail."""

from __future__ import annotations

import json
import secrets

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

import mailroom
from common import esc, page

DOMAIN = "mail.localhost"
SESSIONS: dict[str, str] = {}  # cookie -> signed-in address
MAX_SESSIONS = 1_000  # the oldest go first: a page signing in in a loop cannot grow the worker's memory


def _shell(title: str, body: str, signed_in: str | None = None) -> HTMLResponse:
    nav = (f"<span id='signed-in'>{esc(signed_in)}</span><form method='post' action='/logout'><button>Sign out</button></form>"
           if signed_in else "<a href='/login'>Sign in</a>")
    return page(title, "Postbox", nav, body)


def _error(code: str, message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"type": "error", "code": code, "message": message}, status_code=status)


def _api(action):
    """PurelyMail's API shape: a POST of a JSON object with the account's token in its header,
    answered `{"type": "success", "result": ...}` or `{"type": "error", "code", "message"}`."""
    async def endpoint(request: Request):
        token = request.app.state.purelymail_token
        if not secrets.compare_digest(request.headers.get("purelymail-api-token", "").encode("utf-8", "replace"), token.encode()):
            return _error("unauthorized", "Invalid API token", 401)
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error("invalidRequest", "The body is not JSON")
        if not isinstance(body, dict):
            return _error("invalidRequest", "The body is not a JSON object")
        return action(body)
    return endpoint


def _create_user(body: dict) -> JSONResponse:
    user, domain, password = body.get("userName"), body.get("domainName"), body.get("password")
    if not (isinstance(user, str) and user.isalnum() and isinstance(password, str) and password):
        return _error("invalidRequest", "userName (letters and digits) and password are required")
    if domain != DOMAIN:
        return _error("domainNotOwned", f"You do not own the domain {domain!r}")
    if not mailroom.open_account(f"{user}@{domain}", password):
        return _error("userExists", "That user exists")
    return JSONResponse({"type": "success", "result": {}})


def _delete_user(body: dict) -> JSONResponse:
    address = body.get("userName")
    if not isinstance(address, str) or not mailroom.close_account(address):
        return _error("userNotFound", "No such user")
    for cookie in [c for c, signed_in in SESSIONS.items() if signed_in == address.lower()]:
        SESSIONS.pop(cookie)
    return JSONResponse({"type": "success", "result": {}})


def _signed_in(request: Request) -> str | None:
    return SESSIONS.get(request.cookies.get("postbox", ""))


LOGIN_FORM = ("<form method='post' action='/login'><label>Email <input name='email' type='email' required></label> "
              "<label>Password <input name='password' type='password' required></label> <button id='login'>Sign in</button></form>")


async def login(request: Request):
    if request.method == "GET":
        return _shell("Sign in", f"<h1>Sign in to Postbox</h1>{LOGIN_FORM}")
    form = await request.form()
    address, password = str(form.get("email", "")).strip().lower(), str(form.get("password", ""))
    if not mailroom.password_matches(address, password):
        return _shell("Sign in", f"<h1>Sign in to Postbox</h1><p class='error'>Wrong email or password.</p>{LOGIN_FORM}")
    cookie = secrets.token_urlsafe(16)
    SESSIONS[cookie] = address
    while len(SESSIONS) > MAX_SESSIONS:
        SESSIONS.pop(next(iter(SESSIONS)))
    response = RedirectResponse("/", status_code=303)
    response.set_cookie("postbox", cookie, httponly=True, samesite="lax")
    return response


async def logout(request: Request):
    SESSIONS.pop(request.cookies.get("postbox", ""), None)
    return RedirectResponse("/login", status_code=303)


async def inbox(request: Request):
    if (address := _signed_in(request)) is None:
        return RedirectResponse("/login", status_code=303)
    mail = mailroom.messages(address)
    rows = "".join(f"<tr><td>{esc(m['from'])}</td><td><a href='/message/{i}'>{esc(m['subject'])}</a></td><td>{m['at']}</td></tr>"
                   for i, m in reversed(list(enumerate(mail))))
    body = f"<table id='inbox'><tr><th>From</th><th>Subject</th><th>Received</th></tr>{rows}</table>" if mail else "<p id='empty'>No mail yet.</p>"
    return _shell("Inbox", f"<h1>Inbox</h1>{body}", address)


async def message(request: Request):
    if (address := _signed_in(request)) is None:
        return RedirectResponse("/login", status_code=303)
    mail = mailroom.messages(address)
    number = request.path_params["number"]
    if number >= len(mail):
        return _shell("No such message", "<h1>No such message</h1>", address)
    m = mail[number]
    return _shell(m["subject"], f"<h1>{esc(m['subject'])}</h1><p>From {esc(m['from'])}</p><pre id='body'>{esc(m['body'])}</pre>", address)


def create_app() -> Starlette:
    app = Starlette(routes=[
        Route("/", inbox), Route("/login", login, methods=["GET", "POST"]), Route("/logout", logout, methods=["POST"]),
        Route("/message/{number:int}", message),
        Route("/api/v0/createUser", _api(_create_user), methods=["POST"]),
        Route("/api/v0/deleteUser", _api(_delete_user), methods=["POST"]),
    ])
    app.state.purelymail_token = secrets.token_urlsafe(24)
    app.state.purelymail_domain = DOMAIN
    return app
