"""The model gateway against the scripted model endpoint over real HTTP, in each API's own
streaming protocol: usage metered as the endpoint sent it, the trial's token checked and the real
key sent on, caps refused in the shape each CLI stops on, and streams passed on as they arrive."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

from pytest_webbench.gateway.meter import ModelLog, Price, TrialMeter, read_model_log
from pytest_webbench.gateway.routes import GatewayRoute, GatewayRoutes
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from model_endpoint import TURN_USAGE, ModelEndpoint  # noqa: E402

TOKEN = "wbt-trial-token-3e1"
REAL_KEY = "sk-real-provider-key-9d2"
INSTRUCTION = "Your browser session id is `S1`: pass it. Start at http://shop.localhost:1/. Find the cheapest mug."
REQUESTS = {
    # api: (path under the base URL, request body, the header carrying the real key upstream)
    "responses": ("v1/responses", {"model": "gpt-test", "stream": True, "store": False, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": INSTRUCTION}]}]}, "authorization"),
    "messages": ("v1/messages", {"model": "claude-test", "stream": True, "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": INSTRUCTION}]}]}, "x-api-key"),
    "chat": ("v1/chat/completions", {"model": "chat-test", "stream": True, "stream_options": {"include_usage": True},
                                     "messages": [{"role": "user", "content": INSTRUCTION}]}, "authorization"),
}


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


def _route(routes, upstream, tmp_path, api, price=None, spend_limit=None, token_limit=None) -> GatewayRoute:
    header = REQUESTS[api][2]
    auth = {header: f"Bearer {REAL_KEY}" if header == "authorization" else REAL_KEY}
    route = GatewayRoute(trial=f"t-{api}-{tmp_path.name}", token=TOKEN, upstream=upstream, auth=auth,
                         meter=TrialMeter(trial="t", price=price, spend_limit_usd=spend_limit, token_limit=token_limit),
                         log=ModelLog(tmp_path / "model-log.jsonl"))
    routes.add(route)
    return route


def _post(gateway: str, route: GatewayRoute, api: str, key: str | None = TOKEN) -> httpx.Response:
    path, body, header = REQUESTS[api]
    headers = {} if key is None else ({"x-api-key": key} if header == "x-api-key" else {"authorization": f"Bearer {key}"})
    return httpx.post(f"{gateway}/gateway/{route.trial}/{path}", json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("api", list(REQUESTS))
def test_usage_is_metered_as_the_endpoint_sent_it_and_the_real_key_goes_on(stack, tmp_path, api):
    loop, endpoint, upstream, routes, gateway = stack
    route = _route(routes, upstream, tmp_path, api, price=Price(input=1e-6, output=1e-5, cached_input=1e-7))
    sent_before = len(endpoint.model.requests)
    reply = _post(gateway, route, api)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    assert "data:" in reply.text  # the stream, passed on whole
    [received] = endpoint.model.requests[sent_before:]
    assert received["key"] == REAL_KEY  # the provider got the real key; the agent only ever had its token
    usage = route.meter.usage
    assert (usage.input, usage.cached, usage.output) == (TURN_USAGE["input"], TURN_USAGE["cached"], TURN_USAGE["output"])
    # by hand: 900 fresh x $1e-6 + 300 cached x $1e-7 + 40 out x $1e-5
    assert route.meter.cost_usd == pytest.approx(900e-6 + 300e-7 + 40e-5)
    [line] = read_model_log(tmp_path / "model-log.jsonl")
    assert (line.api, line.decision, line.status, line.input_tokens, line.output_tokens) == (api, "forwarded", 200, 1200, 40)
    assert line.ttft_ms is not None and line.ttft_ms <= line.latency_ms and line.model == REQUESTS[api][1]["model"]
    log_text = (tmp_path / "model-log.jsonl").read_text()
    assert REAL_KEY not in log_text and TOKEN not in log_text


@pytest.mark.parametrize("api", list(REQUESTS))
def test_a_key_that_is_not_the_trial_s_is_refused_and_never_forwarded(stack, tmp_path, api):
    loop, endpoint, upstream, routes, gateway = stack
    route = _route(routes, upstream, tmp_path, api)
    other = _route(routes, upstream, tmp_path / "other", api)
    other.token = "wbt-another-trial"
    sent_before = len(endpoint.model.requests)
    for key in (None, "wbt-another-trial", REAL_KEY):
        reply = _post(gateway, route, api, key)
        assert reply.status_code == 401
    assert len(endpoint.model.requests) == sent_before
    assert [line.decision for line in read_model_log(tmp_path / "model-log.jsonl")] == ["unauthorized"] * 3


@pytest.mark.parametrize("api, status, shape", [
    ("responses", 429, {"type": "insufficient_quota", "code": "insufficient_quota"}),  # Codex stops at once
    ("chat", 429, {"type": "insufficient_quota", "code": "insufficient_quota"}),  # so does Pi
    ("messages", 402, {"type": "billing_error"}),  # Claude Code, with x-should-retry: false
])
def test_past_the_spend_cap_the_next_request_is_refused_in_the_api_s_own_shape(stack, tmp_path, api, status, shape):
    loop, endpoint, upstream, routes, gateway = stack
    # one turn costs 1200 x $1e-5 + 40 x $1e-4 = $0.016 (no cache price: cached input at the input price)
    route = _route(routes, upstream, tmp_path, api, price=Price(input=1e-5, output=1e-4), spend_limit=0.02)
    assert _post(gateway, route, api).status_code == 200  # $0.016: under the cap
    assert _post(gateway, route, api).status_code == 200  # $0.032: this one crossed it
    sent_before = len(endpoint.model.requests)
    refused = _post(gateway, route, api)
    assert refused.status_code == status and len(endpoint.model.requests) == sent_before
    error = refused.json()["error"]
    assert {k: error[k] for k in shape} == shape and "Budget has been exceeded!" in error["message"]
    if api == "messages":
        assert refused.headers["x-should-retry"] == "false"
    assert route.meter.refused == 1 and route.meter.cost_usd == pytest.approx(0.032)
    decisions = [line.decision for line in read_model_log(tmp_path / "model-log.jsonl")]
    assert decisions == ["forwarded", "forwarded", "refused"]


def test_a_stream_passes_through_as_it_arrives(stack, tmp_path):
    """The first event reaches the agent while the upstream still holds back the rest: nothing is
    buffered (a gateway that buffered would never deliver it, and this would time out)."""
    loop, *_, routes, gateway = stack
    release = asyncio.Event()

    async def slow(request):
        async def events():
            yield b'data: {"type": "response.created"}\n\n'
            await release.wait()
            yield b'data: {"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 1}}}\n\n'
        return StreamingResponse(events(), media_type="text/event-stream")

    held = loop.serve(Starlette(routes=[Route("/v1/responses", slow, methods=["POST"])]), "slow model")
    route = _route(routes, held, tmp_path, "responses")

    def client() -> list[bytes]:
        got = []
        with httpx.stream("POST", f"{gateway}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False},
                          headers={"authorization": f"Bearer {TOKEN}"}, timeout=20) as reply:
            for chunk in reply.iter_raw():
                got.append(chunk)
                if len(got) == 1:
                    loop.loop.call_soon_threadsafe(release.set)  # only now does the upstream send the rest
        return got

    chunks = client()
    assert b"response.created" in chunks[0] and b"response.completed" in b"".join(chunks)
    assert (route.meter.usage.input, route.meter.usage.output) == (5, 1)


def test_an_unreachable_model_api_is_a_502_and_a_logged_upstream_error(stack, tmp_path):
    loop, *_, routes, gateway = stack
    import socket

    with socket.socket() as held:  # bound, never listening: refused, and no other server can take the port meanwhile
        held.bind(("127.0.0.1", 0))
        route = _route(routes, f"http://127.0.0.1:{held.getsockname()[1]}", tmp_path, "responses")
        reply = _post(gateway, route, "responses")
    assert reply.status_code == 502 and "could not be reached" in reply.json()["error"]["message"]
    [line] = read_model_log(tmp_path / "model-log.jsonl")
    assert (line.decision, line.status, line.model) == ("upstream_error", 502, "gpt-test") and line.detail
    assert REAL_KEY not in (tmp_path / "model-log.jsonl").read_text()


def test_a_reply_the_agent_leaves_mid_stream_is_read_to_its_end_and_metered(stack, tmp_path):
    """The provider bills a reply whether or not its client stays: an agent that leaves mid-reply
    (killed at a timeout, or leaving on purpose) does not make the rest of its reply free."""
    loop, *_, routes, gateway = stack
    release, upstream_done = asyncio.Event(), threading.Event()

    async def rest_after_the_agent_left(request):
        async def events():
            try:
                yield b'data: {"type": "response.created"}\n\n'
                await release.wait()
                yield (b'data: {"type": "response.incomplete", "response": {"usage": {"input_tokens": 7, '
                       b'"output_tokens": 30000}}}\n\n')  # within the output limit the gateway set (32,000)
            finally:
                upstream_done.set()
        return StreamingResponse(events(), media_type="text/event-stream")

    held = loop.serve(Starlette(routes=[Route("/v1/responses", rest_after_the_agent_left, methods=["POST"])]), "held model")
    route = _route(routes, held, tmp_path, "responses", price=Price(input=1e-6, output=1e-5), spend_limit=100.0)
    with httpx.stream("POST", f"{gateway}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False},
                      headers={"authorization": f"Bearer {TOKEN}"}, timeout=20) as reply:
        assert b"response.created" in next(reply.iter_raw())
    loop.loop.call_soon_threadsafe(release.set)  # the rest comes only once the agent has gone
    assert upstream_done.wait(timeout=20)
    assert loop.run(routes.idle(route.trial, 20))
    [line] = _wait_for_log(tmp_path / "model-log.jsonl")
    assert (line.decision, line.input_tokens, line.output_tokens) == ("forwarded", 7, 30000)
    assert route.meter.cost_usd == pytest.approx(7e-6 + 0.3) and route.meter.reserved_usd == pytest.approx(0)


def test_a_whole_reply_the_agent_left_before_its_head_is_read_and_metered(stack, tmp_path):
    """A whole (unstreamed) reply has no head until the model is done: an agent that leaves while
    it works still pays for the work (it was logged 499 at $0 before)."""
    import socket

    loop, *_, routes, gateway = stack
    asked, answer = threading.Event(), asyncio.Event()
    whole = b'{"output": [], "usage": {"input_tokens": 11, "output_tokens": 30000}}'

    async def working(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        asked.set()
        await answer.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(whole), whole))
        await writer.drain()
        writer.close()

    server = loop.run(asyncio.start_server(working, "127.0.0.1", 0))
    route = _route(routes, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", tmp_path, "responses",
                   price=Price(input=1e-6, output=1e-5), spend_limit=100.0)
    host, port = gateway.removeprefix("http://").split(":")
    body = b'{"model": "gpt-test", "store": false}'
    with socket.create_connection((host, int(port)), timeout=10) as agent:
        agent.sendall(b"POST /gateway/%s/v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (route.trial.encode(), TOKEN.encode(), len(body), body))
        assert asked.wait(timeout=20), "the request never reached the model"
    loop.loop.call_soon_threadsafe(answer.set)  # the model finishes after its client has gone
    assert loop.run(routes.idle(route.trial, 20))
    [line] = _wait_for_log(tmp_path / "model-log.jsonl")
    assert (line.decision, line.model, line.input_tokens, line.output_tokens) == ("forwarded", "gpt-test", 11, 30000)
    assert route.meter.cost_usd == pytest.approx(11e-6 + 0.3) and not route.meter.faults
    loop.run(_close_server(server))


def test_only_the_protocol_s_headers_reach_the_model_api(stack, tmp_path):
    """The agent's own headers stay with the gateway (cookies, organisation and project, proxy
    credentials, forwarding and telemetry): the content type, the API's version and betas pass,
    anthropic-beta only with the tokens the pinned CLI sends, and the key is the harness's."""
    loop, *_, routes, gateway = stack
    seen = []

    async def echo(request):
        seen.append(request.headers)
        return StreamingResponse(iter([b'data: {"type": "response.created"}\n\n']), media_type="text/event-stream")

    upstream = loop.serve(Starlette(routes=[Route("/v1/responses", echo, methods=["POST"])]), "header echo")
    route = _route(routes, upstream, tmp_path, "responses")
    sent = {"authorization": f"Bearer {TOKEN}", "cookie": "session=abc", "openai-organization": "org-agent",
            "openai-project": "proj-agent", "proxy-authorization": "Basic eDp5", "x-forwarded-for": "6.6.6.6",
            "user-agent": "codex/1", "originator": "codex_exec", "x-note": "café".encode(),
            "anthropic-beta": "claude-code-20250219,files-api-2025-04-14", "anthropic-version": "2023-06-01"}
    reply = httpx.post(f"{gateway}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False}, timeout=20,
                       headers=sent)
    assert reply.status_code == 200
    [headers] = seen
    for name in ("cookie", "openai-organization", "openai-project", "proxy-authorization", "x-forwarded-for",
                 "user-agent", "originator", "x-note"):
        assert name not in headers, name
    assert headers["content-type"] == "application/json" and headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "claude-code-20250219"  # the files beta is not one the CLI sends
    assert headers["authorization"] == f"Bearer {REAL_KEY}" and TOKEN not in str(headers)
    [line] = read_model_log(tmp_path / "model-log.jsonl")
    assert "files-api-2025-04-14" in line.detail


def _fresh_gateway(loop, tmp_path, upstream: str) -> tuple[GatewayRoutes, str, GatewayRoute]:
    """A gateway of its own: its client reads proxies and certificates from the environment once."""
    routes = GatewayRoutes()
    url = loop.serve(routes.app, "gateway")
    return routes, url, _route(routes, upstream, tmp_path, "responses")


async def _sse_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: list) -> None:
    seen.append((await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0])
    event = b'data: {"type": "response.created"}\n\n'
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n"
                 b"connection: close\r\n\r\n%s" % (len(event), event))
    await writer.drain()
    writer.close()


def test_the_model_api_is_reached_through_the_environment_s_proxy(stack, tmp_path, monkeypatch):
    """Behind a proxy (HTTPS_PROXY, HTTP_PROXY) the gateway goes through it, as httpx did: the
    model's host here resolves nowhere, so only the proxy can have answered."""
    loop, *_ = stack
    seen: list = []
    proxy = loop.run(asyncio.start_server(lambda r, w: _sse_reply(r, w, seen), "127.0.0.1", 0))
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy.sockets[0].getsockname()[1]}")  # no scheme: http, as httpx reads it
    routes, url, route = _fresh_gateway(loop, tmp_path, "http://model.invalid")
    reply = httpx.post(f"{url}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False}, trust_env=False,  # the agent: direct
                       headers={"authorization": f"Bearer {TOKEN}"}, timeout=20)
    assert reply.status_code == 200 and seen == [b"POST http://model.invalid/v1/responses HTTP/1.1"]
    loop.run(routes.aclose())
    loop.run(_close_server(proxy))


def test_the_model_api_s_certificate_is_checked_against_ssl_cert_file_or_certifi(stack, tmp_path, monkeypatch):
    import ssl
    import subprocess

    loop, *_ = stack
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    seen: list = []
    server = loop.run(asyncio.start_server(lambda r, w: _sse_reply(r, w, seen), "127.0.0.1", 0, ssl=tls))
    upstream = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    untrusted, url, route = _fresh_gateway(loop, tmp_path / "a", upstream)  # certifi's bundle: a self-signed cert fails
    reply = httpx.post(f"{url}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False},
                       headers={"authorization": f"Bearer {TOKEN}"}, timeout=20)
    assert reply.status_code == 502 and not seen
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    trusted, url, route = _fresh_gateway(loop, tmp_path / "b", upstream)
    reply = httpx.post(f"{url}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False},
                       headers={"authorization": f"Bearer {TOKEN}"}, timeout=20)
    assert reply.status_code == 200 and seen == [b"POST /v1/responses HTTP/1.1"]
    for routes in (untrusted, trusted):
        loop.run(routes.aclose())
    loop.run(_close_server(server))


def test_a_client_that_cannot_be_set_up_is_a_logged_502_a_turn(stack, tmp_path, monkeypatch):
    loop, *_ = stack
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))  # named, but not there
    routes, url, route = _fresh_gateway(loop, tmp_path, "https://127.0.0.1:9")
    for _ in range(2):  # every turn says so (the client is not left half made)
        reply = httpx.post(f"{url}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False}, trust_env=False,
                           headers={"authorization": f"Bearer {TOKEN}"}, timeout=20)
        assert reply.status_code == 502 and "could not be reached: FileNotFoundError" in reply.json()["error"]["message"]
    assert [line.decision for line in read_model_log(tmp_path / "model-log.jsonl")] == ["upstream_error"] * 2
    loop.run(routes.aclose())


def test_a_reply_the_model_api_breaks_off_reaches_the_agent_short_and_is_logged(stack, tmp_path):
    loop, *_, routes, gateway = stack

    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        event = b'data: {"type": "response.created"}\n\n'
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     + b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        writer.close()  # no last chunk: the reply breaks off

    server = loop.run(asyncio.start_server(broken, "127.0.0.1", 0))
    route = _route(routes, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", tmp_path, "responses")
    got = b""
    with pytest.raises(httpx.RemoteProtocolError):  # the agent sees its reply end short, as it would directly
        with httpx.stream("POST", f"{gateway}/gateway/{route.trial}/v1/responses", json={"model": "m", "store": False},
                          headers={"authorization": f"Bearer {TOKEN}"}, timeout=20) as reply:
            for chunk in reply.iter_raw():
                got += chunk
    assert b"response.created" in got
    [line] = read_model_log(tmp_path / "model-log.jsonl")
    assert line.decision == "forwarded" and line.detail == "the upstream's reply broke off"
    loop.run(_close_server(server))


def _wait_for_log(path: Path, timeout: float = 20) -> list:
    """The gateway logs a request when its relay ends, which, for an agent that left, happens on the
    gateway's own time: wait for that line (bounded), not for a guessed while."""
    deadline = time.monotonic() + timeout
    while not (lines := read_model_log(path)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return lines


async def _close_server(server: asyncio.AbstractServer) -> None:
    server.close()
    await server.wait_closed()


def test_prices_are_litellm_s_own_and_read_without_importing_it():
    """The bundled cost map is read as a file (importing litellm costs seconds per run); every
    priced entry must come out as litellm itself gives it."""
    import subprocess

    code = ("import sys\nfrom pytest_webbench.gateway.meter import price_from_table\n"
            "print(price_from_table('gpt-4o'), 'litellm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.stdout.strip().endswith("False") and "Price(" in done.stdout
    import litellm

    from pytest_webbench.gateway.meter import price_from_table

    priced = {k: v for k, v in litellm.model_cost.items()
              if v.get("input_cost_per_token") is not None and v.get("output_cost_per_token") is not None}
    assert len(priced) > 500
    for key, entry in priced.items():
        price = price_from_table(key)
        assert (price.input, price.output, price.cached_input, price.cache_write) == (
            entry["input_cost_per_token"], entry["output_cost_per_token"], entry.get("cache_read_input_token_cost"),
            entry.get("cache_creation_input_token_cost")), key
        if "input_cost_per_token_above_272k_tokens" in entry and "input_cost_per_token_above_200k_tokens" not in entry:
            assert price.above_tokens == 272_000 and price.above.input == entry["input_cost_per_token_above_272k_tokens"], key


def test_a_long_context_request_is_priced_at_its_tier():
    """Past the table's threshold the provider bills the whole request at the higher price (by hand:
    gpt-5.4 in the bundled table, $2.50 / $15 per million, $5 / $22.50 past 272k input tokens)."""
    from pytest_webbench.gateway.protocols import Usage

    price = Price(2.5e-6, 1.5e-5, above_tokens=272_000, above=Price(5e-6, 2.25e-5))
    assert price.cost(Usage(input=400_000, output=10_000)) == pytest.approx(400_000 * 5e-6 + 10_000 * 2.25e-5)  # $2.225
    assert price.cost(Usage(input=200_000, output=10_000)) == pytest.approx(200_000 * 2.5e-6 + 10_000 * 1.5e-5)
    meter = TrialMeter(trial="t", price=price, spend_limit_usd=3.0)
    held = meter.reserve(400_000, 10_000)
    assert held.usd == pytest.approx(400_000 * 5e-6 + 10_000 * 2.25e-5)  # reserved at the tier the request may reach


def test_codex_s_websocket_attempt_gets_426_on_the_run_s_listener(stack):
    """Codex first tries a WebSocket to the Responses API: a 426 sends it to plain HTTP at once
    (any other answer costs it five retries). Checked on the listener a run serves, proxy and
    gateway together, with a WebSocket handshake as Codex sends it."""
    import socket

    from pytest_webbench.proxy.http_endpoint import ProxyRoutes
    from pytest_webbench.trial.services import _listener

    loop, *_ = stack
    url = loop.serve(_listener(ProxyRoutes(), GatewayRoutes()), "proxy and gateway")
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /gateway/some-trial/v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = sock.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 426 "), head
    assert "upgrade: websocket" in head.lower()
