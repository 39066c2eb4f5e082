"""The proxy's HTTP path with a streaming upstream: SSE replies parsed whatever their line ends,
and the server's own messages mid-call (a log notification, a ping, an elicitation it waits on)
carried to the agent at once, by the per-trial HTTP endpoint as by the stdio mode."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from pytest_webbench.design.arms import arm_policy
from pytest_webbench.proxy.http_endpoint import ProxyRoutes
from pytest_webbench.proxy.log import CallLog, read_call_log
from pytest_webbench.proxy.relay import ProxySession
from pytest_webbench.proxy.upstream import HttpUpstream
from pytest_webbench.service_loop import ServiceLoop

STANDIN = Path(__file__).parent / "support" / "kernel_standin.py"
REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x", "arguments": {}}}


def _stream(newline: str) -> bytes:
    """A hand-written SSE reply: a priming event with no data, a comment, a notification, then the
    reply spread over two `data:` lines (which the SSE spec joins with a newline)."""
    events = [
        ["id: 0", "data:"],
        [": keep-alive"],
        ["event: message", 'data: {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}'],
        ["event: message", 'data: {"jsonrpc": "2.0", "id": 7,', 'data:  "result": {"content": [], "isError": false}}'],
    ]
    return "".join(newline.join(lines) + newline * 2 for lines in events).encode()


@pytest.fixture(scope="module")
def loop():
    loop = ServiceLoop()
    yield loop
    loop.close()


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_an_sse_reply_after_a_notification_is_read_with_either_line_ending(loop, newline):
    body = _stream(newline)

    async def reply(request):
        return Response(body, media_type="text/event-stream")

    url = loop.serve(Starlette(routes=[Route("/mcp", reply, methods=["POST"])]), "sse upstream") + "/mcp"
    expected = {"jsonrpc": "2.0", "id": 7, "result": {"content": [], "isError": False}}
    notification = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}

    upstream = HttpUpstream(url)
    seen: list[dict] = []

    async def sink(message):
        seen.append(message)

    assert loop.run(upstream.send(REQUEST, sink), timeout=30) == expected
    assert seen == [notification]

    threaded = HttpUpstream(url)  # the stdio mode's path: a blocking client on a thread
    threaded.on_server_message = seen.append
    assert threaded.call(REQUEST) == expected
    assert seen == [notification, notification]
    threaded.close_blocking()
    loop.run(upstream.close())


@pytest.fixture(scope="module")
def stateful_standin(tmp_path_factory, loop):
    """Kernel's stand-in served as the SDK serves by default: stateful, SSE replies (sse-starlette,
    CRLF between events), so a server request mid-call rides the call's own stream."""
    sys.path.insert(0, str(STANDIN.parent))
    from kernel_standin import build_standin

    record = tmp_path_factory.mktemp("stateful") / "received.jsonl"
    app = build_standin(record).streamable_http_app(json_response=False, stateless_http=False)
    return loop.serve(app, "stateful kernel stand-in") + "/mcp"


async def _elicit_through(client_target, mode: str = "legacy") -> tuple[dict, list, list]:
    asked, logged = [], []

    async def on_elicit(context, params):
        import mcp_types as types

        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "green"})

    async def on_log(params):
        logged.append(params.data)

    async with Client(client_target, mode=mode, elicitation_callback=on_elicit, logging_callback=on_log) as client:
        out = await client.call_tool("execute_playwright_code", {"session_id": "S1", "code": "elicit-client"})
    return json.loads(out.content[0].text), asked, logged


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_http_endpoint_carries_a_server_request_mid_call_to_the_agent(loop, stateful_standin, tmp_path):
    routes = ProxyRoutes()
    proxy = loop.serve(routes.app, "proxy")
    session = ProxySession(arm_policy("control"), "S1", HttpUpstream(stateful_standin), CallLog(tmp_path / "log.jsonl"),
                           trial="t-elicit")
    path = routes.add("t-elicit", session)

    result, asked, logged = loop.run(_elicit_through(proxy + path), timeout=60)
    # Without the stream the elicitation never reaches the agent and the call waits out its timeout.
    assert result == {"success": True, "result": {"colour": "green"}, "action": "accept"}
    assert asked == ["Which colour?"] and logged == ["about to ask"]
    assert session.stats.server_messages == 3  # the log notification, the ping, the elicitation
    calls = [r for r in read_call_log(tmp_path / "log.jsonl").records if r.method == "tools/call"]
    assert [(r.tool, r.outcome) for r in calls] == [("execute_playwright_code", "ok")]
    loop.run(session.aclose())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_stdio_mode_does_the_same_over_an_http_upstream(stateful_standin, tmp_path):
    argv = [sys.executable, "-m", "pytest_webbench.proxy", "--arm", "control", "--session-id", "S1",
            "--log", str(tmp_path / "log.jsonl"), "--upstream-url", stateful_standin]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    result, asked, logged = asyncio.run(asyncio.wait_for(_elicit_through(params), 60))
    assert result == {"success": True, "result": {"colour": "green"}, "action": "accept"}
    assert asked == ["Which colour?"] and logged == ["about to ask"]
    calls = [r for r in read_call_log(tmp_path / "log.jsonl").records if r.method == "tools/call"]
    assert [(r.tool, r.outcome) for r in calls] == [("execute_playwright_code", "ok")]


def test_a_trial_holds_a_bounded_number_of_call_bodies_at_once():
    """Twenty calls of one trial whose bodies come slowly, and whose relays are slow: at most
    MAX_OPEN_BODIES are read or held at once; the rest wait unread, and every call is answered."""
    import asyncio
    import json as _json

    from pytest_webbench.proxy.http_endpoint import MAX_OPEN_BODIES, ProxyRoutes

    class SlowSession:
        def __init__(self) -> None:
            self.holding = self.most = 0
            self.release = asyncio.Event()

        async def handle_line(self, body, to_agent):
            await self.release.wait()
            self.holding -= 1
            return {"jsonrpc": "2.0", "id": _json.loads(body)["id"], "result": {}}

    async def scenario():
        routes, session = ProxyRoutes(), SlowSession()
        path = routes.add("T", session)
        body = _json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        statuses = []

        async def one():
            parts = [{"type": "http.request", "body": body[:5], "more_body": True},
                     {"type": "http.request", "body": body[5:], "more_body": False}]

            async def receive():
                if not parts:
                    await asyncio.Event().wait()
                part = parts.pop(0)
                if part["more_body"]:
                    session.holding += 1  # from its first byte read until its relay is done
                    session.most = max(session.most, session.holding)
                return part

            async def send(message):
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])

            scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
                     "root_path": "", "scheme": "http", "server": ("127.0.0.1", 1), "http_version": "1.1",
                     "headers": [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")]}
            await routes.app(scope, receive, send)

        tasks = [asyncio.ensure_future(one()) for _ in range(20)]
        for _ in range(10_000):  # (yields, not time) until the first calls are held...
            if session.holding >= MAX_OPEN_BODIES:
                break
            await asyncio.sleep(0)
        for _ in range(500):  # ...and every other call had its chance to start reading too
            await asyncio.sleep(0)
        session.release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        return session.most, statuses

    most, statuses = asyncio.run(scenario())
    assert most == MAX_OPEN_BODIES and statuses == [200] * 20
