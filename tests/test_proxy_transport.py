"""The proxy's endpoint as MCP's streamable-HTTP transport asks, on the listener a run serves (the
proxy's routes and the gateway's behind one Host and Origin guard): what a web page could send
there (another Host by DNS rebinding, another Origin, a `text/plain` POST) is refused, and a
message JSON-RPC cannot read gets its error reply with a null id and a 4xx status. Then the
official MCP conformance suite's scenarios that apply to a proxy, run against a control-arm route
wired to the local browser server as a run wires it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pytest_webbench.gateway.routes import GatewayRoutes
from pytest_webbench.proxy.http_endpoint import ProxyRoutes
from pytest_webbench.proxy.listener_guard import allowed_hosts
from pytest_webbench.service_loop import ServiceLoop
from pytest_webbench.trial.services import _listener

sys.path.insert(0, str(Path(__file__).parent))
from test_proxy_rules import session  # noqa: E402 - a proxy session over a recording upstream

ROOT = Path(__file__).resolve().parents[1]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture
def listener(tmp_path):
    loop = ServiceLoop()
    routes = ProxyRoutes()
    s, up = session("control", tmp_path)
    path = routes.add("t1", s)
    base = loop.serve(_listener(routes, GatewayRoutes(), allowed_hosts("127.0.0.1", "http://host.docker.internal:1")), "listener")
    yield base, base + path, up
    loop.close()


def post(url: str, body, **headers) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=content, headers={**MCP_HEADERS, **headers}, timeout=30)


def test_another_host_or_origin_is_refused_before_any_route_sees_it(listener):
    base, url, up = listener
    port = base.rsplit(":", 1)[1]
    assert post(url, INIT, host="evil.example").status_code == 421  # DNS rebinding: a name not this listener's
    assert post(url, INIT, origin="http://evil.example").status_code == 403
    assert post(url, INIT, origin="null").status_code == 403
    assert httpx.post(base + "/gateway/t1/v1/responses", json={}, headers={"host": "evil.example"}).status_code == 421
    assert up.sent == []  # nothing refused reached the browser server
    assert post(url, INIT, origin=f"http://127.0.0.1:{port}").status_code == 200
    assert post(url, INIT, host=f"localhost:{port}").status_code == 200
    assert post(url, INIT, host=f"host.docker.internal:{port}").status_code == 200  # --proxy-url's host


@pytest.mark.parametrize("headers, status", [
    ({"content-type": "text/plain"}, 400),  # what a page can POST across origins without a preflight
    ({"content-type": ""}, 400),
    ({"accept": "application/json"}, 406),
    ({"accept": "text/event-stream"}, 406),
    ({"mcp-protocol-version": "1999-01-01"}, 400),
    ({"accept": "*/*"}, 200),
    ({"mcp-protocol-version": "2025-06-18"}, 200),
    ({"content-type": "application/json; charset=utf-8"}, 200),
])
def test_the_transport_s_headers_are_checked(listener, headers, status):
    _, url, _ = listener
    reply = post(url, INIT, **headers)
    assert reply.status_code == status, reply.text
    if status != 200:
        assert reply.json()["id"] is None and reply.json()["error"]["code"] == -32600


@pytest.mark.parametrize("body, code", [(b"{not json", -32700), (b"[]", -32600), (b"42", -32600), (b"null", -32600),
                                        (b"{}", -32600), (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600)])
def test_a_message_json_rpc_cannot_read_is_answered_400_with_a_null_id(listener, body, code):
    _, url, up = listener
    reply = post(url, body)
    assert reply.status_code == 400 and reply.json()["id"] is None and reply.json()["error"]["code"] == code
    assert up.sent == []


def test_a_notification_is_accepted_without_a_reply(listener):
    _, url, _ = listener
    reply = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert reply.status_code == 202 and reply.content == b""


def test_the_listener_s_names():
    assert allowed_hosts("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert allowed_hosts("0.0.0.0", "http://10.0.0.5:{port}") == {"127.0.0.1", "localhost", "::1", "10.0.0.5"}
    assert "192.168.1.7" in allowed_hosts("192.168.1.7")


# -- the official conformance suite ----------------------------------------------------------------

CONFORMANCE = ROOT / ".webbench" / "conformance" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The scenarios that apply to a proxy that offers tools only: prompts, resources, logging,
# completion and the scenarios needing the suite's own fixture tools do not (README, the proxy).
SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"]


@pytest.fixture(scope="module")
def wired_route(tmp_path_factory):
    """A control-arm route of the proxy, on the run's listener, in front of the local browser server."""
    from pytest_webbench.browsers.local import LocalBackend
    from pytest_webbench.browsers.mcp_server import build_server
    from pytest_webbench.design.arms import arm_policy
    from pytest_webbench.proxy.log import CallLog
    from pytest_webbench.proxy.relay import ProxySession
    from pytest_webbench.proxy.upstream import HttpUpstream

    loop, backend, routes = ServiceLoop(), LocalBackend(), ProxyRoutes()
    mcp_url = loop.serve(build_server(backend).streamable_http_app(json_response=True, stateless_http=True), "mcp") + "/mcp"
    base = loop.serve(_listener(routes, GatewayRoutes(), allowed_hosts("127.0.0.1")), "listener")
    log = tmp_path_factory.mktemp("conformance") / "log.jsonl"
    path = routes.add("conf", ProxySession(arm_policy("control"), "S1", HttpUpstream(mcp_url), CallLog(log), trial="conf"))
    yield base + path
    loop.run(backend.close())
    loop.close()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_official_conformance_scenarios_pass_on_the_proxy(wired_route, scenario, tmp_path):
    from pytest_webbench.browsers.pod import playwright_driver

    if not CONFORMANCE.exists():
        missing = "the MCP conformance suite is not installed (bash .ci/setup installs it)"
        pytest.fail(missing) if os.environ.get("WEBBENCH_REQUIRE_ALL") == "1" else pytest.skip(missing)
    node, _ = playwright_driver()  # Node 22+: the one Playwright for Python ships
    out = subprocess.run([str(node), str(CONFORMANCE), "server", "--url", wired_route, "--scenario", scenario,
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=120)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    assert out.returncode == 0 and checks and all(c["status"] != "FAILURE" for c in checks), out.stdout + out.stderr
    shutil.rmtree(tmp_path, ignore_errors=True)


# A browser server that, before each reply, writes a line nested past every JSON parser here and
# a notification the agent's side cannot take (its sink fails), then answers.
DEEP_SERVER = r'''
import sys
for line in sys.stdin:
    request_id = line.split('"id":', 1)[1].split(",", 1)[0].strip(" }\n")
    sys.stdout.write("[" * 5000 + "]" * 5000 + "\n")
    sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n')
    sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{}}\n' % request_id)
    sys.stdout.flush()
'''


def test_the_upstream_reader_outlives_a_line_nested_past_the_parsers_and_a_failing_sink(tmp_path):
    """Its reader thread died on either (RecursionError, or the sink's error): every call after it
    then waited for its reply until the agent gave up."""
    import threading

    from pytest_webbench.proxy.upstream import StdioUpstream

    server = tmp_path / "deep_server.py"
    server.write_text(DEEP_SERVER)

    def sink(message):
        raise RecursionError("the agent's side cannot write it")

    upstream = StdioUpstream([sys.executable, str(server)], on_server_message=sink)
    replies, answered = [], threading.Event()
    try:
        for call_id in (1, 2):
            answered.clear()
            upstream.start_call({"jsonrpc": "2.0", "id": call_id, "method": "ping"},
                                lambda reply, raw=None: (replies.append(reply), answered.set()))
            assert answered.wait(30), f"call {call_id} was never answered"
    finally:
        upstream.close_blocking()
    assert replies == [{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 2, "result": {}}]
    assert upstream.unreadable_lines == 4  # two nested lines, two notifications the sink refused


def test_a_proxy_bug_on_a_reply_still_answers_the_agent(tmp_path):
    """The call was forwarded; if turning its reply into the agent's fails, the agent gets an error
    for it rather than waiting forever."""
    import io

    from pytest_webbench.design.arms import arm_policy
    from pytest_webbench.proxy.framing import MAX_LINE_BYTES
    from pytest_webbench.proxy.log import CallLog
    from pytest_webbench.proxy.relay import ProxySession
    from pytest_webbench.proxy.stdio import StdoutWriter, serve
    from pytest_webbench.proxy.upstream import StdioUpstream

    class Broken(ProxySession):
        def complete(self, call, reply):
            raise KeyError("a bug")

    server = tmp_path / "deep_server.py"
    server.write_text(DEEP_SERVER)
    upstream = StdioUpstream([sys.executable, str(server)])
    session = Broken(arm_policy("control"), "S1", upstream, CallLog(tmp_path / "log.jsonl"), trial="t")
    out = io.BytesIO()
    try:
        serve(session, upstream, io.BytesIO(b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}\n'), StdoutWriter(out),
              MAX_LINE_BYTES, drain_timeout=30)
    finally:
        upstream.close_blocking()
    [reply] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert reply["id"] == 4 and reply["error"]["code"] == -32603 and "KeyError" in reply["error"]["message"]


def test_an_http_reply_answers_only_the_call_of_its_own_id_and_type():
    from pytest_webbench.proxy.upstream import _classify

    assert _classify('{"jsonrpc":"2.0","id":1,"result":{}}', 1)[0] == "reply"
    for other in ("1.0", "true", '"1"', "null", "[1]"):
        assert _classify('{"jsonrpc":"2.0","id":%s,"result":{}}' % other, 1)[0] == "skip", other
    assert _classify("[" * 5000 + "]" * 5000, 1) == ("skip", None)


def test_an_http_json_reply_of_another_id_or_a_request_in_its_place_answers_no_call():
    """A plain JSON body was taken as the reply whatever its id: now it must answer the call sent."""
    from pytest_webbench.proxy.upstream import HttpUpstream

    bodies = iter([b'{"jsonrpc":"2.0","id":true,"result":{}}', b'{"jsonrpc":"2.0","id":"other","result":{}}',
                   b'{"jsonrpc":"2.0","id":1,"method":"ping"}', b'{"jsonrpc":"2.0","id":1,"result":{"ok":1}}'])
    upstream = HttpUpstream("http://browser.invalid/mcp")
    upstream._sync_client = httpx.Client(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=next(bodies), headers={"content-type": "application/json"})))
    replies = [upstream.call({"jsonrpc": "2.0", "id": 1, "method": "ping"}) for _ in range(4)]
    assert replies == [None, None, None, {"jsonrpc": "2.0", "id": 1, "result": {"ok": 1}}]
