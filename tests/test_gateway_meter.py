"""The gateway's meter (gateway/meter.py, protocols.py), tried with a hostile model behind it: every
way a reply can end is counted (each protocol's terminal events, a stream cut off, an error event),
a count that cannot be read is the trial's error and charged at its worst, and the spend cap holds
by construction however large the replies the provider reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from pytest_webbench.gateway.meter import ModelLog, Price, TrialMeter, read_model_log
from pytest_webbench.gateway.routes import GatewayRoute, GatewayRoutes
from pytest_webbench.service_loop import ServiceLoop

TOKEN = "wbt-meter-token"
# each API's path as its CLI posts it under the gateway's route, and where the provider serves it
PATHS = {"responses": "responses", "messages": "v1/messages", "chat": "chat/completions"}
SERVED = {"responses": "/v1/responses", "messages": "/v1/messages", "chat": "/v1/chat/completions"}
BODIES = {
    "responses": {"model": "m", "stream": True, "store": False, "input": "hi"},
    "messages": {"model": "m", "stream": True, "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]},
    "chat": {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": "hi"}]},
}
PRICE = Price(input=1e-6, output=1e-5)


class Hostile:
    """A model API whose next replies are set by the test: a list of SSE events, or a whole body.
    Each request it receives is kept, so a test can see the output limit the gateway sent."""

    def __init__(self) -> None:
        self.events: list[dict] | None = None
        self.whole: dict | None = None
        self.requests: list[dict] = []
        self.handle_override = None  # a test's own answer, for one request

    async def handle(self, request: Request):
        if self.handle_override is not None:
            return await self.handle_override(request)
        self.requests.append(json.loads(await request.body()))
        if self.whole is not None:
            return JSONResponse(self.whole)
        limit_of = self.requests[-1]
        events = [{**e} for e in self.events or []]

        async def stream():
            for event in events:
                text = json.dumps(event).replace('"LIMIT"', str(_limit(limit_of)))
                text = text.replace('"LIMIT1"', str(_limit(limit_of) + 1))
                yield f"data: {text}\n\n".encode()
        return StreamingResponse(stream(), media_type="text/event-stream")


def _limit(request: dict) -> int:
    return request.get("max_output_tokens") or request.get("max_tokens") or request.get("max_completion_tokens") or 0


@pytest.fixture(scope="module")
def stack():
    loop = ServiceLoop()
    hostile = Hostile()
    app = Starlette(routes=[Route(path, hostile.handle, methods=["POST"]) for path in [*SERVED.values(), "/v1/messages/count_tokens"]])
    upstream = loop.serve(app, "hostile model")
    routes = GatewayRoutes()
    gateway = loop.serve(routes.app, "gateway")
    yield loop, hostile, upstream, routes, gateway
    loop.run(routes.aclose())
    loop.close()


def _route(routes, upstream, tmp_path, api, name, model="m", **meter) -> GatewayRoute:
    base = upstream if api == "messages" else upstream + "/v1"
    route = GatewayRoute(trial=f"t-{name}-{tmp_path.name}", token=TOKEN, upstream=base, auth={},
                         meter=TrialMeter(trial="t", **{"price": PRICE, "spend_limit_usd": 100.0, **meter}),
                         log=ModelLog(tmp_path / f"{name}.jsonl"), api=api, model=model)
    routes.add(route)
    return route


def _post(gateway, route, api, body=None, content: bytes | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN, "content-type": "application/json"}
    if content is None:
        content = json.dumps(body if body is not None else BODIES[api]).encode()
    return httpx.post(f"{gateway}/gateway/{route.trial}/{PATHS[api]}", content=content, headers=headers, timeout=30)


# (api, the reply's events, the tokens metered (input, output), or None: charged its reservation)
ENDINGS = [
    ("responses", [{"type": "response.created"}, {"type": "response.incomplete", "response": {"usage": {
        "input_tokens": 30, "output_tokens": 5000, "output_tokens_details": {"reasoning_tokens": 4000}}}}], (30, 5000)),
    ("responses", [{"type": "response.created"}, {"type": "response.failed", "response": {"usage": {
        "input_tokens": 30, "output_tokens": 777}}}], (30, 777)),
    ("responses", [{"type": "response.created"}, {"type": "response.failed", "response": {"usage": None}}], None),
    ("responses", [{"type": "response.created"}, {"type": "error", "message": "overloaded"}], None),
    ("responses", [{"type": "response.created"}], None),  # cut off: no terminal event at all
    ("messages", [{"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}},
                  {"type": "message_delta", "usage": {"output_tokens": 4096}}, {"type": "message_stop"}], (30, 4096)),
    ("messages", [{"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}},
                  {"type": "error", "error": {"type": "overloaded_error"}}], None),  # its output never counted
    ("chat", [{"choices": [{"delta": {"content": "x"}}]}, {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}}],
     (30, 9)),
    ("chat", [{"choices": [{"delta": {"content": "x"}}]}], None),  # include_usage asked, never sent
]


@pytest.mark.parametrize("api, events, metered", ENDINGS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ENDINGS)])
def test_every_way_a_reply_ends_is_metered(stack, tmp_path, api, events, metered):
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = events, None
    route = _route(routes, upstream, tmp_path, api, "end")
    assert _post(gateway, route, api).status_code == 200
    [line] = read_model_log(tmp_path / "end.jsonl")
    sent = hostile.requests[-1]
    if metered is not None:
        assert (line.input_tokens, line.output_tokens, line.usage_estimated) == (*metered, False)
    else:  # unread: every byte of the request an input token, and the whole output limit it went with
        assert (line.input_tokens, line.output_tokens, line.usage_estimated) == (line.request_bytes, _limit(sent), True)
    assert route.meter.cost_usd == pytest.approx(PRICE.input * line.input_tokens + PRICE.output * line.output_tokens)
    assert route.meter.reserved_usd == pytest.approx(0) and not route.meter.faults


@pytest.mark.parametrize("api", list(PATHS))
def test_the_spend_cap_holds_by_construction_against_replies_as_large_as_allowed(stack, tmp_path, api):
    """The issue's attack: each reply ends `incomplete` at its output limit with a huge count. The
    gateway sets each request's limit to what the cap leaves, so the spend never passes the cap."""
    loop, hostile, upstream, routes, gateway = stack
    terminal = {"responses": [{"type": "response.incomplete", "response": {"usage": {"input_tokens": 10, "output_tokens": "LIMIT"}}}],
                "messages": [{"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}},
                             {"type": "message_delta", "usage": {"output_tokens": "LIMIT"}}],
                "chat": [{"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": "LIMIT"}}]}[api]
    hostile.events, hostile.whole = terminal, None
    route = _route(routes, upstream, tmp_path, api, "cap", spend_limit_usd=0.5)  # $0.5: 50,000 output tokens
    statuses = [_post(gateway, route, api).status_code for _ in range(8)]
    assert route.meter.cost_usd <= 0.5 + 1e-9, route.meter.cost_usd
    assert statuses[0] == 200 and statuses[-1] in (402, 429) and route.meter.refused >= 1
    assert _limit(hostile.requests[-1]) <= 50000  # the limit the gateway sent, never the request's own 64,000


@pytest.mark.parametrize("usage", [
    {"input_tokens": -5, "output_tokens": 10}, {"input_tokens": 5, "output_tokens": "10"}, {"input_tokens": 5, "output_tokens": 1.5},
    {"input_tokens": 5, "output_tokens": 10 ** 12}, "lots", {"input_tokens": 5, "output_tokens": True},
    {"input_tokens": 5, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 9}},
], ids=["negative", "string", "float", "absurd", "not-an-object", "bool", "part-over-whole"])
def test_a_count_that_cannot_be_read_is_a_fault_charged_at_its_worst(stack, tmp_path, usage):
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "response.completed", "response": {"usage": usage}}], None
    route = _route(routes, upstream, tmp_path, "responses", "bad")
    assert _post(gateway, route, "responses").status_code == 200  # the gateway stays up, the agent gets its reply
    [line] = read_model_log(tmp_path / "bad.jsonl")
    assert line.usage_estimated and line.output_tokens == _limit(hostile.requests[-1]) > 0
    assert "could not be read" in line.detail and len(route.meter.faults) == 1


def test_a_whole_reply_s_usage_is_read_too(stack, tmp_path):
    loop, hostile, upstream, routes, gateway = stack
    hostile.whole = {"output": [], "usage": {"input_tokens": 12, "output_tokens": 34}}
    route = _route(routes, upstream, tmp_path, "responses", "whole")
    assert _post(gateway, route, "responses", {**BODIES["responses"], "stream": False}).status_code == 200
    [line] = read_model_log(tmp_path / "whole.jsonl")
    assert (line.input_tokens, line.output_tokens, line.usage_estimated) == (12, 34, False)


@pytest.mark.parametrize("api, body_or_bytes, said", [
    ("responses", {**BODIES["responses"], "service_tier": "priority"}, "service_tier"),
    ("responses", {**BODIES["responses"], "prompt_cache_retention": "24h"}, "prompt_cache_retention"),
    ("chat", {**BODIES["chat"], "n": 4}, "n '4' changes what a reply costs"),
    ("messages", {**BODIES["messages"], "service_tier": "priority"}, "service_tier"),
    ("chat", {**BODIES["chat"], "max_tokens": 10, "max_completion_tokens": 10}, "both given"),
    ("responses", b'{"model": "m", "store": false, "store": true, "input": "hi"}', "appears twice"),
    ("responses", b'{"model": "m", "store": false, "input": "hi", "temperature": NaN}', "NaN is not JSON"),
    ("responses", b'\xef\xbb\xbf{"model": "m", "store": false, "input": "hi"}', "byte order mark"),
    ("responses", '{"model": "m", "store": false, "input": "hi"}'.encode("utf-16"), "not UTF-8"),
], ids=["tier", "cache-retention", "many-choices", "messages-tier", "two-limits", "key-twice", "nan", "bom", "utf-16"])
def test_what_changes_the_price_or_reads_two_ways_is_refused_unsent(stack, tmp_path, api, body_or_bytes, said):
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [], None
    route = _route(routes, upstream, tmp_path, api, "odd")
    before = len(hostile.requests)
    if isinstance(body_or_bytes, bytes):
        reply = _post(gateway, route, api, content=body_or_bytes)
    else:
        reply = _post(gateway, route, api, body_or_bytes)
    assert reply.status_code == 400 and said in reply.text
    assert len(hostile.requests) == before


def test_a_thinking_budget_the_cap_cannot_hold_is_refused_not_cut(stack, tmp_path):
    """Lowering max_tokens under a Messages request's thinking budget would make the provider refuse
    it: the gateway refuses it at the cap instead."""
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [], None
    route = _route(routes, upstream, tmp_path, "messages", "think", spend_limit_usd=0.05)  # 5,000 output tokens
    before = len(hostile.requests)
    body = {**BODIES["messages"], "thinking": {"type": "enabled", "budget_tokens": 8000}}
    assert _post(gateway, route, "messages", body).status_code == 402 and len(hostile.requests) == before


def test_an_image_is_reserved_at_what_it_can_cost_not_its_bytes(stack, tmp_path):
    """A small PNG inline is a few bytes but up to ~1,600 input tokens (Anthropic): the reservation
    counts every image at its protocol's bound, so many small images cannot pass the cap."""
    from pytest_webbench.gateway.policy import input_bound

    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    request = {**BODIES["messages"], "messages": [{"role": "user", "content": [image] * 100}]}
    assert input_bound("messages", request, 5000) == 5000 + 100 * 4800
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [], None
    # $0.2 left at $3 per million input: 480,000 tokens of images cannot fit, their bytes would have
    route = _route(routes, upstream, tmp_path, "messages", "images", price=Price(3e-6, 1.5e-5), spend_limit_usd=0.2)
    before = len(hostile.requests)
    assert _post(gateway, route, "messages", request).status_code == 402 and len(hostile.requests) == before


@pytest.mark.parametrize("api, model, detail, tokens", [
    # OpenAI's vision guide: tile models pay a base and a price per 512-px tile, at most 8 tiles (a
    # 2048x800 image is fitted to 1966x768: 4x2); patch models a multiplier on at most 1,536 patches
    ("responses", "gpt-4o-mini", None, 2833 + 8 * 5667), ("chat", "openai/gpt-4o-mini-2024-07-18", "high", 48_169),
    ("responses", "gpt-4o", "high", 85 + 8 * 170), ("responses", "gpt-4o-2024-08-06", None, 1445),
    ("responses", "gpt-5", None, 70 + 8 * 140), ("responses", "o3", None, 75 + 8 * 150),
    ("responses", "gpt-5-mini", None, 2489), ("responses", "gpt-4.1-nano", None, 3779), ("responses", "o4-mini", None, 2642),
    # Claude's largest images (Opus 4.7 and later: 2,576 px on the long edge, ~4,784 tokens), for every Claude model
    ("messages", "claude-sonnet-4-5", None, 4800), ("chat", "anthropic/claude-opus-4.7", None, 4800),
    # found by a hostile review: a model only prefixed by a known one (gpt-5.4-mini is a patch model,
    # not gpt-5), one with no figure here, and an image at "original" detail (up to 10,000 patches)
    # are each reserved at the dearest
    ("responses", "gpt-5.4-mini", None, 48_169), ("chat", "google/gemini-2.5-pro", None, 48_169),
    ("responses", "gpt-5", "original", 48_169),
])
def test_an_image_is_bounded_at_its_model_s_published_most(api, model, detail, tokens):
    from pytest_webbench.gateway.policy import image_token_bound, input_bound

    assert image_token_bound(api, model, detail) == tokens
    part = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", **({"detail": detail} if detail else {})}
    assert input_bound(api, {"model": model, "input": [{"role": "user", "content": [part, part]}]}, 100) == 100 + 2 * tokens


def test_a_model_that_multiplies_image_tokens_cannot_pass_the_cap_with_images(stack, tmp_path):
    """gpt-4o-mini bills an image up to 48,169 tokens: ten tiny images fit a gpt-4o bound of 1,445
    each under $0.2 at $0.15 a million, and cannot fit gpt-4o-mini's, so nothing is sent."""
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 5}}}], None
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    price = Price(1.5e-7, 6e-7)
    for model, forwarded in (("gpt-4o", True), ("gpt-4o-mini", False)):
        body = {**BODIES["responses"], "model": model, "input": [{"role": "user", "content": [image] * 10}]}
        route = _route(routes, upstream, tmp_path, "responses", f"img-{model}", model=model, price=price, spend_limit_usd=0.02)
        before = len(hostile.requests)
        status = _post(gateway, route, "responses", body).status_code
        assert (status == 200, len(hostile.requests) > before) == (forwarded, forwarded), (model, status)


@pytest.mark.parametrize("api", list(PATHS))
def test_more_output_than_the_limit_sent_is_the_provider_s_fault(stack, tmp_path, api):
    """A count past the output limit the request went with is wrong: the trial is charged what was
    reported (more than its reservation) and errors on the fault, never settles as if normal."""
    loop, hostile, upstream, routes, gateway = stack
    over = {"responses": [{"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": "LIMIT1"}}}],
            "messages": [{"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}},
                         {"type": "message_delta", "usage": {"output_tokens": "LIMIT1"}}, {"type": "message_stop"}],
            "chat": [{"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": "LIMIT1"}}]}[api]
    hostile.events, hostile.whole = over, None
    route = _route(routes, upstream, tmp_path, api, "over", spend_limit_usd=0.5)
    assert _post(gateway, route, api).status_code == 200
    [line] = read_model_log(tmp_path / "over.jsonl")
    limit = _limit(hostile.requests[-1])
    assert line.output_tokens == limit + 1 and route.meter.faults == [
        f"the model API reported {limit + 1} output tokens for a request limited to {limit}"]
    assert route.meter.cost_usd == pytest.approx(PRICE.input * line.input_tokens + PRICE.output * (limit + 1))


@pytest.mark.parametrize("api", list(PATHS))
def test_a_count_that_goes_down_within_a_reply_is_a_fault_charged_at_its_worst(stack, tmp_path, api):
    """Found by a hostile review: a provider's 500,000-token count followed by a count of 1 was
    metered as 1. Counts are cumulative within a reply: one going down is charged the worst and
    errors the trial."""
    loop, hostile, upstream, routes, gateway = stack
    events = {"responses": [{"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 500}}},
                            {"type": "response.completed", "response": {"usage": {"input_tokens": 10, "output_tokens": 1}}}],
              "messages": [{"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}},
                           {"type": "message_delta", "usage": {"output_tokens": 500}},
                           {"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}},
                           {"type": "message_stop"}],
              "chat": [{"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 500}},
                       {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 1}}]}[api]
    hostile.events, hostile.whole = events, None
    route = _route(routes, upstream, tmp_path, api, "down")
    assert _post(gateway, route, api).status_code == 200
    [line] = read_model_log(tmp_path / "down.jsonl")
    assert line.usage_estimated and line.output_tokens == _limit(hostile.requests[-1]) >= 500
    assert len(route.meter.faults) == 1 and "went down" in route.meter.faults[0]


def test_more_input_than_the_request_s_bound_is_the_provider_s_fault(stack, tmp_path):
    """The cap rests on a bound of the input (a token a byte at least, an image at its model's
    most): a count past it means the bound did not hold, and the trial errors on it."""
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "response.completed", "response": {"usage": {"input_tokens": 10 ** 6,
                                                                                            "output_tokens": 5}}}], None
    route = _route(routes, upstream, tmp_path, "responses", "inputs")
    assert _post(gateway, route, "responses").status_code == 200
    [line] = read_model_log(tmp_path / "inputs.jsonl")
    assert line.input_tokens == 10 ** 6 and route.meter.faults and "input tokens for a request bounded at" in route.meter.faults[0]


def test_a_request_the_provider_refuses_for_its_own_body_is_no_evidence_against_the_harness(stack, tmp_path):
    """A 400 the agent's body brings about (an output limit under the model's minimum, a prompt past
    its context) must not let it put its own crash on the harness; a 429 or a 5xx is the provider's."""
    loop, hostile, upstream, routes, gateway = stack
    for status, counted in ((400, 0), (422, 0), (429, 1), (503, 1)):
        hostile.events, hostile.whole = None, {"error": {"message": "no"}}
        route = _route(routes, upstream, tmp_path, "responses", f"status{status}")

        async def reply(request, status=status):
            hostile.requests.append(json.loads(await request.body()))
            return JSONResponse({"error": {"message": "no"}}, status_code=status)

        hostile.handle_override = reply
        try:
            assert _post(gateway, route, "responses").status_code == status
        finally:
            hostile.handle_override = None
        assert route.meter.provider_failures == counted, status


def test_a_lone_surrogate_in_a_rewritten_request_neither_crashes_nor_holds_its_reservation(stack, tmp_path):
    """A Node CLI sends a lone surrogate's escape for page text cut mid-emoji: the request is
    forwarded (its output limit rewritten) and its reservation settled, never a 500 and a leak."""
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 5}}}], None
    route = _route(routes, upstream, tmp_path, "responses", "surrogate")
    body = b'{"model": "m", "stream": true, "store": false, "input": "cut \\ud83d here"}'
    assert _post(gateway, route, "responses", content=body).status_code == 200
    assert hostile.requests[-1]["input"] == "cut \ud83d here" and route.meter.reserved_usd == pytest.approx(0)


def test_counting_tokens_is_free_and_reserves_nothing(stack, tmp_path):
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = None, {"input_tokens": 1234}
    route = _route(routes, upstream, tmp_path, "messages", "count", spend_limit_usd=0.001)  # too little for any reply
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/v1/messages/count_tokens", json={"model": "m", "messages": [
        {"role": "user", "content": "hi"}]}, headers={"x-api-key": TOKEN}, timeout=30)
    assert reply.status_code == 200 and route.meter.cost_usd == 0 and route.meter.reserved_usd == 0
    assert "max_tokens" not in hostile.requests[-1]


def test_chat_s_cache_writes_are_metered_and_an_hour_s_cache_refused(stack, tmp_path):
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 10,
                                                              "prompt_tokens_details": {"cache_write_tokens": 800}}}], None
    route = _route(routes, upstream, tmp_path, "chat", "cachew", price=Price(3e-6, 1.5e-5, cache_write=3.75e-6))
    assert _post(gateway, route, "chat").status_code == 200 and not route.meter.faults
    assert route.meter.cost_usd == pytest.approx(200 * 3e-6 + 800 * 3.75e-6 + 10 * 1.5e-5)
    hour = {**BODIES["chat"], "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    refused = _post(gateway, route, "chat", hour)
    assert refused.status_code == 400 and "cache_control.ttl" in refused.text


@pytest.mark.parametrize("content, said", [
    (b'{"model": "m", "store": false, "input": "hi", "temperature": 1e999}', "past what a double holds"),
    (b'{"model": "m", "max_tokens": 100, "messages": [], "thinking": {"type": "enabled", "budget_tokens": 5000.0}}',
     "not a whole number"),
])
def test_numbers_a_provider_would_read_otherwise_are_refused(stack, tmp_path, content, said):
    loop, hostile, upstream, routes, gateway = stack
    api = "messages" if b"thinking" in content else "responses"
    route = _route(routes, upstream, tmp_path, api, "numbers")
    before = len(hostile.requests)
    reply = _post(gateway, route, api, content=content)
    assert reply.status_code == 400 and said in reply.text and len(hostile.requests) == before


def test_an_unreachable_provider_after_a_rewritten_limit_is_a_logged_502(stack, tmp_path):
    """The note of a rewritten output limit and the upstream's error go in one line (they once met
    as two values of one field: a 500, no line, and the reservation kept)."""
    import socket

    loop, hostile, upstream, routes, gateway = stack
    with socket.socket() as held:  # bound, never listening: refused, and no other server can take the port meanwhile
        held.bind(("127.0.0.1", 0))
        route = _route(routes, f"http://127.0.0.1:{held.getsockname()[1]}", tmp_path, "responses", "dead")
        assert _post(gateway, route, "responses").status_code == 502
    assert loop.run(routes.idle(route.trial, 20))  # the 502 goes out before the route has released its reservation
    [line] = read_model_log(tmp_path / "dead.jsonl")
    assert line.decision == "upstream_error" and "max_output_tokens None ->" in line.detail and "ClientConnector" in line.detail
    assert route.meter.reserved_usd == pytest.approx(0) and route.meter.provider_failures == 1


def test_a_trial_holds_a_bounded_number_of_request_bodies_at_once(stack, tmp_path):
    """Twelve requests of one trial whose bodies come slowly: at most MAX_OPEN_BODIES are being read
    at once; the rest wait unread (their bytes in the kernel's socket buffers, not the harness's)."""
    import asyncio

    from pytest_webbench.gateway.routes import MAX_OPEN_BODIES

    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "response.completed", "response": {"usage": {"input_tokens": 1, "output_tokens": 1}}}], None
    route = _route(routes, upstream, tmp_path, "responses", "bodies")
    body = json.dumps(BODIES["responses"]).encode()

    async def scenario() -> int:
        reading, most, release = 0, 0, asyncio.Event()

        async def one() -> None:
            parts = [{"type": "http.request", "body": body[:10], "more_body": True},
                     {"type": "http.request", "body": body[10:], "more_body": False}]

            async def receive():
                nonlocal reading, most
                if not parts:
                    await asyncio.Event().wait()  # the client stays: no disconnect
                part = parts.pop(0)
                if part["more_body"]:
                    reading += 1
                    most = max(most, reading)
                else:
                    await release.wait()  # the rest of the body comes only later
                    reading -= 1
                return part

            async def send(message) -> None:
                pass

            scope = {"type": "http", "method": "POST", "path": f"/gateway/{route.trial}/responses", "raw_path": None,
                     "query_string": b"", "headers": [(b"authorization", f"Bearer {TOKEN}".encode())]}
            await routes.app(scope, receive, send)

        tasks = [asyncio.ensure_future(one()) for _ in range(12)]
        for _ in range(10_000):  # (yields, not time) until the first readers have started...
            if reading >= MAX_OPEN_BODIES:
                break
            await asyncio.sleep(0)
        for _ in range(500):  # ...and then every other request had its chance to start too
            await asyncio.sleep(0)
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        return most

    most = loop.run(scenario(), timeout=90)
    assert most == MAX_OPEN_BODIES
    assert len(read_model_log(tmp_path / "bodies.jsonl")) == 12  # every request was answered in the end


def test_a_dropped_beta_is_said_beside_a_rewritten_limit(stack, tmp_path):
    """Both notes of one request reach its log line (the beta's once replaced the limit's)."""
    loop, hostile, upstream, routes, gateway = stack
    hostile.events, hostile.whole = [{"type": "message_delta", "usage": {"input_tokens": 5, "output_tokens": 5}}], None
    route = _route(routes, upstream, tmp_path, "messages", "beta", spend_limit_usd=0.1)  # 64,000 output tokens cannot fit
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/v1/messages", json=BODIES["messages"], timeout=30,
                       headers={"x-api-key": TOKEN, "anthropic-beta": "not-a-cli-beta-2099-01-01"})
    assert reply.status_code == 200
    [line] = read_model_log(tmp_path / "beta.jsonl")
    assert "max_tokens 64000 ->" in line.detail and "anthropic-beta not passed on: not-a-cli-beta-2099-01-01" in line.detail
