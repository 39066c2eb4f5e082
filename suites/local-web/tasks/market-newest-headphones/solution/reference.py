"""Reference solution: treatment asks find_products for headphones sorted by release date; the others page through
the category and open every product page."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        top = (await browser.webmcp("find_products", category="headphones", sort="released", limit=1))["products"][0]
        return {"id": top["id"], "released": top["released"]}
    if arm == "control":
        await browser.webmcp_tools()
    newest = None
    for row in await steps.listing(browser, "/products?category=headphones"):
        released = (await steps.facts(browser, row["id"]))["released"]
        if newest is None or released > newest[1]:
            newest = (row["id"], released)
    return {"id": newest[0], "released": newest[1]}
