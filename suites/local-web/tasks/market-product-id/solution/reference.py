"""Reference solution: control and treatment ask the site's own search_catalog (the batch has
nothing quicker); the playwright arm pages through the brand's listing."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("local_web_steps", Path(__file__).parents[3] / "solutions" / "steps.py")
steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(steps)


async def solve(browser, arm):
    if arm in ("control", "treatment"):
        found = await browser.webmcp("search_catalog", query="Pellucid Edge 9")
        return {"id": next(p["id"] for p in found if p["name"] == "Pellucid Edge 9")}
    rows = await steps.listing(browser, "/products?brand=Pellucid")
    return {"id": next(r["id"] for r in rows if r["name"] == "Pellucid Edge 9")}
