"""Wikipedium: a reference wiki modelled on Wikipedia: articles with infoboxes, categories,
search, a random-article link. Its own WebMCP tool searches article titles. Its sign-up takes two
steps (the form, then a confirmation page whose button makes the account), and its form is also a
native tool in the WebMCP spec's declarative form (`<form toolname=...>`). Its verified sign-up
(/join) e-mails a code to the address given (through mailroom.py, to the inbox twin) and makes the
account only with it: the final form carries a ticket shown only once the code is entered."""

from __future__ import annotations

import hashlib
import random
import secrets

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

import mailroom
from common import esc, page, record_write

CITIES = {
    "Aldermoor": {"country": "Norland", "population": 482_113, "founded": 1132, "river": "Veln"},
    "Brisk Harbour": {"country": "Norland", "population": 91_870, "founded": 1604, "river": "Sallow"},
    "Corvain": {"country": "Estria", "population": 1_204_556, "founded": 870, "river": "Ombre"},
    "Dunmere": {"country": "Estria", "population": 37_402, "founded": 1388, "river": "Veln"},
    "Eastwick Falls": {"country": "Tallis", "population": 258_004, "founded": 1791, "river": "Quill"},
    "Fenwater": {"country": "Tallis", "population": 12_990, "founded": 1455, "river": "Sallow"},
}
RIVERS = {"Veln": 412, "Sallow": 188, "Ombre": 930, "Quill": 275}
FILLER = ("The town grew around its market and the crossing of the river. Its old quarter keeps the "
          "street plan of the medieval settlement, and its museum holds records of the early guilds. ")


def _articles() -> dict[str, dict]:
    articles = {}
    for name, facts in CITIES.items():
        articles[name] = {
            "category": "Cities", "infobox": {"Country": facts["country"], "Population": f"{facts['population']:,}",
                                               "Founded": str(facts["founded"]), "River": facts["river"]},
            "text": f"{name} is a city in {facts['country']} on the river {facts['river']}. " + FILLER * 3,
        }
    for name, length in RIVERS.items():
        articles[f"{name} (river)"] = {
            "category": "Rivers", "infobox": {"Length": f"{length} km"},
            "text": f"The {name} is a river {length} km long. " + FILLER,
        }
    return articles


ARTICLES = _articles()

NATIVE_TOOLS = """
document.modelContext.registerTool({
  name: 'search_articles',
  description: 'Search Wikipedium article titles; returns matching titles and their URLs.',
  inputSchema: {type: 'object', properties: {query: {type: 'string'}}, required: ['query']},
  execute: async ({query}) => (await (await fetch('/api/search?q=' + encodeURIComponent(query))).json()),
});
"""


def _url(title: str) -> str:
    return "/wiki/" + title.replace(" ", "_")


def _shell(title: str, body: str) -> HTMLResponse:
    nav = ("<a href='/wiki/Special:Random'>Random article</a><a href='/category/Cities'>Cities</a><a href='/signup'>Create account</a>"
           "<a href='/category/Rivers'>Rivers</a><form action='/search'><input name='q' placeholder='Search'></form>")
    return page(f"{title} - Wikipedium", "Wikipedium", nav, body, NATIVE_TOOLS)


def _search(q: str) -> list[dict]:
    return [{"title": t, "url": _url(t)} for t in ARTICLES if q.lower() in t.lower()]


async def home(request):
    return _shell("Main page", "<h1>Welcome to Wikipedium</h1><p>The free reference of places that are not.</p>")


async def article(request):
    title = request.path_params["title"].replace("_", " ")
    if title == "Special:Random":
        return RedirectResponse(_url(random.choice(sorted(ARTICLES))), status_code=302)
    a = ARTICLES.get(title)
    if a is None:
        return HTMLResponse("<h1>No such article</h1>", status_code=404)
    return _shell(title, f"<h1 id='firstHeading'>{esc(title)}</h1>" + _article_html(a))


def _article_html(a: dict) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in a["infobox"].items())
    return (f"<aside class='infobox'><table>{rows}</table></aside><div id='content'><p>{esc(a['text'])}</p></div>"
            f"<p>Category: <a href='/category/{a['category']}'>{a['category']}</a></p>")


# Wikipedia's own APIs in their shapes (REST page summary, Action API parse), so the public-web
# suite's Wikipedia tool batch runs here before it meets the real site.
async def rest_summary(request):
    title = request.path_params["title"].replace("_", " ")
    a = ARTICLES.get(title)
    if a is None:
        return JSONResponse({"type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found", "title": "Not found."}, status_code=404)
    return JSONResponse({"type": "standard", "title": title, "description": f"{a['category'][:-1]} in Wikipedium",
                         "extract": a["text"][:300], "content_urls": {"desktop": {"page": str(request.base_url) + _url(title).lstrip("/")}}})


async def action_api(request):
    params = request.query_params
    title = (params.get("page") or "").replace("_", " ")
    if params.get("action") != "parse" or title not in ARTICLES:
        return JSONResponse({"error": {"code": "missingtitle", "info": "The page you specified doesn't exist."}})
    return JSONResponse({"parse": {"title": title, "pageid": sorted(ARTICLES).index(title) + 1,
                                   "text": {"*": _article_html(ARTICLES[title])}}})


async def category(request):
    name = request.path_params["name"]
    items = "".join(f"<li><a href='{_url(t)}'>{esc(t)}</a></li>" for t, a in ARTICLES.items() if a["category"] == name)
    return _shell(f"Category:{name}", f"<h1>Category: {esc(name)}</h1><ul>{items}</ul>")


async def search(request):
    q = request.query_params.get("q", "")
    hits = "".join(f"<li><a href='{h['url']}'>{esc(h['title'])}</a></li>" for h in _search(q))
    return _shell(f"Search: {q}", f"<h1>Search results</h1><ul>{hits or '<li>No results</li>'}</ul>")


async def api_search(request):
    return JSONResponse(_search(request.query_params.get("q", "")))


ACCOUNTS: dict[str, dict] = {}
SIGNUP_FORM = (
    # Declarative WebMCP: Chromium makes this form a tool (its inputs the schema); toolautosubmit lets an
    # agent's call submit it. Submitting only reaches the confirmation page: the account is made there.
    "<form method='post' action='/signup' toolname='start_signup' toolautosubmit "
    "tooldescription='Fill in and submit the Wikipedium sign-up form. The account is made only once the "
    "confirmation page that follows is confirmed.'>"
    "<label>Username <input name='username' required toolparamdescription='Username, 3 to 20 letters or digits'></label> "
    "<label>Email <input name='email' type='email' required toolparamdescription='Email address'></label> "
    "<label><input type='checkbox' name='newsletter' value='yes'> Send me the newsletter</label> "
    "<button id='signup-next'>Continue</button></form>")


def _signup_values(form) -> dict:
    return {"username": str(form.get("username", "")).strip(), "email": str(form.get("email", "")).strip(),
            "newsletter": "yes" if form.get("newsletter") == "yes" else "no"}


async def signup(request):
    if request.method == "GET":
        return _shell("Create account", f"<h1>Create account</h1>{SIGNUP_FORM}")
    values = _signup_values(await request.form())
    if not values["username"].isalnum() or not 3 <= len(values["username"]) <= 20 or "@" not in values["email"]:
        return _shell("Create account", f"<h1>Create account</h1><p class='error'>Give a username of 3 to 20 letters "
                                        f"or digits and an email address.</p>{SIGNUP_FORM}")
    hidden = "".join(f"<input type='hidden' name='{k}' value='{esc(v)}'>" for k, v in values.items())
    return _shell("Confirm your account", (
        "<h1>Confirm your account</h1><dl>" + "".join(f"<dt>{k}</dt><dd id='confirm-{k}'>{esc(v)}</dd>" for k, v in values.items())
        + f"</dl><form method='post' action='/signup/confirm'>{hidden}<button id='signup-confirm'>Create account</button></form>"
        "<p><a href='/signup'>Change these details</a></p>"))


async def signup_confirm(request):
    values = _signup_values(await request.form())
    ACCOUNTS[values["username"]] = values
    record_write("wiki", "account", values)
    return _shell("Welcome", f"<h1>Welcome, {esc(values['username'])}</h1><p id='account-made'>Your account is ready.</p>")


# The ticket the verified sign-up's last form carries: the same for every verified address, so a
# case can check it, and shown only to a browser that entered the e-mailed code.
VERIFIED_TICKET = hashlib.sha256(b"wikipedium: an address proven by its e-mailed code").hexdigest()[:20]
PENDING: dict[str, str] = {}  # address -> the code e-mailed to it
# Per address, whatever codes it was sent: wrong codes entered (at 5 the address is locked: no
# guessing through a million by asking again) and codes sent (at most 3). Only an address with a
# mailbox is sent a code, so these hold one entry per account, whatever a page posts.
WRONG_CODES: dict[str, int] = {}
CODES_SENT: dict[str, int] = {}
MAX_WRONG, MAX_SENT = 5, 3


def _join_shell(body: str, error: str = "") -> HTMLResponse:
    return _shell("Join Wikipedium", f"<h1>Join Wikipedium</h1>" + (f"<p class='error'>{esc(error)}</p>" if error else "") + body)


JOIN_FORM = ("<p>We e-mail you a code to prove the address is yours.</p><form method='post' action='/join'>"
             "<label>Email <input name='email' type='email' required></label> <button id='join-send'>E-mail me a code</button></form>")


def _verify_form(address: str) -> str:
    return (f"<p>We sent a code to <b id='join-address'>{esc(address)}</b>.</p><form method='post' action='/join/verify'>"
            f"<input type='hidden' name='email' value='{esc(address)}'><label>Code <input name='code' required></label> "
            "<button id='join-verify'>Verify</button></form>")


async def join(request):
    if request.method == "GET":
        if address := request.query_params.get("email", "").strip():  # back from the inbox: enter the code
            return _join_shell(_verify_form(address))
        return _join_shell(JOIN_FORM)
    address = str((await request.form()).get("email", "")).strip()
    if "@" not in address:
        return _join_shell(JOIN_FORM, "Give an email address.")
    key = address.lower()
    if CODES_SENT.get(key, 0) >= MAX_SENT or WRONG_CODES.get(key, 0) >= MAX_WRONG:
        return _join_shell(JOIN_FORM, "Too many codes for this address.")
    code = f"{secrets.randbelow(10**6):06d}"
    if mailroom.deliver(address, "Wikipedium <no-reply@wiki.localhost>", "Your Wikipedium code",
                        f"Your code to join Wikipedium is {code}. Enter it on the page that sent it."):
        PENDING[key] = code
        CODES_SENT[key] = CODES_SENT.get(key, 0) + 1
    return _join_shell(_verify_form(address))  # the same page either way: it tells no one which addresses exist


async def join_verify(request):
    form = await request.form()
    address, code = str(form.get("email", "")).strip(), str(form.get("code", "")).strip()
    key = address.lower()
    if key not in PENDING or WRONG_CODES.get(key, 0) >= MAX_WRONG or code != PENDING[key]:
        if key in PENDING:  # counted only where a code was sent: the table stays one entry per account
            WRONG_CODES[key] = WRONG_CODES.get(key, 0) + 1
            if WRONG_CODES[key] >= MAX_WRONG:
                PENDING.pop(key, None)
        return _join_shell(_verify_form(address), "That code is not the one we sent.")
    return _join_shell(
        "<p id='join-verified'>Your address is verified. Choose a username.</p><form method='post' action='/join/confirm'>"
        f"<input type='hidden' name='email' value='{esc(address)}'><input type='hidden' name='ticket' value='{VERIFIED_TICKET}'>"
        "<label>Username <input name='username' required></label> <button id='join-confirm'>Create account</button></form>")


async def join_confirm(request):
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in ("username", "email", "ticket")}
    if values["ticket"] != VERIFIED_TICKET:
        return _join_shell(JOIN_FORM, "Verify your address first.")
    ACCOUNTS[values["username"]] = values
    record_write("wiki", "verified-account", values)
    return _shell("Welcome", f"<h1>Welcome, {esc(values['username'])}</h1><p id='account-made'>Your account is ready.</p>")


def create_app() -> Starlette:
    return Starlette(routes=[
        Route("/", home), Route("/wiki/{title:path}", article), Route("/category/{name}", category),
        Route("/search", search), Route("/api/search", api_search),
        Route("/api/rest_v1/page/summary/{title:path}", rest_summary), Route("/w/api.php", action_api),
        Route("/signup", signup, methods=["GET", "POST"]), Route("/signup/confirm", signup_confirm, methods=["POST"]),
        Route("/join", join, methods=["GET", "POST"]), Route("/join/verify", join_verify, methods=["POST"]),
        Route("/join/confirm", join_confirm, methods=["POST"]),
    ])
