"""Reference solution: treatment finds the bottle and places the order for two with the injected
tools; the others search, use the product page's form and fill in the checkout, with Playwright.
The order's request is blocked by the harness (grading "request"), so nothing waits for a reply."""

SEARCH = """
await page.fill('input[name=q]', 'green bottle');
await Promise.all([page.waitForURL('**/search**'), page.press('input[name=q]', 'Enter')]);
return await page.locator('.product a', { hasText: 'Large Green Bottle' }).first().getAttribute('href');
"""
ADD = """
await page.goto(new URL(%r, page.url()).href);
await page.fill('input[name=qty]', '2');
await Promise.all([page.waitForURL('**/cart'), page.click('#add-to-cart')]);
"""
CHECKOUT = """
await page.goto(new URL('/checkout', page.url()).href);
await page.fill('input[name=name]', 'Webbench');
await page.fill('input[name=postcode]', 'QX417');
// the order's request is blocked in the browser: wait for that, not for a page that never comes
const blocked = page.waitForEvent('requestfailed', (r) => r.url().includes('/checkout') && r.method() === 'POST');
await page.click('#place-order', { noWaitAfter: true });
return (await blocked).failure().errorText;
"""


async def solve(browser, arm):
    if arm == "treatment":
        found = (await browser.webmcp("find_products", words="green bottle"))["products"]
        bottle = next(p for p in found if p["name"] == "Large Green Bottle")
        await browser.webmcp("place_order", items=[{"sku": bottle["sku"], "quantity": 2}], name="Webbench", postcode="QX417")
        return {}
    if arm == "control":
        await browser.webmcp_tools()
    href = await browser.playwright(SEARCH)
    await browser.playwright(ADD % href)
    await browser.playwright(CHECKOUT)
    return {}
