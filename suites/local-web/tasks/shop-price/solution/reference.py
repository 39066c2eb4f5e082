"""Reference solution: Shoply's own search_products tool returns prices, so control asks it, and
treatment the injected find_products (no quicker); the playwright arm reads the bottles category."""


async def solve(browser, arm):
    if arm == "treatment":
        products = (await browser.webmcp("find_products", words="large green bottle"))["products"]
        return {"price": products[0]["price_cents"] / 100}
    if arm == "control":
        found = await browser.webmcp("search_products", query="large green bottle")
        return {"price": float(found[0]["price"].replace("$", ""))}
    # Each click waits for the page it opens: count() does not wait, and read on the page being
    # left it sends the loop a page too far.
    price = await browser.playwright("""
        const follow = async (selector) => {
          const before = page.url();
          await Promise.all([page.waitForURL((url) => url.href !== before), page.click(selector)]);
        };
        await follow('a[href="/c/bottles"]');
        for (;;) {
          const card = page.locator('.product', { hasText: 'Large Green Bottle' });
          if (await card.count()) return Number((await card.locator('.price').textContent()).replace('$', ''));
          await follow('a[rel=next]');
        }
    """)
    return {"price": price}
