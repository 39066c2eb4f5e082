"""Reference solution: treatment asks find_products with a minimum rating, by price, and reads the
warranties it returns; the others sort the whole listing by price and open the page of each
product rated 4.5 or more until one has the warranty."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm == "treatment":
        found = (await browser.webmcp("find_products", min_rating=4.5, sort="price"))["products"]
        hit = next(p for p in found if p["warranty_months"] >= 36)
        return {"id": hit["id"], "price": hit["price_cents"] / 100}
    if arm == "control":
        await browser.webmcp_tools()
    path = "/products?sort=price"
    while path:
        page = await steps.open_page(browser, path, steps.LISTING)
        for row in page["rows"]:
            if row["rating"] >= 4.5 and int((await steps.facts(browser, row["id"]))["warranty"].split()[0]) >= 36:
                return {"id": row["id"], "price": row["price"]}
        path = page["next"]
    raise RuntimeError("no such product")
