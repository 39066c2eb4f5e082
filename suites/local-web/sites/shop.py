"""Shoply: a shop modelled on a small online store: categories, search, paginated listings,
product pages and a cart kept per browser (cookie), with a coupon advertised on one category's
page and applied on the cart page, and a checkout that places an order (a write: the task that
uses it is graded on the request the browser blocks, so no order should ever arrive; every order
that does is appended to the file SHOP_ORDERS_LOG names, for the tests). Its own WebMCP tool
searches products."""

from __future__ import annotations

import json
import os
import secrets

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

from common import esc, page, page_number, paginate, pager, record_write

COLOURS = ["red", "blue", "green", "black", "white", "yellow"]
KINDS = {
    "mugs": ("Mug", 899), "lanterns": ("Lantern", 2450), "bottles": ("Bottle", 1299), "socks": ("Socks", 650),
}
PER_PAGE = 8
# One coupon, advertised only on the lanterns page: finding it is a hop of its own.
COUPONS = {"LANTERN15": 15}  # code -> percent off the cart
COUPON_BANNER = {"lanterns": "LANTERN15"}


def _catalogue() -> list[dict]:
    products = []
    for category, (noun, base) in KINDS.items():
        for i, colour in enumerate(COLOURS):
            for size, bump in (("Small", 0), ("Large", 350)):
                sku = f"{category[:3].upper()}-{colour[:3].upper()}-{size[0]}"
                products.append({
                    "sku": sku, "name": f"{size} {colour.title()} {noun}", "category": category,
                    "colour": colour, "price_cents": base + bump + 25 * ((i * 7) % 5),
                })
    products.append({"sku": "LAN-TRL-X", "name": "Trail Lantern", "category": "lanterns", "colour": "black", "price_cents": 3995})
    return products


PRODUCTS = _catalogue()
BY_SKU = {p["sku"]: p for p in PRODUCTS}
CARTS: dict[str, dict[str, int]] = {}
CART_COUPONS: dict[str, str] = {}  # cart -> applied coupon code
ORDERS: list[dict] = []

NATIVE_TOOLS = """
document.modelContext.registerTool({
  name: 'search_products',
  description: 'Search Shoply products by words in their name; returns sku, name and price.',
  inputSchema: {type: 'object', properties: {query: {type: 'string'}}, required: ['query']},
  execute: async ({query}) => (await (await fetch('/api/products?q=' + encodeURIComponent(query))).json()),
});
"""


def money(cents: int) -> str:
    return f"${cents / 100:.2f}"


def _cart_id(request: Request) -> str | None:
    return request.cookies.get("cart")


def _shell(request: Request, title: str, body: str) -> HTMLResponse:
    cart = CARTS.get(_cart_id(request) or "", {})
    nav = ("".join(f"<a href='/c/{c}'>{c.title()}</a>" for c in KINDS)
           + f"<a href='/cart' id='cart-link'>Cart ({sum(cart.values())})</a><a href='/careers'>Careers</a>"
           + "<form action='/search'><input name='q' placeholder='Search products'></form>")
    return page(title, "Shoply", nav, body, NATIVE_TOOLS)


def _listing(items: list[dict]) -> str:
    return "".join(
        f"<div class='card product' data-sku='{p['sku']}'><a href='/p/{p['sku']}'>{esc(p['name'])}</a> "
        f"<span class='price'>{money(p['price_cents'])}</span></div>" for p in items
    )


def _search(q: str) -> list[dict]:
    words = q.lower().split()
    return [p for p in PRODUCTS if all(w in p["name"].lower() for w in words)]


async def home(request):
    return _shell(request, "Shoply", "<h1>Shop by category</h1>" + "".join(
        f"<div class='card'><a href='/c/{c}'>{c.title()}</a></div>" for c in KINDS))


async def category(request):
    name = request.path_params["name"]
    items = sorted((p for p in PRODUCTS if p["category"] == name), key=lambda p: p["name"])
    shown, pages = paginate(items, page_number(request), PER_PAGE)
    banner = (f"<p class='card promo'>This week: {COUPONS[COUPON_BANNER[name]]}% off your whole cart with code "
              f"<code class='coupon-code'>{COUPON_BANNER[name]}</code></p>") if name in COUPON_BANNER else ""
    body = f"<h1>{esc(name.title())}</h1>{banner}{_listing(shown)}{pager(f'/c/{name}', page_number(request), pages)}"
    return _shell(request, name.title(), body)


async def search(request):
    q = request.query_params.get("q", "")
    shown, pages = paginate(_search(q), page_number(request), PER_PAGE)
    body = f"<h1>Results for “{esc(q)}”</h1>{_listing(shown) or '<p>No products.</p>'}{pager('/search', page_number(request), pages, f'&q={esc(q)}')}"
    return _shell(request, f"Search: {q}", body)


async def api_products(request):
    return JSONResponse([{"sku": p["sku"], "name": p["name"], "price": money(p["price_cents"])}
                         for p in _search(request.query_params.get("q", ""))])


async def product(request):
    p = BY_SKU.get(request.path_params["sku"])
    if p is None:
        return HTMLResponse("<h1>404</h1>", status_code=404)
    body = (f"<h1 class='product-name'>{esc(p['name'])}</h1><p class='price'>{money(p['price_cents'])}</p>"
            f"<p>SKU <code>{p['sku']}</code> · colour {p['colour']}</p>"
            f"<form method='post' action='/cart/add'><input type='hidden' name='sku' value='{p['sku']}'>"
            f"<label>Quantity <input name='qty' type='number' value='1' min='1' max='9'></label> "
            f"<button type='submit' id='add-to-cart'>Add to cart</button></form>")
    return _shell(request, p["name"], body)


async def cart_add(request: Request):
    form = await request.form()
    sku, qty = str(form.get("sku", "")), int(str(form.get("qty", "1")) or 1)
    if sku not in BY_SKU or not 1 <= qty <= 9:
        return HTMLResponse("<h1>Bad request</h1>", status_code=400)
    cart_id = _cart_id(request) or secrets.token_hex(8)
    cart = CARTS.setdefault(cart_id, {})
    cart[sku] = cart.get(sku, 0) + qty
    response = RedirectResponse("/cart", status_code=303)
    response.set_cookie("cart", cart_id, httponly=True, samesite="lax")
    return response


async def cart_remove(request: Request):
    form = await request.form()
    CARTS.get(_cart_id(request) or "", {}).pop(str(form.get("sku", "")), None)
    return RedirectResponse("/cart", status_code=303)


async def cart_coupon(request: Request):
    form = await request.form()
    code, cart_id = str(form.get("code", "")).strip().upper(), _cart_id(request)
    if code not in COUPONS or not cart_id or not CARTS.get(cart_id):
        return RedirectResponse("/cart?coupon=invalid", status_code=303)
    CART_COUPONS[cart_id] = code
    return RedirectResponse("/cart", status_code=303)


def cart_total(items: dict[str, int], coupon: str | None) -> int:
    subtotal = sum(BY_SKU[s]["price_cents"] * q for s, q in items.items())
    return subtotal - subtotal * COUPONS.get(coupon or "", 0) // 100


async def cart(request):
    items = CARTS.get(_cart_id(request) or "", {})
    coupon = CART_COUPONS.get(_cart_id(request) or "")
    rows = "".join(
        f"<tr class='cart-item' data-sku='{sku}' data-qty='{qty}'><td>{esc(BY_SKU[sku]['name'])}</td><td>{qty}</td>"
        f"<td>{money(BY_SKU[sku]['price_cents'] * qty)}</td><td><form method='post' action='/cart/remove'>"
        f"<input type='hidden' name='sku' value='{sku}'><button>Remove</button></form></td></tr>"
        for sku, qty in items.items()
    )
    invalid = "<p class='error'>That coupon code is not valid.</p>" if request.query_params.get("coupon") == "invalid" else ""
    applied = (f"<p>Coupon <code id='cart-coupon' data-code='{coupon}'>{coupon}</code>: {COUPONS[coupon]}% off</p>"
               if coupon else "")
    body = (f"<h1>Your cart</h1><table>{rows or '<tr><td>Your cart is empty.</td></tr>'}</table>{invalid}{applied}"
            "<form method='post' action='/cart/coupon'><label>Coupon code <input name='code'></label> "
            "<button id='apply-coupon'>Apply</button></form>"
            f"<p>Total: <strong id='cart-total'>{money(cart_total(items, coupon))}</strong></p>"
            + ("<p><a href='/checkout' id='checkout-link'>Checkout</a></p>" if items else ""))
    return _shell(request, "Cart", body)


async def checkout(request: Request):
    """The order form: the cart's lines travel in the form itself, as many shops' do."""
    items = CARTS.get(_cart_id(request) or "", {})
    lines = ",".join(f"{sku}:{qty}" for sku, qty in sorted(items.items()))
    if request.method == "POST":
        form = await request.form()
        order = {"items": str(form.get("items", "")), "name": str(form.get("name", "")).strip(),
                 "postcode": str(form.get("postcode", "")).strip().upper()}
        if not order["items"] or not order["name"] or not order["postcode"]:
            return _shell(request, "Checkout", "<p class='error'>Give a name and a postcode.</p>")
        ORDERS.append(order)
        if log := os.environ.get("SHOP_ORDERS_LOG"):
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(order) + "\n")
        return _shell(request, "Order placed", f"<h1>Order placed</h1><p id='order-number'>{len(ORDERS)}</p>")
    if not items:
        return _shell(request, "Checkout", "<p>Your cart is empty.</p>")
    body = ("<h1>Checkout</h1><form method='post' action='/checkout'>"
            f"<input type='hidden' name='items' value='{esc(lines)}'>"
            "<label>Name <input name='name'></label> <label>Postcode <input name='postcode'></label> "
            "<button id='place-order'>Place order</button></form>")
    return _shell(request, "Checkout", body)


JOBS = {"support-specialist": "Customer Support Specialist", "warehouse-lead": "Warehouse Lead"}


async def careers(request: Request):
    """Shoply's open jobs, each applied for with a resume: a file upload (multipart), for the cases
    that need the user's given resume."""
    jobs = "".join(
        f"<div class='card job' id='job-{key}'><h2>{esc(title)}</h2><form method='post' action='/careers/apply' "
        f"enctype='multipart/form-data'><input type='hidden' name='position' value='{key}'>"
        "<label>Full name <input name='name' required></label> <label>Email <input name='email' type='email' required></label> "
        "<label>Resume (PDF) <input type='file' name='resume' accept='application/pdf' required></label> "
        f"<button id='apply-{key}'>Apply</button></form></div>" for key, title in JOBS.items())
    return _shell(request, "Careers", f"<h1>Work at Shoply</h1>{jobs}")


async def careers_apply(request: Request):
    form = await request.form()
    resume = form.get("resume")
    data = getattr(resume, "filename", None) and await resume.read()
    if form.get("position") not in JOBS or not data or not data.startswith(b"%PDF"):
        return _shell(request, "Careers", "<p class='error'>Choose a job and attach your resume as a PDF.</p>")
    application = {"position": str(form["position"]), "name": str(form.get("name", "")).strip(),
                   "email": str(form.get("email", "")).strip(), "resume": resume.filename, "resume_bytes": len(data)}
    record_write("shop", "application", application)
    return _shell(request, "Applied", f"<h1>Thank you</h1><p id='applied'>We have your application for {esc(JOBS[application['position']])}.</p>")


# Fault pages, for the harness's own tests of how a failed trial is labelled: what a bot defence's
# challenge and a failing server look like to a browser. SHOP_FAULT=bot-block (or error) makes every
# page of the site one, as a site that refuses a whole session does; no agent can turn it on.
async def fault_bot_block(request: Request) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html><head><title>Just a moment...</title></head><body><h1>Checking your browser "
        "before accessing shop.localhost</h1><p>Verify you are human by completing the action below.</p>"
        "<div id=cf-chl-widget></div></body></html>", status_code=403)


async def fault_error(request: Request) -> HTMLResponse:
    return HTMLResponse("<!doctype html><html><head><title>503 Service Unavailable</title></head><body>"
                        "<h1>Service Unavailable</h1><p>The server is temporarily unable to serve your request.</p>"
                        "</body></html>", status_code=503)


def create_app() -> Starlette:
    fault = {"bot-block": fault_bot_block, "error": fault_error}.get(os.environ.get("SHOP_FAULT", ""))
    if fault is not None:
        return Starlette(routes=[Route("/{path:path}", fault, methods=["GET", "POST"])])
    return Starlette(routes=[
        Route("/", home), Route("/c/{name}", category), Route("/search", search), Route("/api/products", api_products),
        Route("/p/{sku}", product), Route("/cart", cart), Route("/cart/add", cart_add, methods=["POST"]),
        Route("/cart/remove", cart_remove, methods=["POST"]), Route("/cart/coupon", cart_coupon, methods=["POST"]),
        Route("/checkout", checkout, methods=["GET", "POST"]),
        Route("/careers", careers), Route("/careers/apply", careers_apply, methods=["POST"]),
    ])
