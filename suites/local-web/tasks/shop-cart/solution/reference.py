"""Reference solution: treatment uses the injected find_products and add_to_cart tools; the other
arms search and use the product pages' forms with Playwright."""


async def solve(browser, arm):
    if arm == "treatment":
        mugs = (await browser.webmcp("find_products", words="blue mug"))["products"]
        lantern = (await browser.webmcp("find_products", words="trail lantern"))["products"][0]
        await browser.webmcp("add_to_cart", sku=mugs[0]["sku"], quantity=2)
        out = await browser.webmcp("add_to_cart", sku=lantern["sku"], quantity=1)
        return {"total": out["total"]}
    total = await browser.playwright("""
        const add = async (query, pick, qty) => {
          await page.fill('input[name=q]', query);
          await page.press('input[name=q]', 'Enter');
          await page.waitForLoadState();
          const cards = await page.locator('.product').evaluateAll((els) => els.map((e) => ({
            href: e.querySelector('a').getAttribute('href'),
            price: Number(e.querySelector('.price').textContent.replace('$', '')),
          })));
          const chosen = pick(cards);
          await page.goto(new URL(chosen.href, page.url()).href);
          await page.fill('input[name=qty]', String(qty));
          await Promise.all([page.waitForURL('**/cart'), page.click('#add-to-cart')]);
        };
        await add('blue mug', (cards) => cards.sort((a, b) => a.price - b.price)[0], 2);
        await add('trail lantern', (cards) => cards[0], 1);
        return (await page.textContent('#cart-total')).trim();
    """)
    return {"total": total}
