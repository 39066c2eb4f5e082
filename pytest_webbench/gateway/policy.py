"""What the gateway forwards, per protocol: exactly the endpoints, headers and request options the
run's agent CLI needs, and nothing an agent could use to reach beyond its run's model.

From the pinned CLIs' own requests (Codex 0.171.0, Claude Code 2.1.332, Pi 1.6.0, captured through
the gateway and directly): Codex posts the Responses API (`/responses`), Claude Code the Messages
API (`/v1/messages?beta=true`), Pi chat completions (`/chat/completions`), each with the run's
model only. Anything else is refused in the protocol's own error shape and logged, never forwarded:

- another method, path or query (traversal and encodings included: a raw path holding `%`, `\\`,
  `//` or a dot segment is refused before it is compared);
- another model than the run's;
- anything in the body that is not a field, tool, item, role or content part the run's CLI sends
  (allowlist.py, from allowed_requests.toml): hosted tools, parts the provider fetches from a URL,
  stored items and files, background responses, conversations, fallback models, web plugins;
- options that change the price beyond the run's, and a body that could be read two ways;
- a body over MAX_BODY_BYTES (413).

Request headers are allowlisted (`HEADERS`); the key is the harness's, added by the route.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from .allowlist import Refused, check_allowed
from .protocols import Api

MAX_BODY_BYTES = 8 * 1024 * 1024  # as the MCP route's
# The API paths each protocol's CLI posts, relative to its provider's base URL, with the queries it sends.
ENDPOINTS: dict[str, dict[str, frozenset[str]]] = {
    "responses": {"responses": frozenset({""})},
    "messages": {"v1/messages": frozenset({"", "beta=true"}), "v1/messages/count_tokens": frozenset({"", "beta=true"})},
    "chat": {"chat/completions": frozenset({""})},
}
# Request headers passed on (lower case); all others (cookies, organisation and project, proxy
# credentials, forwarding and client telemetry headers) stay with the gateway.
HEADERS = frozenset({"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta"})
# anthropic-beta tokens passed on: those the pinned Claude Code sends. Others are dropped (and said
# in the model log), since a beta turns on features at the provider.
ANTHROPIC_BETAS = frozenset({
    "claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27",
    "mid-conversation-tool-changes-2026-07-01", "thinking-token-count-2026-05-13", "effort-2025-11-24",
    "thinking-display-updates-2026-08-18", "per-turn-control-2026-07-01", "prompt-caching-2024-07-31",
    "token-counting-2024-11-01",
})




def check_path(api: Api, method: str, raw_path: bytes, path: str, query: bytes) -> None:
    """`path` is the API path after the trial's prefix; `raw_path` the request's whole raw path."""
    if b"%" in raw_path or b"\\" in raw_path or b"//" in raw_path or any(
            seg in (b".", b"..") for seg in raw_path.split(b"/")):
        raise Refused("the request path holds an encoding or a dot segment: refused", 404)
    allowed = ENDPOINTS.get(api, {})
    if path not in allowed:
        raise Refused(f"/{path} is not an endpoint of this run's model API ({api}): refused", 404)
    if method != "POST":
        raise Refused(f"{method} /{path}: only POST is forwarded", 405)
    if query.decode("latin-1") not in allowed[path]:
        raise Refused(f"the query {query.decode('latin-1')[:100]!r} is not one this API's CLI sends: refused")


def forwarded_headers(headers: list[tuple[bytes, bytes]]) -> tuple[list[tuple[str, str]], list[str]]:
    """The headers passed on (header bytes as UTF-8, as aiohttp writes them), and what was dropped
    from anthropic-beta."""
    out, dropped = [], []
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name not in HEADERS:
            continue
        value = raw_value.decode("utf-8", "replace")
        if name == "anthropic-beta":
            tokens = [t.strip() for t in value.split(",") if t.strip()]
            dropped += [t for t in tokens if t not in ANTHROPIC_BETAS]
            value = ",".join(t for t in tokens if t in ANTHROPIC_BETAS)
            if not value:
                continue
        out.append((name, value))
    return out, dropped


# The request field that bounds a reply's output, per protocol (the first one present; else the
# first is set by the gateway, `TrialMeter.reserve`).
OUTPUT_LIMIT_FIELDS = {"responses": ("max_output_tokens",), "messages": ("max_tokens",),
                       "chat": ("max_completion_tokens", "max_tokens")}
# Options that change what a reply costs beyond the run's price (a priority tier, a longer cache,
# several replies for one request): refused, since the price the caps are held at does not cover them.
PRICED_OPTIONS = {"service_tier": (None, "auto", "default"), "prompt_cache_retention": (None, "in_memory"),
                  "n": (None, 1), "best_of": (None, 1)}


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise Refused(f"the key {twice[:100]!r} appears twice in one object: a provider could read either")
    return out


def _no_constant(name: str) -> Any:
    raise Refused(f"{name} is not JSON: refused")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999: JSON's syntax, but no number a provider reads alike
        raise Refused(f"the number {text[:40]} is past what a double holds: refused")
    return value


def parse_strict(body: bytes) -> Any:
    """The body as one reading only: UTF-8 with no BOM, each key once in its object, no NaN or
    Infinity (Python's reader takes both, and UTF-16 too, where a provider's may not)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("the request body is not UTF-8") from None
    if text.startswith("\ufeff"):
        raise Refused("the request body starts with a byte order mark")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise Refused("the request body is nested past the gateway's parser") from None
    except ValueError as exc:
        if isinstance(exc, Refused):
            raise
        raise Refused("the request body is not JSON") from None


def output_limit_field(api: Api, request: dict[str, Any]) -> str | None:
    names = OUTPUT_LIMIT_FIELDS.get(api)
    return next((name for name in names if name in request), names[0]) if names else None


def output_floor(api: Api, request: dict[str, Any]) -> int:
    """The output limit a request needs at least: a Messages request's max_tokens must exceed its
    thinking budget (the API refuses it otherwise)."""
    thinking = request.get("thinking") if api == "messages" else None
    if not isinstance(thinking, dict) or "budget_tokens" not in thinking:
        return 0
    budget = thinking["budget_tokens"]
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
        raise Refused(f"thinking.budget_tokens {str(budget)[:40]!r} is not a whole number of tokens: refused")
    return budget


# The most input tokens one image can cost. Anthropic scales an image to at most about 1.15
# megapixels, w*h/750 tokens (about 1,600), on most Claude models; Opus 4.7 and later take up to
# 2,576 px on the long edge, about 4,784 tokens (measured by others, not in Anthropic's pages): one
# bound for every Claude model, the larger. OpenAI prices by model (its vision guide, "Calculating
# costs"): tile models pay a base plus a price per 512-px tile of the image fitted in 2048x2048 and
# then to a shortest side of 768, at most 8 tiles (a 2048x800 image is 1966x768: 4x2); patch models
# a multiplier on at most 1,536 32-px patches, and `detail: "original"` (which Codex sends) up to
# 10,000 patches. Only the exact models below (a date suffix allowed) have a figure of their own:
# any other, and any image sent at "original" detail, is reserved at the dearest. No kept library
# has these per model (litellm's image count uses gpt-4o's 85 + 170 a tile for every model).
ANTHROPIC_IMAGE_TOKENS = 4_800
MAX_TILES, MAX_PATCHES = 8, 1_536
OPENAI_IMAGE_TOKENS = {
    "gpt-4o-mini": 2_833 + MAX_TILES * 5_667,
    "gpt-4.1-mini": math.ceil(MAX_PATCHES * 1.62), "gpt-4.1-nano": math.ceil(MAX_PATCHES * 2.46),
    "gpt-5-mini": math.ceil(MAX_PATCHES * 1.62), "gpt-5-nano": math.ceil(MAX_PATCHES * 2.46),
    "o4-mini": math.ceil(MAX_PATCHES * 1.72),
    "gpt-4o": 85 + MAX_TILES * 170, "gpt-4.1": 85 + MAX_TILES * 170, "gpt-4.5-preview": 85 + MAX_TILES * 170,
    "gpt-5": 70 + MAX_TILES * 140, "o1": 75 + MAX_TILES * 150, "o3": 75 + MAX_TILES * 150,
    "computer-use-preview": 65 + MAX_TILES * 129,
}
DEAREST_IMAGE_TOKENS = max(max(OPENAI_IMAGE_TOKENS.values()), math.ceil(10_000 * 2.46))
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def image_token_bound(api: Api, model: Any, detail: Any = None) -> int:
    """The most input tokens one inline image can cost the request's model at `detail`."""
    name = _DATED.sub("", str(model or "").rsplit("/", 1)[-1].lower())  # an OpenRouter id names its vendor first
    if api == "messages" or name.startswith("claude"):
        return ANTHROPIC_IMAGE_TOKENS
    if detail == "original":
        return DEAREST_IMAGE_TOKENS
    return OPENAI_IMAGE_TOKENS.get(name, DEAREST_IMAGE_TOKENS)


def input_bound(api: Api, request: dict[str, Any], body_bytes: int) -> int:
    """The most input tokens the request can cost: a token of text covers a byte at least, and an
    image, inline in a few bytes, costs up to its model's `image_token_bound` at its detail."""
    model = request.get("model")
    return body_bytes + sum(image_token_bound(api, model, detail) for detail in image_details(request))


def image_details(value: Any) -> list[Any]:
    """Each image part anywhere in the request, as its `detail` (None where it gives none; walked
    without recursion: a body may nest deep)."""
    found, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if item.get("type") in ("image", "input_image", "image_url"):
                inner = item.get("image_url")
                found.append(item.get("detail", inner.get("detail") if isinstance(inner, dict) else None))
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def check_body(api: Api, body: bytes, model: str | None) -> dict[str, Any]:
    """The request as JSON, if the gateway may forward it: the run's model, no provider-side state
    or tools. `model` is the run's model as the API names it (None: not checked)."""
    request = parse_strict(body)
    if not isinstance(request, dict):
        raise Refused("the request body is not a JSON object")
    for key, allowed in PRICED_OPTIONS.items():
        if request.get(key) not in allowed:
            raise Refused(f"{key} {str(request.get(key))[:40]!r} changes what a reply costs beyond the run's price: refused")
    if api == "chat" and "max_tokens" in request and "max_completion_tokens" in request:
        raise Refused("max_tokens and max_completion_tokens both given: one output limit, please")
    if model is not None and request.get("model") != model:
        raise Refused(f"model {str(request.get('model'))[:100]!r} is not this run's model ({model}): refused")
    if api == "responses" and request.get("store") is not False:
        raise Refused("a Responses request must set store: false (the gateway forwards no stored response)")
    if api != "responses" and request.get("store") not in (None, False):
        raise Refused("store: stored responses are refused")
    if not isinstance(request.get("tools", []), list):
        raise Refused("tools is not a list")
    check_allowed(api, request)  # every field, tool, item and part one the run's CLI sends
    return request


def run_model_name(model: str | None) -> str | None:
    """The run's `provider/model` as the API names it (`openai/gpt-5` -> `gpt-5`; OpenRouter keeps
    the rest: `openrouter/anthropic/x` -> `anthropic/x`)."""
    if not model:
        return None
    return model.split("/", 1)[1] if "/" in model else model


@dataclass(frozen=True)
class Decision:
    request: dict[str, Any]
    headers: list[tuple[str, str]]
    dropped_betas: list[str]
