"""Reference solution: treatment asks find_products with a minimum rating; the others page through the brand's
listing and count."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        return {"count": (await browser.webmcp("find_products", brand="Voltra", min_rating=4.0))["matched"]}
    if arm == "control":
        await browser.webmcp_tools()
    return {"count": sum(row["rating"] >= 4.0 for row in await steps.listing(browser, "/products?brand=Voltra"))}
