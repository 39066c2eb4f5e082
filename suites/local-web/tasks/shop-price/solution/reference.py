"""Reference solution: treatment asks the injected find_products tool; the others read the
bottles category with Playwright."""


async def solve(browser, arm):
    if arm == "treatment":
        products = (await browser.webmcp("find_products", words="large green bottle"))["products"]
        return {"price": products[0]["price_cents"] / 100}
    price = await browser.playwright("""
        await page.click('a[href="/c/bottles"]');
        for (;;) {
          const card = page.locator('.product', { hasText: 'Large Green Bottle' });
          if (await card.count()) return Number((await card.locator('.price').textContent()).replace('$', ''));
          await page.click('a[rel=next]');
        }
    """)
    return {"price": price}
