"""The standalone proxy (`python -m pytest_webbench.proxy`) as an agent's MCP server starts it:
the real `mcp` SDK client in front, a Kernel stand-in speaking real MCP behind it over stdio or
streamable HTTP, every rule checked in every arm through the real wire."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from pytest_webbench.proxy.log import read_call_log
from pytest_webbench.service_loop import ServiceLoop

STANDIN = Path(__file__).parent / "support" / "kernel_standin.py"
SENTINEL_KEY = "sk-sentinel-7f3a9c-never-log-me"
TRANSPORTS = ["stdio", "http"]
ARMS = ["control", "treatment", "playwright"]
ARM_TOOLS = {
    "control": {"execute_playwright_code", "browser_repl", "computer_action", "webmcp"},
    "treatment": {"execute_playwright_code", "browser_repl", "computer_action", "webmcp"},
    "playwright": {"execute_playwright_code"},
}


@pytest.fixture(scope="module")
def http_standin(tmp_path_factory):
    """The stand-in over streamable HTTP (SSE replies), refusing requests without the bearer key."""
    sys.path.insert(0, str(STANDIN.parent))
    from kernel_standin import build_standin

    record = tmp_path_factory.mktemp("http-standin") / "received.jsonl"
    app = build_standin(record).streamable_http_app(json_response=False, stateless_http=True)
    seen_auth: list[str] = []

    async def require_key(scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            seen_auth.append(auth)
            if auth != f"Bearer {SENTINEL_KEY}":
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
                return
        await app(scope, receive, send)

    loop = ServiceLoop()
    url = loop.serve(require_key, "kernel stand-in") + "/mcp"
    yield url, record, seen_auth
    loop.close()


@pytest.fixture
def proxy(tmp_path, http_standin):
    """Builds the proxy's command line for an arm and a transport; returns what the test needs."""

    class Proxy:
        log = tmp_path / "proxy-log.jsonl"

        def __init__(self):
            self.record = tmp_path / "received.jsonl"

        def command(self, arm: str, transport: str, cap: int | None = None, extra: list[str] = ()) -> list[str]:
            argv = [sys.executable, "-m", "pytest_webbench.proxy", "--arm", arm, "--session-id", "S1",
                    "--log", str(self.log), *extra]
            if cap is not None:
                argv += ["--call-cap", str(cap)]
            if transport == "stdio":
                return argv + ["--", sys.executable, str(STANDIN), "--record", str(self.record)]
            url, self.record, _ = http_standin
            return argv + ["--upstream-url", url, "--upstream-header", "Authorization: Bearer ${KERNEL_API_KEY}"]

        def params(self, arm: str, transport: str, cap: int | None = None) -> StdioServerParameters:
            argv = self.command(arm, transport, cap)
            return StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, "KERNEL_API_KEY": SENTINEL_KEY})

        def received(self) -> list[dict]:
            """What the upstream got from this test (the HTTP stand-in is shared per module)."""
            if not self.record.exists():
                return []
            lines = [json.loads(line) for line in self.record.read_text().splitlines()]
            return [r for r in lines if r["arguments"].get("context") == self.marker]

        # Unique per test: the HTTP stand-in (and its record file) is shared by the module.
        marker = f"test-{uuid.uuid4().hex}"

    return Proxy()


def call(client: Client, proxy, tool: str, **arguments):
    return client.call_tool(tool, {"context": proxy.marker, **arguments})


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("arm", ARMS)
def test_each_arm_sees_only_its_tools_with_the_hosted_extras_tolerated(arm, transport, proxy):
    async def go():
        async with Client(proxy.params(arm, transport), mode="legacy") as client:
            return (await client.list_tools()).tools

    tools = run(go())
    assert {t.name for t in tools} == ARM_TOOLS[arm]
    for tool in tools:
        assert "context" in tool.input_schema["required"]  # the hosted server's extra argument passes through
        text = json.dumps(tool.model_dump())
        if arm == "playwright":
            assert "webmcp" not in text.lower() and "modelcontext" not in text.lower()
    if arm != "playwright":  # descriptions are passed through as sent
        pw = next(t for t in tools if t.name == "execute_playwright_code")
        assert "`webmcp` client" in pw.description


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_instructions_are_withheld_under_both_handshakes(mode, transport, proxy):
    direct = StdioServerParameters(command=sys.executable, args=[str(STANDIN), "--record", str(proxy.record)])

    async def go():
        async with Client(direct, mode=mode) as client:
            upstream_says = client.instructions
        async with Client(proxy.params("control", transport), mode=mode) as client:
            await client.list_tools()
            return upstream_says, client.instructions, client.server_capabilities

    upstream_says, through_proxy, capabilities = run(go())
    assert upstream_says and "webmcp" in upstream_says  # the server does send guidance...
    assert through_proxy is None  # ...and the agent never sees it
    assert capabilities.prompts is None and capabilities.resources is None


REJECTED_CALLS = {
    "control": [
        ("manage_browsers", {"session_id": "S1", "action": "create"}, "tool_not_in_arm"),
        ("get_more_tools", {"session_id": "S1"}, "tool_not_in_arm"),
        ("exec_command", {"session_id": "S1", "command": "curl http://site"}, "tool_not_in_arm"),
        ("execute_playwright_code", {"code": "1"}, "session_id_missing"),
        ("execute_playwright_code", {"session_id": "S2", "code": "1"}, "session_id_foreign"),
        ("webmcp", {"session_id": "S1", "action": "add_custom", "namespace": "x", "source": "[]"}, "webmcp_action_forbidden"),
        ("webmcp", {"session_id": "S1", "action": "remove_custom", "custom_tool_id": "ct_1"}, "webmcp_action_forbidden"),
        ("webmcp", {"session_id": "S1", "action": "list_custom"}, "webmcp_action_forbidden"),
    ],
    "playwright": [
        ("webmcp", {"session_id": "S1", "action": "list"}, "tool_not_in_arm"),
        ("browser_repl", {"session_id": "S1", "code": "1"}, "tool_not_in_arm"),
        ("computer_action", {"session_id": "S1", "actions": [{"type": "screenshot"}]}, "tool_not_in_arm"),
        ("execute_playwright_code", {"session_id": "S1", "code": "await page.evaluate(() => document?.modelContext?.getTools())"}, "webmcp_in_code"),
        ("execute_playwright_code", {"session_id": "S1", "code": "navigator['MODELCONTEXT']"}, "webmcp_in_code"),
        ("execute_playwright_code", {"session_id": "S1", "code": "const run = webMCP.invokeTool.bind(webMCP)"}, "webmcp_in_code"),
        ("execute_playwright_code", {"session_id": "S1", "code": "window['model' + 'Context']"}, "webmcp_in_code"),
        ("execute_playwright_code", {"session_id": "S2", "code": "1"}, "session_id_foreign"),
    ],
}
REJECTED_CALLS["treatment"] = REJECTED_CALLS["control"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("arm", ARMS)
def test_disallowed_calls_are_refused_readably_logged_and_never_forwarded(arm, transport, mode, proxy):
    from mcp import MCPError

    async def refused_text(client, tool, args) -> str:
        """A tool the arm does not offer is an unknown tool (a -32602 protocol error, which the SDK
        raises); any other refusal is an isError result."""
        try:
            result = await call(client, proxy, tool, **args)
        except MCPError as exc:
            assert exc.code == -32602 and "Unknown tool" in exc.message
            return exc.message
        assert result.is_error
        return result.content[0].text

    async def go():
        async with Client(proxy.params(arm, transport), mode=mode) as client:
            refused = [await refused_text(client, tool, args) for tool, args, _ in REJECTED_CALLS[arm]]
            allowed = await call(client, proxy, "execute_playwright_code", session_id="S1", code="return 1")
            return refused, allowed

    refused, allowed = run(go())
    for text, (_, _, rule) in zip(refused, REJECTED_CALLS[arm]):
        assert f"Rejected by the benchmark proxy ({rule})" in text
    assert not allowed.is_error  # a rejection does not end the trial
    assert [r["tool"] for r in proxy.received()] == ["execute_playwright_code"]
    records = read_call_log(proxy.log).records
    calls = [r for r in records if r.method == "tools/call"]
    assert [r.rule for r in calls if r.decision == "rejected"] == [rule for *_, rule in REJECTED_CALLS[arm]]
    assert all(r.trial == "S1" and r.latency_ms >= 0 for r in calls)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_webmcp_invokes_are_accounted_by_origin_and_outcome(transport, proxy):
    refs = ["tr_native", "tr_custom", "tr_custom_error", "tr_stale", "tr_unknown", "tr_never_listed"]

    async def go():
        async with Client(proxy.params("treatment", transport), mode="auto") as client:
            before = await call(client, proxy, "webmcp", session_id="S1", action="invoke", tool_ref="tr_native", input={})
            await call(client, proxy, "webmcp", session_id="S1", action="list")
            for ref in refs:
                await call(client, proxy, "webmcp", session_id="S1", action="invoke", tool_ref=ref, input={})
            return before

    run(go())
    invokes = [r.webmcp for r in read_call_log(proxy.log).records if r.webmcp and r.webmcp["action"] == "invoke"]
    assert [(w["origin"], w["status"], w["tool"]) for w in invokes] == [
        ("unknown", "completed", None),  # invoked before any list: the proxy cannot say whose it is
        ("native", "completed", "search_issues"),
        ("injected", "completed", "get_pull_request"),
        ("injected", "error", "get_release"),
        ("injected", "stale_ref", "get_commit"),
        ("native", "unknown", "merge_pull_request"),
        ("unknown", "stale_ref", None),
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_call_cap_answers_with_an_error_and_is_logged(transport, proxy):
    async def go():
        async with Client(proxy.params("control", transport, cap=2), mode="legacy") as client:
            return [await call(client, proxy, "execute_playwright_code", session_id="S1", code="1") for _ in range(4)]

    results = run(go())
    assert [r.is_error for r in results] == [False, False, True, True]
    assert "call cap of 2 browser calls is reached" in results[-1].content[0].text
    assert len(proxy.received()) == 2
    capped = [r for r in read_call_log(proxy.log).records if r.cap_reached]
    assert len(capped) == 2 and {r.rule for r in capped} == {"call_cap"}


def test_server_messages_reach_the_client_and_are_never_logged_as_results(proxy):
    progress: list[float] = []

    async def on_progress(value, total, message):
        progress.append(value)

    async def go():
        async with Client(proxy.params("control", "stdio"), mode="legacy") as client:
            first = await client.call_tool("execute_playwright_code", {"session_id": "S1", "code": "progress"},
                                           progress_callback=on_progress)
            # The server pings the client mid-call: the ping must reach the client and its
            # answer must reach the server, or this call never returns.
            second = await call(client, proxy, "execute_playwright_code", session_id="S1", code="ping-client")
            return first, second

    first, second = run(go(), timeout=30)
    assert progress == [0.5]
    assert json.loads(first.content[0].text)["success"] and json.loads(second.content[0].text)["success"]
    records = read_call_log(proxy.log).records
    assert {r.method for r in records} <= {"initialize", "tools/list", "tools/call"}
    assert [r.outcome for r in records if r.method == "tools/call"] == ["ok", "ok"]


def _raw_proxy(proxy, lines: list[bytes], arm="control", transport="stdio", extra=()) -> tuple[list[dict], str, int]:
    """Feeds raw lines to the proxy's stdin and reads every reply line."""
    env = {**os.environ, "KERNEL_API_KEY": SENTINEL_KEY}
    done = subprocess.run(proxy.command(arm, transport, extra=list(extra)), input=b"".join(lines), capture_output=True,
                          env=env, timeout=60)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    return replies, done.stderr.decode(), done.returncode


INIT = json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode() + b"\n"


def test_framing_refuses_what_is_not_exactly_one_message_and_keeps_going(proxy):
    oversized = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "execute_playwright_code", "arguments": {"session_id": "S1", "code": "' + b"a" * 5000 + b'"}}}\n'
    lines = [
        INIT,
        b"this is not json\n",
        b'[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]\n',
        oversized,
        b'{"jsonrpc": "2.0", "id": {"no": 1}, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": ["not", "an", "object"]}\n',
        b'{"jsonrpc": "2.0", "id": 7}\n',
        b'{"jsonrpc": "2.0", "id": 8, "method": "prompts/get", "params": {"name": "webmcp-guide"}}\n',
        b"\xff\xfe\x00garbage\n",
        b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}\n',
    ]
    replies, stderr, code = _raw_proxy(proxy, lines, extra=["--max-line-bytes", "1024"])
    assert code == 0, stderr
    by_id = {json.dumps(r.get("id")): r for r in replies}
    assert by_id['"init"']["result"]["serverInfo"]
    assert by_id["5"]["error"]["code"] == -32600 and "over the proxy's limit" in by_id["5"]["error"]["message"]
    assert by_id["6"]["error"]["code"] == -32600
    assert by_id["7"]["error"]["code"] == -32600
    assert by_id["8"]["error"]["code"] == -32601
    assert by_id["9"]["result"] == {}
    null_id = [r for r in replies if r.get("id") is None]
    # two parse errors, the batch, and the request whose id is no id (JSON-RPC answers it with a null one)
    assert sorted(r["error"]["code"] for r in null_id) == [-32700, -32700, -32600, -32600]
    assert proxy.received() == []  # nothing refused reached the upstream
    invalid = [r for r in read_call_log(proxy.log).records if r.rule == "invalid_message"]
    assert len(invalid) == 7


def test_upstream_death_is_answered_not_fatal(proxy):
    """The server dies on call 1; call 2, sent once call 1 is answered, gets the same plain error."""
    calls = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "execute_playwright_code", "arguments": {"session_id": "S1", "code": code}}}).encode() + b"\n"
        for i, code in [(1, "crash"), (2, "1")]]
    process = subprocess.Popen(proxy.command("control", "stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "KERNEL_API_KEY": SENTINEL_KEY})
    replies = []
    try:
        for line in [INIT, *calls]:
            process.stdin.write(line)
            process.stdin.flush()
            replies.append(json.loads(process.stdout.readline()))
        process.stdin.close()
        assert process.wait(timeout=30) == 0, process.stderr.read()
    finally:
        process.kill()
    gone = {"code": -32000, "message": "browser server error: browser server exited with code 3"}
    assert replies[1] == {"jsonrpc": "2.0", "id": 1, "error": gone}
    assert replies[2] == {"jsonrpc": "2.0", "id": 2, "error": gone}
    records = [r for r in read_call_log(proxy.log).records if r.method == "tools/call"]
    assert [(r.outcome, r.detail) for r in records] == [("error", gone["message"])] * 2


def test_the_api_key_stays_an_environment_reference(proxy, http_standin):
    _, _, seen_auth = http_standin
    async def go():
        async with Client(proxy.params("control", "http"), mode="legacy") as client:
            await call(client, proxy, "execute_playwright_code", session_id="S1", code="1")
            await call(client, proxy, "execute_playwright_code", session_id="S1", code=SENTINEL_KEY[:5])

    run(go())
    assert f"Bearer {SENTINEL_KEY}" in seen_auth  # the upstream got the real key...
    argv = " ".join(proxy.command("control", "http"))
    assert SENTINEL_KEY not in argv and "${KERNEL_API_KEY}" in argv  # ...the command line only its name
    assert SENTINEL_KEY not in proxy.log.read_text()


def test_a_missing_key_or_a_bad_command_line_is_a_clear_error(proxy, http_standin):
    env = {k: v for k, v in os.environ.items() if k != "KERNEL_API_KEY"}
    done = subprocess.run(proxy.command("control", "http"), input=b"", capture_output=True, env=env, timeout=30)
    assert done.returncode == 2 and "KERNEL_API_KEY is not set" in done.stderr.decode()
    bad = [sys.executable, "-m", "pytest_webbench.proxy", "--arm", "control", "--session-id", "S1", "--log", "x.jsonl"]
    done = subprocess.run(bad, input=b"", capture_output=True, timeout=30)
    assert done.returncode == 2 and "give exactly one upstream" in done.stderr.decode()
    done = subprocess.run(bad + ["--upstream-url", "http://x", "--upstream-header", "Bearer sk-pasted"], input=b"",
                          capture_output=True, timeout=30)
    assert done.returncode == 2 and "expected 'Name: value'" in done.stderr.decode()
    assert "sk-pasted" not in done.stderr.decode()


def test_a_wrong_key_reaches_the_agent_as_an_error(proxy, http_standin):
    argv = proxy.command("control", "http")
    env = {**os.environ, "KERNEL_API_KEY": "sk-wrong"}
    lines = [INIT, b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n']
    done = subprocess.run(argv, input=b"".join(lines), capture_output=True, env=env, timeout=30)
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert "401" in replies["init"]["error"]["message"] and "401" in replies[2]["error"]["message"]
    assert "sk-wrong" not in done.stdout.decode() + done.stderr.decode() + proxy.log.read_text()


PAGE = """<html><head><title>Local</title></head><body><script>
document.modelContext.registerTool({name: 'native_echo', description: 'echo', inputSchema: {type: 'object'},
  execute: async (i) => ({echo: i})});
</script></body></html>"""


@pytest.mark.chromium
def test_stdio_mode_with_the_local_backend_behind_it(tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    loop = ServiceLoop()
    try:
        port = loop.serve(Starlette(routes=[Route("/", lambda r: HTMLResponse(PAGE))]), "site").rsplit(":", 1)[1]
        log = tmp_path / "log.jsonl"
        argv = ["-m", "pytest_webbench.proxy", "--arm", "control", "--session-id", "S1", "--log", str(log), "--",
                sys.executable, "-m", "pytest_webbench.browsers.mcp_server", "--session", "S1",
                "--goto", f"http://site.localhost:{port}/"]

        async def go():
            async with Client(StdioServerParameters(command=sys.executable, args=argv, env=dict(os.environ))) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                title = await client.call_tool("execute_playwright_code", {"session_id": "S1", "code": "return await page.title()"})
                listed = json.loads((await client.call_tool("webmcp", {"session_id": "S1", "action": "list"})).content[0].text)
                ref = listed["tools"][0]["tool_ref"]
                invoked = await client.call_tool("webmcp", {"session_id": "S1", "action": "invoke", "tool_ref": ref, "input": {"a": 1}})
                foreign = await client.call_tool("execute_playwright_code", {"session_id": "other", "code": "1"})
                return client.instructions, tools, title, invoked, foreign

        instructions, tools, title, invoked, foreign = run(go(), timeout=120)
    finally:
        loop.close()
    assert instructions is None and tools == ARM_TOOLS["control"]
    assert json.loads(title.content[0].text)["result"] == "Local"
    assert json.loads(invoked.content[0].text) | {"invocation_id": None} == {
        "invocation_id": None, "status": "completed", "output": {"echo": {"a": 1}}}
    assert foreign.is_error
    invokes = [r.webmcp for r in read_call_log(log).records if r.webmcp and r.webmcp["action"] == "invoke"]
    assert invokes == [{"action": "invoke", "tool": "native_echo", "origin": "native", "status": "completed"}]


def test_a_tool_result_of_megabytes_passes_whole_and_is_logged_bounded(proxy):
    async def go():
        async with Client(proxy.params("control", "stdio"), mode="legacy") as client:
            return await call(client, proxy, "execute_playwright_code", session_id="S1", code="big-result")

    result = run(go())
    assert len(json.loads(result.content[0].text)["result"]) == 3_000_000  # the agent gets all of it
    [record] = [r for r in read_call_log(proxy.log).records if r.method == "tools/call"]
    assert record.outcome == "ok" and proxy.log.stat().st_size < 20_000  # the log keeps the call, not the payload
