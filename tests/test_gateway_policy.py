"""The gateway forwards only what the run's agent needs (gateway/policy.py), tried as a hostile agent
would: other endpoints and spellings of them, other models, provider-side state and tools, huge
bodies, and many requests at once against a cap. Each refused request is logged and never reaches
the model; a reply without usage is still counted; the tool calls a reply asks for are recorded."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from pytest_webbench.gateway.meter import ModelLog, Price, TrialMeter, read_model_log
from pytest_webbench.gateway.routes import GatewayRoute, GatewayRoutes
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from model_endpoint import ModelEndpoint  # noqa: E402

TOKEN = "wbt-policy-token"
REAL_KEY = "sk-real-key-policy"
INSTRUCTION = "Your browser session id is `S1`: pass it. Start at http://shop.localhost:1/. Find the cheapest mug."
CODEX_BODY = {"model": "gpt-test", "stream": True, "store": False, "input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": INSTRUCTION}]}]}


@pytest.fixture(scope="module")
def stack():
    loop = ServiceLoop()
    endpoint = ModelEndpoint()
    upstream = loop.serve(endpoint.app, "scripted model")
    routes = GatewayRoutes()
    gateway = loop.serve(routes.app, "gateway")
    yield loop, endpoint, upstream, routes, gateway
    loop.run(routes.aclose())
    loop.close()


def _codex_route(routes, upstream: str, tmp_path: Path, name: str, price=None, **meter) -> GatewayRoute:
    """A route as a Codex run has it: the Responses protocol, the run's model, OpenAI's /v1 base."""
    route = GatewayRoute(trial=f"t-{name}-{tmp_path.name}", token=TOKEN, upstream=upstream + "/v1",
                         auth={"authorization": f"Bearer {REAL_KEY}"}, meter=TrialMeter(trial="t", price=price, **meter),
                         log=ModelLog(tmp_path / f"{name}.jsonl"), api="responses", model="gpt-test")
    routes.add(route)
    return route


def _raw(gateway: str, target: bytes, body: bytes = b"{}", method: bytes = b"POST", extra: bytes = b"") -> bytes:
    """A request as the agent's own socket sends it: the path exactly as written (httpx would tidy it)."""
    host, port = gateway.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (method, target, TOKEN.encode(), extra, len(body), body))
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize("path", [
    b"/v1/models", b"/files", b"/responses/resp_1", b"/responses/../files", b"/%2e%2e/files", b"/responses%2f..%2ffiles",
    b"//responses", b"/./responses", b"/responses/", b"/chat/completions", b"/v1/messages", b"/RESPONSES",
    b"/responses\\..\\files", b"/responses?beta=true", b"/responses?x=%00",
])
def test_only_the_protocol_s_endpoint_is_forwarded(stack, tmp_path, path):
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "paths")
    before = len(endpoint.model.requests)
    head = _raw(gateway, b"/gateway/" + route.trial.encode() + path, json.dumps(CODEX_BODY).encode())
    status = int(head.split(b" ", 2)[1])
    assert 400 <= status < 500, head[:300]
    assert len(endpoint.model.requests) == before  # nothing reached the model
    [line] = read_model_log(tmp_path / "paths.jsonl")
    assert line.decision == "refused_request" and line.status == status


def test_the_protocol_s_own_request_is_forwarded(stack, tmp_path):
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "ok")
    head = _raw(gateway, b"/gateway/" + route.trial.encode() + b"/responses", json.dumps(CODEX_BODY).encode())
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    [line] = read_model_log(tmp_path / "ok.jsonl")
    assert line.decision == "forwarded" and line.usage_reported


@pytest.mark.parametrize("change, why", [
    ({"model": "o1-pro"}, "not this run's model"),
    ({"model": None}, "not this run's model"),
    ({"background": True}, "background"),
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"store": True}, "store"),
    ({"store": None}, "store"),
    ({"tools": [{"type": "web_search"}]}, "web_search"),
    ({"tools": [{"type": "web_search_preview"}]}, "web_search"),
    ({"tools": [{"type": "mcp", "server_url": "https://evil.example/mcp"}]}, "mcp"),
    ({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}, "code_interpreter"),
    ({"tools": [{"type": "file_search"}]}, "file_search"),
    ({"tools": 5}, "tools is not a list"),  # raised TypeError: a 500, not the API's own refusal
])
def test_another_model_and_provider_side_state_or_tools_are_refused(stack, tmp_path, change, why):
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "body")
    before = len(endpoint.model.requests)
    body = {**CODEX_BODY, **change}
    body = {k: v for k, v in body.items() if v is not None}
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/responses", json=body, timeout=20,
                       headers={"authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 400 and why in reply.json()["error"]["message"], reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"  # the API's own shape: the CLI reports it
    assert len(endpoint.model.requests) == before


def test_a_body_nested_past_the_parser_is_refused_as_the_api_refuses(stack, tmp_path):
    """It raised RecursionError: a 500, which a CLI may take for the provider's failure."""
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "deep")
    before = len(endpoint.model.requests)
    body = json.dumps(CODEX_BODY)[:-1] + ', "input": ' + "[" * 5000 + "]" * 5000 + "}"
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/responses", content=body.encode(), timeout=20,
                       headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"})
    assert reply.status_code == 400 and "nested past" in reply.json()["error"]["message"], reply.text
    assert len(endpoint.model.requests) == before


def test_a_body_over_8_mb_is_413_and_never_forwarded(stack, tmp_path):
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "big")
    before = len(endpoint.model.requests)
    body = json.dumps({**CODEX_BODY, "padding": "x" * (8 * 1024 * 1024)}).encode()
    head = _raw(gateway, b"/gateway/" + route.trial.encode() + b"/responses", body)
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert len(endpoint.model.requests) == before
    [line] = read_model_log(tmp_path / "big.jsonl")
    assert line.decision == "refused_request" and line.status == 413


def test_twenty_concurrent_requests_overshoot_the_cap_by_one_request_at_most(stack, tmp_path):
    """A cap checked before each request and counted after it lets concurrent requests all pass
    together; one request of a trial in flight at a time lets at most one past the cap."""
    loop, endpoint, upstream, routes, gateway = stack
    # each scripted turn: 1200 input and 40 output tokens; at $1 per million each, $0.00124 a turn
    route = _codex_route(routes, upstream, tmp_path, "cap", price=Price(1e-6, 1e-6), spend_limit_usd=0.002)

    def post(_):
        return httpx.post(f"{gateway}/gateway/{route.trial}/responses", json=CODEX_BODY, timeout=60,
                          headers={"authorization": f"Bearer {TOKEN}"}).status_code

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(post, range(20)))
    forwarded = statuses.count(200)
    assert forwarded == 2 and statuses.count(429) == 18, statuses  # $0.00124 < $0.002, then $0.00248: over
    assert route.meter.cost_usd <= 0.002 + 0.00124 + 1e-12  # past the cap by at most one request


def test_a_reply_without_usage_is_charged_its_worst_case_and_flagged(stack, tmp_path):
    loop, endpoint, upstream, routes, gateway = stack

    async def silent(request):
        async def events():
            yield b'data: {"type": "response.created"}\n\n'
            yield b'data: {"type": "response.completed", "response": {"output": []}}\n\n'
        return StreamingResponse(events(), media_type="text/event-stream")

    bare = loop.serve(Starlette(routes=[Route("/v1/responses", silent, methods=["POST"])]), "usage-less model")
    route = _codex_route(routes, bare, tmp_path, "nousage", price=Price(1e-6, 1e-6), spend_limit_usd=1.0)
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/responses", json=CODEX_BODY, timeout=20,
                       headers={"authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    [line] = read_model_log(tmp_path / "nousage.jsonl")
    assert not line.usage_reported and line.usage_estimated
    # the worst the request could cost: every byte an input token, and the output limit the gateway set
    # ($1.0 of room at $1e-6 a token, less the input: past the model's ceiling, so the ceiling)
    from pytest_webbench.gateway.meter import DEFAULT_OUTPUT_CEILING

    assert line.input_tokens == line.request_bytes > 0 and line.output_tokens == DEFAULT_OUTPUT_CEILING
    assert f"max_output_tokens None -> {DEFAULT_OUTPUT_CEILING}" in line.detail
    assert route.meter.cost_usd == pytest.approx((line.request_bytes + DEFAULT_OUTPUT_CEILING) * 1e-6)
    assert route.meter.estimated_requests == 1


def test_the_tool_calls_a_reply_asks_for_are_the_log_s(stack, tmp_path):
    """The transcript of record: the model's tool calls as the gateway saw them pass, per protocol."""
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "calls")
    body = {**CODEX_BODY, "tools": [{"type": "namespace", "name": "mcp__browser", "tools": [
        {"type": "function", "name": "execute_playwright_code", "parameters": {}}]}]}
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/responses", json=body, timeout=20,
                       headers={"authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200
    [line] = read_model_log(tmp_path / "calls.jsonl")
    [call] = line.tool_calls
    assert call["name"] == "mcp__browser__execute_playwright_code"
    assert json.loads(call["arguments"]) == {"session_id": "S1", "code": "return await page.title()"}


@pytest.mark.parametrize("api, path, body, key_header", [
    ("messages", "v1/messages?beta=true", {"model": "claude-test", "stream": True, "max_tokens": 100, "tools": [
        {"name": "mcp__browser__execute_playwright_code", "input_schema": {}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]}]}, "x-api-key"),
    ("chat", "chat/completions", {"model": "chat-test", "stream": True, "stream_options": {"include_usage": True},
                                  "tools": [{"type": "function", "function": {"name": "mcp__browser__execute_playwright_code"}}],
                                  "messages": [{"role": "user", "content": INSTRUCTION}]}, "authorization"),
])
def test_the_tool_calls_of_messages_and_chat_replies_are_recorded_too(stack, tmp_path, api, path, body, key_header):
    loop, endpoint, upstream, routes, gateway = stack
    base = upstream if api == "messages" else upstream + "/v1"
    route = GatewayRoute(trial=f"t-{api}-{tmp_path.name}", token=TOKEN, upstream=base,
                         auth={key_header: REAL_KEY}, meter=TrialMeter(trial="t", price=None), log=ModelLog(tmp_path / "m.jsonl"),
                         api=api, model=body["model"])
    routes.add(route)
    headers = {"x-api-key": TOKEN} if key_header == "x-api-key" else {"authorization": f"Bearer {TOKEN}"}
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/{path}", json=body, timeout=20, headers=headers)
    assert reply.status_code == 200, reply.text
    [line] = read_model_log(tmp_path / "m.jsonl")
    [call] = line.tool_calls
    assert call["name"] == "mcp__browser__execute_playwright_code"
    assert json.loads(call["arguments"]) == {"session_id": "S1", "code": "return await page.title()"}


def test_a_stranger_s_request_is_refused_before_its_body_is_read(stack, tmp_path):
    loop, endpoint, upstream, routes, gateway = stack
    route = _codex_route(routes, upstream, tmp_path, "stranger")
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/responses", json=CODEX_BODY, timeout=20,
                       headers={"authorization": "Bearer wbt-someone-else"})
    assert reply.status_code == 401
    [line] = read_model_log(tmp_path / "stranger.jsonl")
    assert line.decision == "unauthorized" and line.request_bytes == 0


TEXT = {"type": "input_text", "text": "hi"}
MSG = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
CHAT_MSG = {"role": "user", "content": "hi"}
# (protocol, what the hostile agent adds to a body its CLI would send, where the refusal says it is)
BEYOND_THE_RUN = [
    ("responses", {"tools": [{"type": "local_shell"}]}, "tools[0].type"),
    ("responses", {"tools": [{"type": "shell", "environment": {"type": "container_auto"}}]}, "tools[0].type"),
    ("responses", {"tools": [{"type": "namespace", "name": "x", "tools": [{"type": "web_search"}]}]}, "tools[0].tools[0].type"),
    ("responses", {"tool_choice": {"type": "web_search_preview"}}, "tool_choice.type"),
    ("responses", {"tool_choice": "web_search"}, "tool_choice"),
    ("responses", {"input": [{"role": "user", "content": [TEXT, {"type": "input_image", "image_url": "https://evil.example/x?d=1"}]}]},
     "input[0].content[1].image_url"),
    ("responses", {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]}, "file_id"),
    ("responses", {"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "https://evil.example/f"}]}]},
     "input[0].content[0].type"),
    ("responses", {"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ("responses", {"input": [{"type": "function_call_output", "call_id": "c", "output": [
        {"type": "input_image", "image_url": "http://evil.example/i.png"}]}]}, "input[0].output[0].image_url"),
    ("responses", {"prompt": {"id": "pmpt_1"}}, "prompt"),
    ("responses", {"background": True}, "background"),
    ("responses", {"include": ["file_search_call.results"]}, "include[0]"),
    ("messages", {"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}, "tools[0].type"),
    ("messages", {"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools[0].type"),
    ("messages", {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://evil.example/i"}}]}]},
     "messages[0].content[0].source.type"),
    ("messages", {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": "f"}}]}]},
     "messages[0].content[0].type"),
    ("messages", {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://evil.example/i"}}]}]}]}, "content[0].source.type"),
    ("messages", {"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
     "system[0].cache_control.ttl"),
    ("messages", {"mcp_servers": [{"type": "url", "url": "https://evil.example/mcp", "name": "x"}]}, "mcp_servers"),
    ("messages", {"container": "c_1"}, "container"),
    ("messages", {"tool_choice": {"type": "web_search"}}, "tool_choice.type"),
    ("chat", {"models": ["openai/gpt-5", "anthropic/claude-opus-4"]}, "models"),
    ("chat", {"plugins": [{"id": "web"}]}, "plugins"),
    ("chat", {"web_search_options": {}}, "web_search_options"),
    ("chat", {"provider": {"order": ["x"]}}, "provider"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://evil.example/i"}}]}]},
     "messages[0].content[0].image_url"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]}, "messages[0].content[0].type"),
    ("chat", {"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ("chat", {"stream_options": {"include_usage": True, "include_obfuscation": True}}, "stream_options.include_obfuscation"),
    # keys below the types: a stored audio id, a URL beside a text, a file on an allowed item
    ("chat", {"messages": [CHAT_MSG, {"role": "assistant", "content": None, "audio": {"id": "audio_abc"}}]}, "messages[1].audio"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "image_url": {"url": "https://e.example"}}]}]},
     "messages[0].content[0].image_url"),
    ("responses", {"input": [{"role": "user", "content": [{**TEXT, "file_url": "https://evil.example/f"}]}]},
     "input[0].content[0].file_url"),
    ("responses", {"input": [{"type": "function_call_output", "call_id": "c", "output": "x", "file_id": "file-1"}]},
     "input[0].file_id"),
    ("messages", {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "source": {"type": "url", "url": "https://e"}}]}]},
     "messages[0].content[0].source"),
]
BASES = {
    "responses": ("responses", {**CODEX_BODY}),
    "messages": ("v1/messages", {"model": "gpt-test", "stream": True, "max_tokens": 100, "messages": [MSG]}),
    "chat": ("chat/completions", {"model": "gpt-test", "stream": True, "stream_options": {"include_usage": True},
                                  "messages": [CHAT_MSG]}),
}


@pytest.mark.parametrize("api, added, where", BEYOND_THE_RUN, ids=[f"{b[0]}-{b[2]}" for b in BEYOND_THE_RUN])
def test_what_the_run_s_cli_does_not_send_is_refused_by_name_and_never_forwarded(stack, tmp_path, api, added, where):
    """The body policy is an allowlist (allowed_requests.toml): a hosted tool, a part the provider
    fetches from a URL, a stored item or file, a fallback model or a web plugin is refused with a
    400 naming where it is, whatever the spelling, and nothing reaches the model."""
    loop, endpoint, upstream, routes, gateway = stack
    path, body = BASES[api]
    base = upstream if api == "messages" else upstream + "/v1"
    route = GatewayRoute(trial=f"t-allow-{api}-{tmp_path.name}", token=TOKEN, upstream=base, auth={},
                         meter=TrialMeter(trial="t", price=None), log=ModelLog(tmp_path / "allow.jsonl"),
                         api=api, model="gpt-test")
    routes.add(route)
    before = len(endpoint.model.requests)
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/{path}", json={**body, **added}, timeout=20,
                       headers={"authorization": f"Bearer {TOKEN}", "x-api-key": TOKEN})
    assert reply.status_code == 400, reply.text
    message = reply.json()["error"]["message"]
    assert where in message and "is not what this run's CLI sends" in message, message
    assert len(endpoint.model.requests) == before
    [line] = read_model_log(tmp_path / "allow.jsonl")
    assert line.decision == "refused_request" and where in line.detail


def test_the_allowlist_takes_the_cli_s_own_images_inline():
    """A screenshot the browser tools return goes back to the model inline (a data: URL, base64):
    allowed in every protocol, as the CLIs send it to a real model."""
    from pytest_webbench.gateway.allowlist import check_allowed

    png = "data:image/png;base64,iVBORw0KGgo="
    check_allowed("responses", {**CODEX_BODY, "input": [{"type": "function_call_output", "call_id": "c", "output": [
        {"type": "input_text", "text": "shot"}, {"type": "input_image", "image_url": png}]}]})
    check_allowed("messages", {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
        "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}]})
    check_allowed("chat", {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": png}}]}]})
