"""A trial's route through the gateway: where its requests go (the provider, or --model-base-url),
which real key goes with them, its token, its price and caps, and what the agent is told."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from .meter import DEFAULT_OUTPUT_CEILING, ModelLog, Price, TrialMeter
from .providers import provider_of
from .policy import run_model_name
from .routes import GatewayRoute, GatewayRoutes

MODEL_LOG = "model-log.jsonl"


@dataclass
class GatewayHandle:
    url: str  # the base URL the agent is given
    token: str
    key_variable: str
    route: GatewayRoute

    @property
    def meter(self) -> TrialMeter:
        return self.route.meter


def open_gateway_route(routes: GatewayRoutes, base_url: str, trial: str, model: str | None, upstream: str | None,
                       price: Price | None, spend_limit_usd: float, token_limit: int | None, trial_dir: Path,
                       api: str | None = None, output_ceiling: int = DEFAULT_OUTPUT_CEILING) -> GatewayHandle:
    """`api`: the protocol the run's agent speaks (its endpoints only are forwarded); the run's
    model is the only one forwarded."""
    provider = provider_of(model)
    auth = {provider.key_header: ("Bearer " if provider.key_header == "authorization" else "") + "${" + provider.key_variable + "}"}
    route = GatewayRoute(
        trial=trial, token="wbt-" + secrets.token_urlsafe(24), upstream=(upstream or provider.base_url).rstrip("/"), auth=auth,
        meter=TrialMeter(trial=trial, price=price, spend_limit_usd=spend_limit_usd, token_limit=token_limit,
                         output_ceiling=output_ceiling),
        log=ModelLog(trial_dir / MODEL_LOG), api=api, model=run_model_name(model),
    )
    path = routes.add(route)
    return GatewayHandle(url=base_url + path, token=route.token, key_variable=provider.key_variable, route=route)
