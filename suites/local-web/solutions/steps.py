"""Browsing steps for the reference solutions of control and the playwright arm: one Playwright call
per page the agent opens (as an agent would: open a page, read it, decide), so a run's browser
calls and time are those of paging through, not of one script that does it all. Solutions load
this file by path (`load_steps`)."""

from __future__ import annotations

LISTING = """
const rows = await page.locator('tr.product').evaluateAll((rs) => rs.map((r) => ({
  id: r.dataset.id, name: r.querySelector('a').textContent, brand: r.querySelector('.brand').textContent,
  price: Number(r.querySelector('.price').textContent.replace(/[$,]/g, '')), rating: Number(r.querySelector('.rating').textContent),
})));
const next = (await page.locator('a[rel=next]').count()) ? await page.locator('a[rel=next]').getAttribute('href') : null;
return { rows, next };
"""
FACTS = """
return Object.fromEntries(await page.locator('dl.facts dd').evaluateAll((ds) => ds.map((d) => [d.dataset.fact, d.textContent])));
"""


async def open_page(browser, path: str, read: str):
    """Opens a path of the current site and reads it, in one call."""
    return await browser.playwright(f"await page.goto(new URL({path!r}, page.url()).href); {read}")


async def listing(browser, path: str) -> list[dict]:
    """Every row of a Marketa listing, a page per call, following its Next links."""
    rows = []
    while path:
        page = await open_page(browser, path, LISTING)
        rows += page["rows"]
        path = page["next"]
    return rows


async def facts(browser, item_id: str) -> dict:
    """A Marketa product page's facts (reviews, stock, warranty, release date...)."""
    return await open_page(browser, f"/item/{item_id}", FACTS)
