"""Prices and a trial's running totals: what the gateway holds each request against."""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..proxy.log import CallLog
from .protocols import Usage

BUNDLED_COST_MAP = "model_prices_and_context_window_backup.json"  # litellm's own copy, in its package


@dataclass(frozen=True)
class Price:
    """US dollars per token; a cached input token costs `cached_input` (the input price if the
    table has none)."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        fresh = max(usage.input - usage.cached, 0)
        cached = self.input if self.cached_input is None else self.cached_input
        return fresh * self.input + usage.cached * cached + usage.output * self.output


def price_from_table(model: str) -> Price | None:
    """The model's price in litellm's cost map (Harbor brings litellm; set
    LITELLM_LOCAL_MODEL_COST_MAP=True to use its bundled copy offline), under `provider/model` or
    `model`; None when the table does not list it."""
    name = model.split("/", 1)[1] if "/" in model else model
    for key in (model, name):
        entry = cost_map().get(key)
        if entry and entry.get("input_cost_per_token") is not None and entry.get("output_cost_per_token") is not None:
            return Price(entry["input_cost_per_token"], entry["output_cost_per_token"], entry.get("cache_read_input_token_cost"))
    return None


@lru_cache(maxsize=1)
def cost_map() -> dict[str, Any]:
    """litellm's cost map. Where litellm would read its bundled copy (LITELLM_LOCAL_MODEL_COST_MAP
    or LITELLM_OFFLINE_MODE), the same file is read here without importing litellm, which takes
    about 10 s on this machine in every run and worker that prices a model; otherwise litellm
    loads it as it does (fetching the current map)."""
    if (os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").lower() == "true"
            or os.environ.get("LITELLM_OFFLINE_MODE", "").strip().lower() == "true"):
        spec = importlib.util.find_spec("litellm")  # finds the package without running it
        if spec is not None and spec.submodule_search_locations:
            bundled = Path(spec.submodule_search_locations[0]) / BUNDLED_COST_MAP
            if bundled.exists():
                return _with_aliases(json.loads(bundled.read_bytes()))
    import litellm

    return litellm.model_cost


def _with_aliases(rows: dict[str, Any]) -> dict[str, Any]:
    """Names served as another row, as litellm expands them: a row's `alias_of` points at its
    owner, an owner's `aliases` list adds names; a name already taken keeps its first meaning."""
    pointers = {name: row["alias_of"] for name, row in rows.items() if isinstance(row, dict) and isinstance(row.get("alias_of"), str)}
    served = {name: row for name, row in rows.items() if name not in pointers}
    claimed: set[str] = set()
    for name, row in list(served.items()):
        aliases = row.get("aliases") if isinstance(row, dict) else None
        for alias in aliases if isinstance(aliases, list) else []:
            if alias not in served and alias not in claimed:
                claimed.add(alias)
                served[alias] = row
    for alias, owner in pointers.items():
        if owner in rows and owner not in pointers and alias not in claimed:
            claimed.add(alias)
            served[alias] = rows[owner]
    return served


class ModelCall(BaseModel):
    """One line of a trial's model-log.jsonl: one request through the gateway."""

    time: float
    trial: str
    seq: int
    api: str
    path: str
    model: str | None = None
    status: int
    # forwarded, refused (over a cap), refused_request (not the run's protocol, model or options),
    # unauthorized, upstream_error, agent_left (before the reply began)
    decision: str
    detail: str | None = None
    latency_ms: float = 0.0  # request sent to reply ended
    ttft_ms: float | None = None  # request sent to the reply's first byte
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    usage_reported: bool = False
    usage_estimated: bool = False  # no usage in the reply: counted from its bytes (and flagged)
    cost_usd: float | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    request_head: str | None = None  # the start of the request body, keys redacted
    tool_calls: list[dict[str, str]] = Field(default_factory=list)  # what the reply asked for: name, arguments
    reply_text: str | None = None  # what the reply said (bounded): the agent's last one is its answer of record


@dataclass
class TrialMeter:
    """A trial's totals and caps; requests of one trial may overlap, so updates are locked."""

    trial: str
    price: Price | None
    spend_limit_usd: float | None = None
    token_limit: int | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    requests: int = 0
    refused: int = 0
    model_sec: float = 0.0
    unpriced_requests: int = 0
    estimated_requests: int = 0  # replies without usage, counted from their bytes
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def over_cap(self) -> str | None:
        """Why the next request is refused, if it is."""
        if self.spend_limit_usd is not None and self.price is not None and self.cost_usd >= self.spend_limit_usd:
            return f"spent ${self.cost_usd:.4f} of the trial's ${self.spend_limit_usd:.2f} limit"
        if self.token_limit is not None and self.usage.input + self.usage.output >= self.token_limit:
            return f"used {self.usage.input + self.usage.output} tokens of the trial's {self.token_limit} limit"
        return None

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1

    def account(self, usage: Usage, seconds: float) -> float | None:
        cost = self.price.cost(usage) if self.price is not None else None
        with self._lock:
            self.usage.add(usage)
            self.requests += 1
            self.estimated_requests += usage.estimated
            self.model_sec += seconds
            if cost is not None:
                self.cost_usd += cost
            elif usage.reported or usage.estimated:
                self.unpriced_requests += 1
        return cost


class ModelLog:
    """model-log.jsonl, one flushed line per request, beside the proxy's call log (written the
    same way: the file stays open for the trial)."""

    def __init__(self, path: Path):
        self.path = path
        self._lines = CallLog(path)
        self._lock = threading.Lock()
        self._seq = 0

    def write(self, **fields: Any) -> None:
        with self._lock:
            self._seq += 1
            self._lines.write(ModelCall(time=time.time(), seq=self._seq, **fields))

    def close(self) -> None:
        self._lines.close()


def read_model_log(path: Path) -> list[ModelCall]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            out.append(ModelCall.model_validate_json(line))
        except ValueError:
            continue
    return out


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


__all__ = ["ModelCall", "ModelLog", "Price", "TrialMeter", "price_from_table", "read_model_log", "redact"]
