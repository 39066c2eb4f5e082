"""Which providers' APIs the gateway speaks and what a model costs: checked when a run is planned,
so this module loads no web server (the gateway's own modules import aiohttp and httpx)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .meter import Price, price_from_table


@dataclass(frozen=True)
class Provider:
    base_url: str  # the API's base URL, which the agent's requests' paths are appended to
    key_variable: str  # where the harness holds the real key, and where the agent finds its token
    key_header: str  # how the API takes the key


# The providers whose APIs the gateway speaks (Responses and chat completions, Messages).
PROVIDERS = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY", "authorization"),
    "anthropic": Provider("https://api.anthropic.com", "ANTHROPIC_API_KEY", "x-api-key"),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "authorization"),
}


class GatewayConfigError(ValueError):
    pass


def provider_of(model: str | None) -> Provider:
    name = (model or "").split("/", 1)[0] if model and "/" in model else None
    if name not in PROVIDERS:
        raise GatewayConfigError(f"--model {model!r}: the model gateway speaks the APIs of {', '.join(PROVIDERS)}; "
                                 "give provider/model with one of them")
    return PROVIDERS[name]


def parse_price(text: str) -> Price:
    """`--model-price IN,OUT[,CACHED]` in US dollars per million tokens."""
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3) or any(not math.isfinite(p) or p < 0 for p in parts):  # nan would never reach a cap
        raise GatewayConfigError(f"--model-price {text!r}: give INPUT,OUTPUT[,CACHED_INPUT] in dollars per million tokens")
    return Price(parts[0] / 1e6, parts[1] / 1e6, parts[2] / 1e6 if len(parts) == 3 else None)


def model_price(model: str | None, given: str | None, allow_unpriced: bool) -> Price | None:
    """The price spend is counted at: --model-price, else litellm's table; an unpriced model only
    with --allow-unpriced (its spend cap cannot hold, and the report counts such trials)."""
    if given:
        return parse_price(given)
    price = price_from_table(model) if model else None
    if price is None and not allow_unpriced:
        raise GatewayConfigError(f"--model {model!r} has no price in litellm's cost map, so its spend limit could not "
                                 "be enforced: give --model-price IN,OUT[,CACHED] ($ per million tokens) or pass "
                                 "--allow-unpriced")
    return price
