"""Reference solution: treatment uses the injected find_products, add_to_cart, current_coupons and
apply_coupon tools; the other arms search, use the product pages' forms, look through the category
pages for the advertised coupon and apply it on the cart page, with Playwright."""


# Search, and pick the cheapest result; then its page, the quantity and Add to cart: a call each.
SEARCH = """
await page.fill('input[name=q]', %r);
await Promise.all([page.waitForURL('**/search**'), page.press('input[name=q]', 'Enter')]);
const cards = await page.locator('.product').evaluateAll((els) => els.map((e) => ({
  href: e.querySelector('a').getAttribute('href'), price: Number(e.querySelector('.price').textContent.replace('$', '')),
})));
return cards.sort((a, b) => a.price - b.price)[0].href;
"""
ADD = """
await page.goto(new URL(%r, page.url()).href);
await page.fill('input[name=qty]', '%d');
await Promise.all([page.waitForURL('**/cart'), page.click('#add-to-cart')]);
"""

PROMO = """
await page.goto(new URL(%r, page.url()).href);
return (await page.locator('.coupon-code').count()) ? (await page.textContent('.coupon-code')).trim() : null;
"""
COUPON = """
await page.goto(new URL('/cart', page.url()).href);
await page.fill('input[name=code]', %r);
await Promise.all([page.waitForURL('**/cart'), page.click('#apply-coupon')]);
return (await page.textContent('#cart-total')).trim();
"""


async def solve(browser, arm):
    if arm == "treatment":
        mugs = (await browser.webmcp("find_products", words="blue mug"))["products"]
        lantern = (await browser.webmcp("find_products", words="trail lantern"))["products"][0]
        await browser.webmcp("add_to_cart", sku=mugs[0]["sku"], quantity=2)
        await browser.webmcp("add_to_cart", sku=lantern["sku"], quantity=1)
        [coupon] = (await browser.webmcp("current_coupons"))["coupons"]
        return {"total": (await browser.webmcp("apply_coupon", code=coupon["code"]))["total"]}
    if arm == "control":
        await browser.webmcp_tools()
    for query, qty in (("blue mug", 2), ("trail lantern", 1)):
        href = await browser.playwright(SEARCH % query)
        await browser.playwright(ADD % (href, qty))
    # the coupon: each category page in turn until one advertises a code, then the cart's form
    categories = await browser.playwright("return await page.locator('header a[href^=\"/c/\"]').evaluateAll((as) => as.map((a) => a.getAttribute('href')));")
    for href in categories:
        code = await browser.playwright(PROMO % href)
        if code:
            break
    return {"total": await browser.playwright(COUPON % code)}
