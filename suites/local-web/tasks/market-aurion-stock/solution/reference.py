"""Reference solution: treatment asks find_products for Aurion monitors; the others filter the listing and open
each product page."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        found = (await browser.webmcp("find_products", category="monitors", brand="Aurion"))["products"]
        return {"stock": sum(p["stock"] for p in found)}
    if arm == "control":
        await browser.webmcp_tools()
    rows = await steps.listing(browser, "/products?category=monitors&brand=Aurion")
    return {"stock": sum([int((await steps.facts(browser, row["id"]))["in-stock"]) for row in rows])}
