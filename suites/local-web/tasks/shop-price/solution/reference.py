"""Reference solution: treatment asks the injected find_products tool; the others read the
bottles category with Playwright."""


async def solve(browser, arm):
    if arm == "treatment":
        products = (await browser.webmcp("find_products", words="large green bottle"))["products"]
        return {"price": products[0]["price_cents"] / 100}
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
