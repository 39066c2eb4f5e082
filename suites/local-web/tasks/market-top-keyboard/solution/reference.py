"""Reference solution: treatment asks find_products for keyboards sorted by rating; the others page through the
category (the site's own top_products ranks by review count, not rating: not to be trusted)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        top = (await browser.webmcp("find_products", category="keyboards", sort="rating", limit=1))["products"][0]
        return {"id": top["id"], "rating": top["rating"]}
    if arm == "control":
        await browser.webmcp_tools()
    best = max(await steps.listing(browser, "/products?category=keyboards"), key=lambda r: r["rating"])
    return {"id": best["id"], "rating": best["rating"]}
