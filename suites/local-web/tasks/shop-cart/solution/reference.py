"""Reference solution: treatment uses the injected find_products and add_to_cart tools; the other
arms search and use the product pages' forms with Playwright."""


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


async def solve(browser, arm):
    if arm == "treatment":
        mugs = (await browser.webmcp("find_products", words="blue mug"))["products"]
        lantern = (await browser.webmcp("find_products", words="trail lantern"))["products"][0]
        await browser.webmcp("add_to_cart", sku=mugs[0]["sku"], quantity=2)
        out = await browser.webmcp("add_to_cart", sku=lantern["sku"], quantity=1)
        return {"total": out["total"]}
    if arm == "control":
        await browser.webmcp_tools()
    for query, qty in (("blue mug", 2), ("trail lantern", 1)):
        href = await browser.playwright(SEARCH % query)
        await browser.playwright(ADD % (href, qty))
    return {"total": await browser.playwright("return (await page.textContent('#cart-total')).trim();")}
