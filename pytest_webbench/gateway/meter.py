"""Prices and a trial's running totals: what the gateway holds each request against."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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
MIN_OUTPUT_TOKENS = 16  # a request whose output cannot reach this within the caps is refused, not sent to say nothing
# An output limit the gateway sets is never above the model's own (litellm's max_output_tokens), or
# this where the table has none: a provider refuses a limit past its model's.
DEFAULT_OUTPUT_CEILING = 32_000


@dataclass(frozen=True)
class Price:
    """US dollars per token; a cached input token costs `cached_input` (the input price if the
    table has none), one written to a cache `cache_write` (Messages: dearer than input)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    # a long-context tier: past `above_tokens` input tokens, the whole request is priced at `above`
    above_tokens: int | None = None
    above: Price | None = None

    def at(self, input_tokens: int) -> Price:
        """The price a request of this many input tokens is billed at."""
        if self.above is not None and self.above_tokens is not None and input_tokens > self.above_tokens:
            return self.above
        return self

    def cost(self, usage: Usage) -> float:
        if (tier := self.at(usage.input)) is not self:
            return tier.cost(usage)
        fresh = max(usage.input - usage.cached - usage.cache_written, 0)
        cached = self.input if self.cached_input is None else self.cached_input
        written = self.input if self.cache_write is None else self.cache_write
        return fresh * self.input + usage.cached * cached + usage.cache_written * written + usage.output * self.output

    @property
    def dearest_input(self) -> float:
        return max(self.input, self.cache_write or 0.0)


def _table_rows(model: str):
    """The model's rows in litellm's cost map, as `provider/model` and as `model`."""
    name = model.split("/", 1)[1] if "/" in model else model
    for key in (model, name):
        if isinstance(entry := cost_map().get(key), dict):
            yield entry


def output_ceiling(model: str | None) -> int:
    """The model's largest output limit in litellm's cost map (DEFAULT_OUTPUT_CEILING where unlisted)."""
    for entry in _table_rows(model) if model else ():
        value = entry.get("max_output_tokens")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_CEILING


def price_from_table(model: str) -> Price | None:
    """The model's price in litellm's cost map (Harbor brings litellm; set
    LITELLM_LOCAL_MODEL_COST_MAP=True to use its bundled copy offline), under `provider/model` or
    `model`; None when the table does not list it."""
    for entry in _table_rows(model):
        if entry.get("input_cost_per_token") is not None and entry.get("output_cost_per_token") is not None:
            return Price(entry["input_cost_per_token"], entry["output_cost_per_token"], entry.get("cache_read_input_token_cost"),
                         entry.get("cache_creation_input_token_cost"), *_long_context_tier(entry))
    return None


_TIER = re.compile(r"input_cost_per_token_above_(\d+)k_tokens")


def _long_context_tier(entry: dict) -> tuple[int | None, Price | None]:
    """The table's first long-context tier (`input_cost_per_token_above_272k_tokens` and its kin):
    past it, the provider bills the whole request at the higher price."""
    tiers = sorted(int(m.group(1)) for key in entry if (m := _TIER.fullmatch(key)))
    if not tiers:
        return None, None
    k = f"above_{tiers[0]}k_tokens"
    field = lambda name, base: entry.get(f"{name}_{k}", base)  # noqa: E731
    return tiers[0] * 1000, Price(field("input_cost_per_token", entry["input_cost_per_token"]),
                                  field("output_cost_per_token", entry["output_cost_per_token"]),
                                  field("cache_read_input_token_cost", entry.get("cache_read_input_token_cost")),
                                  field("cache_creation_input_token_cost", entry.get("cache_creation_input_token_cost")))


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
    # unauthorized, upstream_error (a reply the agent left is read to its end: forwarded, said in `detail`)
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


# Input a provider adds that the request's bytes do not hold: Anthropic's tool-use system prompt
# (346-530 tokens, computer use's some 500-800 more), a chat's per-message framing. A reported
# input past the request's bound and this is a count the cap cannot rest on.
HIDDEN_INPUT_TOKENS = 2_000


@dataclass
class Reservation:
    """What one forwarded request may cost at most, held against the trial's caps until its reply is
    metered: `output_limit` is the output limit the request goes with (None: it set none and no cap
    needs one)."""

    usd: float
    tokens: int
    input_bound: int
    output_limit: int | None
    settled: bool = False  # its reply was metered (else it is released: the request never reached the provider)


@dataclass
class TrialMeter:
    """A trial's totals and caps; requests of one trial may overlap, so updates are locked.

    The caps hold by construction: before a request goes, its worst case (every byte of its body a
    fresh input token at the dearest input price, plus its output limit) is reserved against what
    is left, its output limit lowered (or set) to what fits, and a request that cannot fit even
    MIN_OUTPUT_TOKENS is refused; its metered usage then replaces the reservation."""

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
    estimated_requests: int = 0  # replies whose usage was not read whole, charged their reservation
    faults: list[str] = field(default_factory=list)  # the provider's usage that could not be read
    provider_failures: int = 0  # replies of the provider's own failing (routes.provider_fault), or none at all
    reserved_usd: float = 0.0  # held for requests in flight
    reserved_tokens: int = 0
    output_ceiling: int = DEFAULT_OUTPUT_CEILING  # the model's largest output limit
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def charged_usd(self) -> float:
        """What the trial has cost: its metered replies, and the worst case of any still unread."""
        return self.cost_usd + self.reserved_usd

    def over_cap(self) -> str | None:
        """Why the next request is refused, if it is."""
        if self.spend_limit_usd is not None and self.price is not None and self.cost_usd >= self.spend_limit_usd:
            return f"spent ${self.cost_usd:.4f} of the trial's ${self.spend_limit_usd:.2f} limit"
        if self.token_limit is not None and self.usage.input + self.usage.output >= self.token_limit:
            return f"used {self.usage.input + self.usage.output} tokens of the trial's {self.token_limit} limit"
        return None

    def reserve(self, input_bound: int, output_limit: int | None, floor: int = 0) -> Reservation | str:
        """Holds a request's worst case against the caps, or says why it cannot fit. The output
        limit is lowered to what is left where the request's own is larger or missing, never below
        `floor` (a Messages request's thinking budget, which its max_tokens must exceed)."""
        with self._lock:
            fits: list[int] = []
            price = self.price.at(input_bound) if self.price is not None else None  # its tier, at its most input
            if self.spend_limit_usd is not None and price is not None:
                room = self.spend_limit_usd - self.cost_usd - self.reserved_usd - input_bound * price.dearest_input
                fits.append(int(room / price.output) if price.output > 0 else self.output_ceiling)
            if self.token_limit is not None:
                fits.append(self.token_limit - self.usage.input - self.usage.output - self.reserved_tokens - input_bound)
            limit = output_limit
            if fits:
                fit = min(min(fits), self.output_ceiling)
                if fit < max(MIN_OUTPUT_TOKENS, floor + 1):
                    return (f"what is left of the trial's caps cannot hold this request: its {input_bound}-byte input "
                            f"and {max(MIN_OUTPUT_TOKENS, floor + 1)} output tokens ({self._spent()})")
                limit = fit if output_limit is None else min(output_limit, fit)
            usd = (input_bound * price.dearest_input + (limit or 0) * price.output) if price is not None else 0.0
            reservation = Reservation(usd=usd, tokens=input_bound + (limit or 0), input_bound=input_bound, output_limit=limit)
            self.reserved_usd += reservation.usd
            self.reserved_tokens += reservation.tokens
            return reservation

    def _spent(self) -> str:
        out = []
        if self.spend_limit_usd is not None and self.price is not None:
            out.append(f"${self.cost_usd:.4f} of ${self.spend_limit_usd:.2f} spent, ${self.reserved_usd:.4f} held")
        if self.token_limit is not None:
            out.append(f"{self.usage.input + self.usage.output} of {self.token_limit} tokens used")
        return "; ".join(out)

    def release(self, reservation: Reservation) -> None:
        """A request that was not forwarded after all: its reservation goes."""
        with self._lock:
            self.reserved_usd -= reservation.usd
            self.reserved_tokens -= reservation.tokens

    def settle(self, reservation: Reservation, usage: Usage, seconds: float, billed: bool) -> float | None:
        """The reply's metered usage replaces its reservation. A reply the provider billed (`billed`:
        a 2xx) whose usage was not read whole, or was unreadable, is charged the reservation (the
        worst it could cost); an unreadable count is also a fault of the trial's, and so is more
        output than the limit the request went with, or more input than its bound (the provider's own
        count is then wrong, or the bound the cap rests on did not hold)."""
        limit = reservation.output_limit
        if billed and usage.final and not usage.fault and limit is not None and usage.output > limit:
            usage.fault = f"the model API reported {usage.output} output tokens for a request limited to {limit}"
        elif billed and usage.final and not usage.fault and reservation.input_bound \
                and usage.input > reservation.input_bound + HIDDEN_INPUT_TOKENS:
            # the bound the cap rests on (a token a byte at least, an image at its model's most) did not hold
            usage.fault = (f"the model API reported {usage.input} input tokens for a request bounded at "
                           f"{reservation.input_bound} (policy.input_bound) and {HIDDEN_INPUT_TOKENS} a provider may add")
        if billed and (not usage.final or usage.fault):
            usage.estimate(reservation.input_bound, reservation.output_limit or usage.output)
        if usage.fault:
            with self._lock:
                self.faults.append(usage.fault)
        self.release(reservation)
        return self.account(usage, seconds)

    def provider_failed(self) -> None:
        with self._lock:
            self.provider_failures += 1

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


__all__ = ["ModelCall", "ModelLog", "Price", "Reservation", "TrialMeter", "output_ceiling", "price_from_table", "read_model_log", "redact"]
