"""Reference solution: treatment finds the chair with find_products and sends request_quote; the others filter the
listing by price and fill in both steps of the quote form."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


FILL = """
await page.fill('input[name=item]', %r);
await page.fill('input[name=quantity]', '3');
await Promise.all([page.waitForURL('**/quote/shipping**'), page.click('#next-step')]);
return page.url();
"""
SHIP = """
await page.fill('input[name=name]', 'Webbench');
await page.fill('input[name=postcode]', 'QX417');
await Promise.all([page.waitForURL('**/quote/done/**'), page.click('#send-quote')]);
return (await page.textContent('#quote-ref')).trim();
"""


async def solve(browser, arm):
    if arm == "treatment":
        chair = (await browser.webmcp("find_products", category="chairs", brand="Sable", sort="price", limit=1))["products"][0]
        out = await browser.webmcp("request_quote", item=chair["id"], quantity=3, name="Webbench", postcode="QX417")
        return {"reference": out["reference"]}
    if arm == "control":
        await browser.webmcp_tools()
    first = (await steps.open_page(browser, "/products?category=chairs&brand=Sable&sort=price", steps.LISTING))["rows"][0]
    await steps.open_page(browser, "/quote", FILL % first["id"])
    return {"reference": await browser.playwright(SHIP)}
