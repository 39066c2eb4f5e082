"""Reference solution: treatment asks list_deals; the others open the deals page and scroll until every deal
has loaded (its script fetches eight at a time), a call per scroll."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


SCROLL = """
const before = await page.locator('.deal').count();
await page.locator('#more, #deals-end').last().scrollIntoViewIfNeeded();
await page.waitForFunction((n) => document.querySelectorAll('.deal').length > n
  || !document.getElementById('deals-end').hidden, before);
return { done: await page.locator('#deals-end').isVisible(), deals: await page.locator('.deal').evaluateAll(
  (ds) => ds.map((d) => ({ id: d.dataset.id, percent: Number(d.dataset.percent) }))) };
"""


async def solve(browser, arm):
    if arm == "treatment":
        best = (await browser.webmcp("list_deals"))["deals"][0]
        return {"id": best["id"], "percent_off": best["percent_off"]}
    if arm == "control":
        await browser.webmcp_tools()
    seen = await steps.open_page(browser, "/deals", SCROLL)
    while not seen["done"]:
        seen = await browser.playwright(SCROLL)
    best = max(seen["deals"], key=lambda d: d["percent"])
    return {"id": best["id"], "percent_off": best["percent"]}
