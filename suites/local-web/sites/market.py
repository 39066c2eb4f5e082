"""Marketa: a catalogue store modelled on a large online marketplace, built to make browsing hard
where a site-specific tool would not be: 96 products over 12 listing pages (sorted by name or
price, filtered by category and brand; no rating sort), reviews, stock, warranty and release
date only on each product's page, a deals feed rendered by the page's own script as you scroll,
and a two-step quote form with validation, a confirmation page and a list of the browser's quotes.

Its own (native) WebMCP tools are partial or misleading on purpose: `search_catalog` finds a
product's id by name (enough for some tasks, nothing more), `top_products` says it lists the
top-rated products of a category but ranks them by review count.

Fault surfaces for the harness's tests, which no task visits: `/_challenge` (a bot-defence
interstitial, 403) and every `/api/` route answering 500 while the environment variable
`MARKET_API_FAILS` is set.
"""

from __future__ import annotations

import os
import re
import secrets

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

from common import esc, page, page_number, paginate, pager
from market_data import BY_ID, CATEGORIES, DEALS, PRODUCTS

PER_PAGE = 8
SORTS = {"name": lambda p: p["name"], "price": lambda p: (p["price_cents"], p["name"]),
         "-price": lambda p: (-p["price_cents"], p["name"])}
POSTCODE = r"[A-Z]{2}[0-9]{3}"
QUOTES: dict[str, list[dict]] = {}  # browser (cookie) -> its quotes
DRAFTS: dict[str, dict] = {}

NATIVE_TOOLS = """
document.modelContext.registerTool({
  name: 'search_catalog',
  description: 'Find Marketa products by words in their name; returns up to five names and ids.',
  inputSchema: {type: 'object', properties: {query: {type: 'string'}}, required: ['query']},
  execute: async ({query}) => (await (await fetch('/api/search?q=' + encodeURIComponent(query))).json()),
});
document.modelContext.registerTool({
  name: 'top_products',
  description: 'The top-rated products of a category (headphones, keyboards, monitors, chairs).',
  inputSchema: {type: 'object', properties: {category: {type: 'string'}}, required: ['category']},
  execute: async ({category}) => (await (await fetch('/api/top?category=' + encodeURIComponent(category))).json()),
});
"""


def money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def _shell(title: str, body: str) -> HTMLResponse:
    nav = ("".join(f"<a href='/products?category={c}'>{c.title()}</a>" for c in CATEGORIES)
           + "<a href='/deals'>Deals</a><a href='/quote'>Request a quote</a><a href='/quotes'>Your quotes</a>")
    return page(title, "Marketa", nav, body, NATIVE_TOOLS)


def _api_ok() -> JSONResponse | None:
    if os.environ.get("MARKET_API_FAILS"):
        return JSONResponse({"error": "internal error"}, status_code=500)
    return None


def _filtered(request: Request) -> list[dict]:
    q = request.query_params
    items = [p for p in PRODUCTS if q.get("category", p["category"]) == p["category"] and q.get("brand", p["brand"]) == p["brand"]]
    return sorted(items, key=SORTS.get(q.get("sort", "name"), SORTS["name"]))


async def home(request):
    body = "<h1>Shop Marketa</h1>" + "".join(
        f"<div class='card'><a href='/products?category={c}'>{c.title()}</a></div>" for c in CATEGORIES) \
        + "<p><a href='/products'>All products</a></p>"
    return _shell("Marketa", body)


async def products(request: Request):
    q = request.query_params
    shown, pages = paginate(_filtered(request), page_number(request), PER_PAGE)
    keep = "".join(f"&{k}={esc(q[k])}" for k in ("category", "brand", "sort") if q.get(k))
    brands = sorted({p["brand"] for p in PRODUCTS})
    facets = ("<p class='facets'>Brand: " + " ".join(
        f"<a href='/products?brand={b}{''.join(f'&{k}={esc(q[k])}' for k in ('category', 'sort') if q.get(k))}'>{b}</a>"
        for b in brands) + " · Sort: " + " ".join(
        f"<a href='/products?sort={s}{''.join(f'&{k}={esc(q[k])}' for k in ('category', 'brand') if q.get(k))}'>{s}</a>"
        for s in SORTS) + "</p>")
    rows = "".join(f"<tr class='product' data-id='{p['id']}'><td><a href='/item/{p['id']}'>{esc(p['name'])}</a></td>"
                   f"<td class='brand'>{p['brand']}</td><td class='price'>{money(p['price_cents'])}</td>"
                   f"<td class='rating'>{p['rating']}</td></tr>" for p in shown)
    body = (f"<h1>Products</h1>{facets}<table><tr><th>Product</th><th>Brand</th><th>Price</th><th>Rating</th></tr>"
            f"{rows or '<tr><td>No products.</td></tr>'}</table>{pager('/products', page_number(request), pages, keep)}")
    return _shell("Products", body)


async def item(request):
    p = BY_ID.get(request.path_params["id"])
    if p is None:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    facts = [("Price", money(p["price_cents"])), ("Rating", p["rating"]), ("Reviews", p["reviews"]),
             ("In stock", p["stock"]), ("Warranty", f"{p['warranty_months']} months"), ("Released", p["released"]),
             ("Category", p["category"]), ("Brand", p["brand"])]
    body = (f"<h1 class='product-name'>{esc(p['name'])}</h1><p>Item <code>{p['id']}</code></p><dl class='facts'>"
            + "".join(f"<dt>{k}</dt><dd data-fact='{k.lower().replace(' ', '-')}'>{esc(v)}</dd>" for k, v in facts) + "</dl>")
    return _shell(p["name"], body)


DEALS_SCRIPT = """
<div id='deals'></div><p id='deals-end' hidden>That is every deal.</p><div id='more'>Loading more deals...</div>
<script>
let offset = 0, busy = false, done = false;
async function more() {
  if (busy || done) return;
  busy = true;
  let batch;
  try { batch = await (await fetch('/api/deals?offset=' + offset + '&limit=8')).json(); }
  catch (e) { busy = false; return; }  // a failed load may be retried by the next scroll
  if (!batch.deals) { busy = false; return; }
  for (const d of batch.deals) {
    const row = document.createElement('div');
    row.className = 'card deal'; row.dataset.id = d.id; row.dataset.percent = d.percent_off;
    row.innerHTML = `<a href='/item/${d.id}'>${d.name}</a> <b class='off'>-${d.percent_off}%</b> now <span class='deal-price'>$${(d.deal_cents / 100).toFixed(2)}</span>`;
    document.getElementById('deals').appendChild(row);
  }
  offset += batch.deals.length;
  done = batch.deals.length === 0 || offset >= batch.total;
  busy = false;
  if (done) { document.getElementById('deals-end').hidden = false; document.getElementById('more').remove(); }
  else { observer.unobserve(sentinel); observer.observe(sentinel); }  // still in view: load on
}
const sentinel = document.getElementById('more');
const observer = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && more());
observer.observe(sentinel);
</script>
"""


async def deals(request):
    return _shell("Deals", "<h1>Today's deals</h1><p>Scroll for more.</p>" + DEALS_SCRIPT)


async def api_deals(request: Request):
    if failed := _api_ok():
        return failed
    offset, limit = int(request.query_params.get("offset", 0)), min(int(request.query_params.get("limit", 8)), 8)
    return JSONResponse({"total": len(DEALS), "deals": DEALS[offset:offset + limit]})


async def api_products(request: Request):
    if failed := _api_ok():
        return failed
    return JSONResponse([{k: p[k] for k in ("id", "name", "brand", "category", "price_cents", "rating")} for p in _filtered(request)])


async def api_product(request: Request):
    if failed := _api_ok():
        return failed
    p = BY_ID.get(request.path_params["id"])
    return JSONResponse(p) if p else JSONResponse({"error": "no such product"}, status_code=404)


async def api_search(request: Request):
    if failed := _api_ok():
        return failed
    words = request.query_params.get("q", "").lower().split()
    return JSONResponse([{"id": p["id"], "name": p["name"]} for p in PRODUCTS if all(w in p["name"].lower() for w in words)][:5])


async def api_top(request: Request):
    """What the native `top_products` tool calls: ranked by review count, not by rating."""
    if failed := _api_ok():
        return failed
    items = [p for p in PRODUCTS if p["category"] == request.query_params.get("category")]
    return JSONResponse([{"id": p["id"], "name": p["name"]} for p in sorted(items, key=lambda p: -p["reviews"])[:5]])


def _browser(request: Request) -> str | None:
    return request.cookies.get("marketa")


def _form(error: str = "", values: dict | None = None) -> str:
    v = values or {}
    return (f"<h1>Request a quote</h1>{f'<p class=error>{esc(error)}</p>' if error else ''}"
            "<form method='post' action='/quote'><label>Item id <input name='item' value='" + esc(v.get("item", "")) + "'></label> "
            "<label>Quantity <input name='quantity' type='number' value='" + esc(v.get("quantity", "1")) + "'></label> "
            "<button id='next-step'>Next: shipping</button></form>")


async def quote(request: Request):
    if request.method == "GET":
        return _shell("Request a quote", _form())
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in ("item", "quantity")}
    if values["item"] not in BY_ID:
        return _shell("Request a quote", _form(f"No item {values['item']!r}: give an item id such as MK-1007.", values))
    if not values["quantity"].isdigit() or not 1 <= int(values["quantity"]) <= 50:
        return _shell("Request a quote", _form("Quantity must be a whole number from 1 to 50.", values))
    draft = secrets.token_hex(6)
    DRAFTS[draft] = {"item": values["item"], "quantity": int(values["quantity"])}
    return RedirectResponse(f"/quote/shipping?draft={draft}", status_code=303)


async def shipping(request: Request):
    draft = request.query_params.get("draft", "")
    if draft not in DRAFTS:
        return RedirectResponse("/quote", status_code=303)
    error = ""
    if request.method == "POST":
        form = await request.form()
        name, postcode = str(form.get("name", "")).strip(), str(form.get("postcode", "")).strip()
        if not name:
            error = "Give a name for the quote."
        elif not re.fullmatch(POSTCODE, postcode):
            error = "A postcode is two capital letters and three digits, e.g. AB123."
        else:
            browser = _browser(request) or secrets.token_hex(8)
            ref = f"Q-{secrets.token_hex(3).upper()}"
            QUOTES.setdefault(browser, []).append({"ref": ref, **DRAFTS.pop(draft), "name": name, "postcode": postcode})
            response = RedirectResponse(f"/quote/done/{ref}", status_code=303)
            response.set_cookie("marketa", browser, httponly=True, samesite="lax")
            return response
    d = DRAFTS[draft]
    body = (f"<h1>Shipping</h1><p>{d['quantity']} x {esc(BY_ID[d['item']]['name'])}</p>"
            f"{f'<p class=error>{esc(error)}</p>' if error else ''}"
            f"<form method='post' action='/quote/shipping?draft={draft}'><label>Name <input name='name'></label> "
            "<label>Postcode <input name='postcode'></label> <button id='send-quote'>Send quote request</button></form>")
    return _shell("Shipping", body)


def _quote_rows(quotes: list[dict]) -> str:
    return "".join(f"<tr class='quote' data-ref='{q['ref']}' data-item='{q['item']}' data-quantity='{q['quantity']}' "
                   f"data-postcode='{q['postcode']}'><td>{q['ref']}</td><td>{esc(BY_ID[q['item']]['name'])}</td>"
                   f"<td>{q['quantity']}</td><td>{q['postcode']}</td></tr>" for q in quotes)


async def quote_done(request: Request):
    quotes = [q for q in QUOTES.get(_browser(request) or "", []) if q["ref"] == request.path_params["ref"]]
    if not quotes:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    return _shell("Quote sent", f"<h1>Quote request sent</h1><p>Reference <b id='quote-ref'>{quotes[0]['ref']}</b></p>"
                  f"<table>{_quote_rows(quotes)}</table>")


async def quotes(request: Request):
    rows = _quote_rows(QUOTES.get(_browser(request) or "", []))
    return _shell("Your quotes", f"<h1>Your quotes</h1><table>{rows or '<tr><td>No quotes yet.</td></tr>'}</table>")


async def challenge(request):
    return HTMLResponse("<!doctype html><html><head><title>Just a moment...</title></head><body><h1>Checking your "
                        "browser before accessing market.localhost</h1><p>Verify you are human.</p>"
                        "<div id=cf-chl-widget></div></body></html>", status_code=403)


def create_app() -> Starlette:
    return Starlette(routes=[
        Route("/_challenge", challenge), Route("/", home), Route("/products", products), Route("/item/{id}", item),
        Route("/deals", deals), Route("/api/deals", api_deals), Route("/api/products", api_products),
        Route("/api/products/{id}", api_product), Route("/api/search", api_search), Route("/api/top", api_top),
        Route("/quote", quote, methods=["GET", "POST"]), Route("/quote/shipping", shipping, methods=["GET", "POST"]),
        Route("/quote/done/{ref}", quote_done), Route("/quotes", quotes),
    ])
