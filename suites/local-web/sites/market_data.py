"""Marketa's catalogue, generated from the suite's seed: 96 products in four categories from eight
brands, each with a price, rating, review count, stock, warranty and release date, and a deals
feed. Tasks pin answers computed from this data (tests/test_local_web_answers.py recomputes them
independently), and no answer can be read off a task's wording."""

from __future__ import annotations

import random
from datetime import date, timedelta

SEED = "local-web/market/2026-12"  # change it and every market task's pinned answer must be recomputed
CATEGORIES = {"headphones": (3900, 34900), "keyboards": (2900, 21900), "monitors": (11900, 89900), "chairs": (8900, 64900)}
BRANDS = ["Aurion", "Voltra", "Kestrel", "Nimbly", "Orrin", "Pellucid", "Quarto", "Sable"]
MODELS = ["Pro", "Air", "Max", "Lite", "One", "Studio", "Flex", "Edge", "Prime", "Core", "Nova", "Zen"]
PER_CATEGORY = 24


def _products(rng: random.Random) -> list[dict]:
    products, used = [], set()
    for category, (low, high) in CATEGORIES.items():
        for _ in range(PER_CATEGORY):
            while True:
                name = f"{rng.choice(BRANDS)} {rng.choice(MODELS)} {rng.randint(2, 99)}"
                if name not in used:
                    used.add(name)
                    break
            products.append({
                "name": name, "brand": name.split()[0], "category": category,
                "price_cents": rng.randrange(low, high, 100) - 1,
                "rating": round(rng.uniform(2.5, 5.0), 1), "reviews": rng.randint(0, 4000),
                "stock": rng.randint(0, 250), "warranty_months": rng.choice([6, 12, 12, 24, 24, 36, 48, 60]),
                "released": (date(2021, 1, 1) + timedelta(days=rng.randint(0, 1800))).isoformat(),
            })
    rng.shuffle(products)
    for number, product in enumerate(products, start=1):
        product["id"] = f"MK-{1000 + number * 7}"
    return products


def _deals(rng: random.Random, products: list[dict]) -> list[dict]:
    deals = []
    for product in rng.sample(products, 40):
        percent = rng.randint(5, 60)
        deals.append({"id": product["id"], "name": product["name"], "percent_off": percent,
                      "deal_cents": product["price_cents"] * (100 - percent) // 100})
    return deals


_rng = random.Random(SEED)
PRODUCTS = _products(_rng)
DEALS = _deals(_rng, PRODUCTS)
BY_ID = {p["id"]: p for p in PRODUCTS}
