"""Each local-web task's pinned answer, recomputed from the bundled sites' data with plain Python,
independently of the reference solutions (which browse) and of the grader (which compares): a
task whose pin drifted from its data, or whose answer is tied or guessable from its wording, fails
here."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
sys.path.insert(0, str(LOCAL_WEB / "sites"))
import codehub  # noqa: E402
import market_data as market  # noqa: E402
import shop  # noqa: E402
import wiki  # noqa: E402

P = market.PRODUCTS


def only(items: list, what: str):
    assert len(items) == 1, f"{what}: {len(items)} candidates, the answer must be unique"
    return items[0]


def best(items: list[dict], key, what: str) -> dict:
    top = max(key(p) for p in items)
    return only([p for p in items if key(p) == top], what)


def _kestrel():
    p = best([p for p in P if p["brand"] == "Kestrel"], lambda p: p["reviews"], "most-reviewed Kestrel")
    return {"id": p["id"], "reviews": p["reviews"]}


def _deal():
    d = best(market.DEALS, lambda d: d["percent_off"], "biggest deal")
    return {"id": d["id"], "percent_off": d["percent_off"]}


def _headphones():
    p = best([p for p in P if p["category"] == "headphones"], lambda p: p["released"], "newest headphones")
    return {"id": p["id"], "released": p["released"]}


def _keyboard():
    p = best([p for p in P if p["category"] == "keyboards"], lambda p: p["rating"], "top-rated keyboard")
    return {"id": p["id"], "rating": p["rating"]}


def _cheapest_rated():
    wanted = [p for p in P if p["rating"] >= 4.5 and p["warranty_months"] >= 36]
    p = best(wanted, lambda p: -p["price_cents"], "cheapest rated with warranty")
    return {"id": p["id"], "price": p["price_cents"] / 100}


def _merged_pr():
    pr = only([p for p in codehub.DATA["acme/rocket"]["pulls"]
               if "telemetry buffer overflow when the downlink stalls" in p["title"].lower()], "merged PR")
    assert pr["state"] == "merged"
    return {"number": pr["number"], "author": pr["author"]}


def _green_bottle():
    return {"price": only([p for p in shop.PRODUCTS if p["name"] == "Large Green Bottle"], "bottle")["price_cents"] / 100}




EXPECTED = {
    "market-kestrel-reviews": _kestrel,
    "market-voltra-count": lambda: {"count": sum(p["brand"] == "Voltra" and p["rating"] >= 4.0 for p in P)},
    "market-best-deal": _deal,
    "market-newest-headphones": _headphones,
    "market-aurion-stock": lambda: {"stock": sum(p["stock"] for p in P if p["brand"] == "Aurion" and p["category"] == "monitors")},
    "market-top-keyboard": _keyboard,
    "market-product-id": lambda: {"id": only([p["id"] for p in P if p["name"] == "Pellucid Edge 9"], "Pellucid Edge 9")},
    "market-cheapest-rated": _cheapest_rated,
    "codehub-merged-pr": _merged_pr,
    "codehub-latest-release": lambda: {"tag": codehub.DATA["nimbus/raincheck"]["releases"][0]["tag"]},
    "shop-price": _green_bottle,
    "wiki-population": lambda: {"population": wiki.CITIES["Corvain"]["population"]},
}


def pins(task: str) -> dict:
    meta = tomllib.loads((LOCAL_WEB / "tasks" / task / "task.toml").read_text())["metadata"]["webbench"]
    return {k: rule["equals"] for k, rule in meta["answer"].items() if "equals" in rule}


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_the_pinned_answer_is_what_the_site_data_says(task):
    expected = EXPECTED[task]()
    assert pins(task) == expected
    wording = (LOCAL_WEB / "tasks" / task / "instruction.md").read_text()
    if task.startswith("market-") and task != "market-product-id":  # the id task names the product, not its id
        for value in expected.values():
            assert str(value) not in wording, f"{task}: the answer {value!r} is in the task's wording"


def test_the_quote_task_expects_the_cheapest_sable_chair():
    chair = best([p for p in P if p["brand"] == "Sable" and p["category"] == "chairs"], lambda p: -p["price_cents"],
                 "cheapest Sable chair")
    meta = tomllib.loads((LOCAL_WEB / "tasks" / "market-sable-quote" / "task.toml").read_text())["metadata"]["webbench"]
    assert meta["page"]["expect"]["quotes"] == [{"item": chair["id"], "quantity": 3, "postcode": "QX417"}]


def test_the_shop_cart_task_expects_the_cheapest_blue_mug():
    mugs = [p for p in shop.PRODUCTS if "blue" in p["name"].lower() and p["category"] == "mugs"]
    cheapest = best(mugs, lambda p: -p["price_cents"], "cheapest blue mug")
    meta = tomllib.loads((LOCAL_WEB / "tasks" / "shop-cart" / "task.toml").read_text())["metadata"]["webbench"]
    assert meta["page"]["expect"]["items"] == {cheapest["sku"]: 2, "LAN-TRL-X": 1}
    assert meta["page"]["expect"]["coupon"] == only(list(shop.COUPON_BANNER.values()), "advertised coupon")
    assert meta["page"]["expect"]["coupon"] not in (LOCAL_WEB / "tasks" / "shop-cart" / "instruction.md").read_text()


def test_the_data_is_generated_from_the_suite_s_seed():
    import importlib
    import random

    again = market._products(random.Random(market.SEED))
    assert again == [{k: v for k, v in p.items()} for p in market.PRODUCTS]
    other = market._products(random.Random(market.SEED + "/other"))
    assert [p["name"] for p in other] != [p["name"] for p in market.PRODUCTS]
    assert importlib.reload(market).PRODUCTS == again  # no state between imports: same catalogue
