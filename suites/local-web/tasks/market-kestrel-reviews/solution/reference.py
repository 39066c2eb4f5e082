"""Reference solution: treatment asks find_products for Kestrel sorted by reviews; the others page through the
brand's listing and open every product page."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        top = (await browser.webmcp("find_products", brand="Kestrel", sort="reviews", limit=1))["products"][0]
        return {"id": top["id"], "reviews": top["reviews"]}
    if arm == "control":
        await browser.webmcp_tools()  # what the page offers: nothing that reads reviews
    best = None
    for row in await steps.listing(browser, "/products?brand=Kestrel"):
        reviews = int((await steps.facts(browser, row["id"]))["reviews"])
        if best is None or reviews > best[1]:
            best = (row["id"], reviews)
    return {"id": best[0], "reviews": best[1]}
