"""The proxy's rules at the message level, against a recording upstream (nothing real behind it)."""

import asyncio
import io
import json

import pytest
from hypothesis import given, settings, strategies as st

from pytest_webbench.design.arms import arm_policy
from pytest_webbench.proxy.log import CallLog, read_call_log
from pytest_webbench.proxy.relay import ProxySession
from pytest_webbench.proxy.rules import mentions_webmcp, strip_webmcp_guidance

TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object"}} for n, d in [
    ("execute_playwright_code", "Run code. A `webmcp` client is in scope. Return a value."),
    ("browser_repl", "REPL"), ("computer_action", "Mouse"), ("webmcp", "WebMCP tools"),
    ("manage_browsers", "lifecycle"), ("get_connection_context", "account"), ("get_more_tools", "more"),
]]


class RecordingUpstream:
    def __init__(self):
        self.sent = []

    async def send(self, message, on_server_message=None):
        self.sent.append(message)
        if "id" not in message:
            return None
        method = message.get("method")
        if method in ("initialize", "server/discover"):
            return {"jsonrpc": "2.0", "id": message["id"], "result": {"instructions": "prefer webmcp", "serverInfo": {"name": "k"}}}
        if method == "tools/list":
            return {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": json.loads(json.dumps(TOOLS))}}
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "{}"}]}}


def session(arm, tmp_path, cap=None):
    up = RecordingUpstream()
    return ProxySession(arm_policy(arm), "S1", up, CallLog(tmp_path / "log.jsonl"), trial="t", call_cap=cap), up


def call(tool, **args):
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("arm, expected", [
    ("control", {"execute_playwright_code", "browser_repl", "computer_action", "webmcp"}),
    ("treatment", {"execute_playwright_code", "browser_repl", "computer_action", "webmcp"}),
    ("playwright", {"execute_playwright_code"}),
])
def test_advertises_only_the_arms_tools(arm, expected, tmp_path):
    s, _ = session(arm, tmp_path)
    reply = run(s.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    names = {t["name"] for t in reply["result"]["tools"]}
    assert names == expected
    descriptions = " ".join(t["description"] for t in reply["result"]["tools"])
    assert ("webmcp" in descriptions.lower()) == (arm != "playwright")


@pytest.mark.parametrize("method", ["initialize", "server/discover"])
def test_instructions_are_withheld_under_both_handshakes(method, tmp_path):
    s, _ = session("control", tmp_path)
    reply = run(s.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}))
    assert "instructions" not in reply["result"] and reply["result"]["serverInfo"] == {"name": "k"}


@pytest.mark.parametrize("arm, message, rule", [
    ("playwright", call("webmcp", session_id="S1", action="list"), "tool_not_in_arm"),
    ("control", call("manage_browsers", session_id="S1", action="create"), "tool_not_in_arm"),
    ("control", call("execute_playwright_code", code="1"), "session_id_missing"),
    ("control", call("execute_playwright_code", session_id="S2", code="1"), "session_id_foreign"),
    ("treatment", call("webmcp", session_id="S1", action="add_custom", namespace="x", source="[]"), "webmcp_action_forbidden"),
    ("control", call("webmcp", session_id="S1", action="remove_custom"), "webmcp_action_forbidden"),
    ("playwright", call("execute_playwright_code", session_id="S1", code="document?.modelContext.getTools()"), "webmcp_in_code"),
    ("playwright", call("execute_playwright_code", session_id="S1", code="navigator['modelContext']"), "webmcp_in_code"),
    ("playwright", call("execute_playwright_code", session_id="S1", code="const f = WEBMCP.invokeTool.bind(x)"), "webmcp_in_code"),
])
def test_disallowed_calls_are_rejected_logged_and_never_forwarded(arm, message, rule, tmp_path):
    s, up = session(arm, tmp_path)
    reply = run(s.handle(message))
    if rule == "tool_not_in_arm":  # to the agent a tool its arm does not offer is unknown: a protocol error
        assert reply["error"]["code"] == -32602 and rule in reply["error"]["message"] and "Unknown tool" in reply["error"]["message"]
    else:  # an offered tool's refused call is a tool result the model reads
        assert reply["result"]["isError"] is True and rule in reply["result"]["content"][0]["text"]
    assert up.sent == []
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert record.decision == "rejected" and record.rule == rule
    assert s.stats.rejected_calls == 1 and s.stats.forwarded_calls == 0


def test_allowed_calls_are_forwarded_and_logged(tmp_path):
    s, up = session("control", tmp_path)
    reply = run(s.handle(call("webmcp", session_id="S1", action="list")))
    assert "isError" not in reply["result"] and len(up.sent) == 1
    assert read_call_log(tmp_path / "log.jsonl").records[0].decision == "forwarded"


def test_call_cap(tmp_path):
    s, up = session("control", tmp_path, cap=2)
    for _ in range(3):
        reply = run(s.handle(call("execute_playwright_code", session_id="S1", code="1")))
    assert len(up.sent) == 2 and "call cap" in reply["result"]["content"][0]["text"]
    assert s.stats.cap_hits == 1
    assert read_call_log(tmp_path / "log.jsonl").records[-1].cap_reached


@pytest.mark.parametrize("line, reply", [
    (b"not json", (None, -32700)),  # JSON-RPC answers a parse error with a null id
    (b"[1,2]", (None, -32600)),  # and an invalid batch
    (b'{"jsonrpc": "1.0", "id": 3}', (3, -32600)),  # an id it can read is answered by it
    (b"\xff\xfe", (None, -32700)),
    (b'{"jsonrpc": "2.0", "method": "tools/call"}', None),  # a request sent as a notification: no id, no reply
    # an invalid request whose id cannot be read (or is not one MCP allows) is answered with a null id
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', (None, -32600)),
    (b"42", (None, -32600)),
    (b"null", (None, -32600)),
    (b"{}", (None, -32600)),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', (None, -32600)),
])
def test_garbage_is_refused_and_logged(line, reply, tmp_path):
    s, up = session("control", tmp_path)
    answered = run(s.handle_line(line))
    assert up.sent == [] and s.stats.bad_messages == 1
    if reply is None:
        assert answered is None
    else:
        assert (answered["id"], answered["error"]["code"]) == reply and answered["jsonrpc"] == "2.0"
    assert read_call_log(tmp_path / "log.jsonl").records[0].rule == "invalid_message"


def test_a_cut_off_log_line_does_not_break_the_reader(tmp_path):
    s, _ = session("control", tmp_path)
    run(s.handle(call("execute_playwright_code", session_id="S1", code="1")))
    with (tmp_path / "log.jsonl").open("a") as f:
        f.write('{"time": 1, "tri')
    contents = read_call_log(tmp_path / "log.jsonl")
    assert len(contents.records) == 1 and contents.unreadable_lines == 1


# Code around a planted word: no letter of "webmcp" or "modelcontext" that could complete one,
# no quote or plus that could join a literal to the plant, so the label alone says what it holds.
_FILLER = st.text(alphabet="abfghijkrsuvyz0123456789 ;(){}.=,\n", max_size=60)
_FORBIDDEN = ["webmcp", "WebMCP", "web_mcp", "modelContext", "model_context", "MODELCONTEXT", "navigator.modelContext",
              "document['modelContext']", "'model' + 'Context'", "'web' + 'mcp'", "model\\u0043ontext", "web\\x6dcp"]
_NEAR_MISSES = ["web mcp", "model Context", "modelCon text", "mcp", "webpack", "modelConfig", "contextModel",
                "model-context", "web.mcp", "'model' - 'Context'", "model\\u0020Context"]


@settings(max_examples=300, deadline=None)
@given(before=_FILLER, after=_FILLER, planted=st.sampled_from([(w, True) for w in _FORBIDDEN] + [(w, False) for w in _NEAR_MISSES]))
def test_webmcp_rule_property(before, after, planted):
    """Rejected exactly when a forbidden spelling was planted (the label is the oracle, not the
    detector); a rejection never reaches the upstream."""
    import tempfile
    from pathlib import Path

    word, forbidden = planted
    code = f"{before} {word} {after}"
    with tempfile.TemporaryDirectory() as d:
        s, up = session("playwright", Path(d))
        reply = run(s.handle(call("execute_playwright_code", session_id="S1", code=code)))
    assert (len(up.sent) == 0) == forbidden, code
    assert ("webmcp_in_code" in reply["result"]["content"][0]["text"]) == forbidden


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=100), st.text(max_size=100).map(str.encode),
                 st.recursive(st.none() | st.integers() | st.text(max_size=5), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3)).map(lambda v: json.dumps(v).encode())))
def test_no_line_crashes_the_proxy(line):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        s, up = session("playwright", Path(d))
        run(s.handle_line(line))
        assert all(m.get("params", {}).get("name") in (None, "execute_playwright_code") for m in up.sent if isinstance(m, dict))


def test_strip_guidance():
    assert strip_webmcp_guidance("Run code. A `webmcp` client is in scope. Return a value.") == "Run code. Return a value."


# -- properties of the framing and of the WebMCP rule ---------------------------------------------

from pytest_webbench.proxy.framing import HEAD_BYTES, Oversized, read_lines  # noqa: E402

LIMIT = 64


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=150).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")), max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=97), max_size=20),
    final_newline=st.booleans(),
)
def test_framing_property(lines, cuts, final_newline):
    """However the bytes arrive, every line comes out whole, and a line over the limit comes out
    as Oversized with its true size: never parsed, never merged with its neighbours."""
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")

    class Chunked(io.RawIOBase):  # a pipe that delivers the bytes in arbitrary pieces
        def __init__(self):
            self.pos, self.sizes = 0, iter(cuts)

        def readable(self):
            return True

        def readinto(self, buffer):
            size = min(len(buffer), next(self.sizes, len(buffer)), len(data) - self.pos)
            buffer[:size] = data[self.pos:self.pos + size]
            self.pos += size
            return size

    out = list(read_lines(io.BufferedReader(Chunked(), buffer_size=16), LIMIT))
    expected = [
        Oversized(len(line), line[:HEAD_BYTES]) if len(line) > LIMIT else line
        for line in lines if line.strip() or len(line) > LIMIT
    ]
    assert out == expected


_NAMES = st.sampled_from(["modelContext", "webmcp", "webMCP", "model_context", "web_mcp"])


@st.composite
def webmcp_reference(draw):
    """A reference to WebMCP in one of the spellings an agent might write."""
    name = "".join(c.upper() if draw(st.booleans()) else c.lower() for c in draw(_NAMES))
    obj = draw(st.sampled_from(["document", "navigator", "window", "globalThis", "(await page.evaluateHandle(() => document))"]))
    split = draw(st.integers(min_value=1, max_value=len(name) - 1))
    escaped_at = draw(st.integers(min_value=0, max_value=len(name) - 1))
    escaped = name[:escaped_at] + f"\\u{ord(name[escaped_at]):04x}" + name[escaped_at + 1:]
    form = draw(st.sampled_from([
        f"{obj}.{name}", f"{obj}?.{name}", f"{obj}['{name}']", f'{obj}["{name}"]', f"{obj}[`{name}`]",
        f"{obj}?.['{name}']", f"const run = {obj}.{name}.executeTool.bind({obj}.{name})",
        f"{obj}['{name[:split]}' + '{name[split:]}']", f'{obj}["{escaped}"]', f"{name}.invokeTool(ref, {{}})",
    ]))
    before = draw(st.sampled_from(["", "await page.goto(url); ", "const x = 1;\n", "return await page.evaluate(() => "]))
    return before + form


@settings(max_examples=300, deadline=None)
@given(webmcp_reference())
def test_every_spelling_of_webmcp_is_rejected_in_the_playwright_arm(code):
    assert mentions_webmcp(code)


_IDENT = st.from_regex(r"[a-z][a-zA-Z0-9]{0,10}", fullmatch=True)


@st.composite
def playwright_code(draw):
    """Ordinary Playwright code: never mentions WebMCP, so it must always be forwarded."""
    ident = draw(_IDENT)
    sel = draw(_IDENT)
    return draw(st.sampled_from([
        f"await page.click('#{sel}')", f"const {ident} = await page.textContent('.{sel}'); return {ident}",
        f"await page.goto('http://shop.localhost/{sel}')", f"return await page.evaluate(() => document.title + '{ident}')",
        f"await page.fill('input[name={sel}]', '{ident}')", f"return (await page.$$('{sel}')).length",
    ]))


@settings(max_examples=200, deadline=None)
@given(playwright_code())
def test_ordinary_playwright_code_is_forwarded(code):
    from hypothesis import assume

    assume(not any(w in code.lower() for w in ("webmcp", "web_mcp", "modelcontext", "model_context")))
    assert not mentions_webmcp(code)


_TOOLS = st.sampled_from(["execute_playwright_code", "browser_repl", "computer_action", "webmcp", "manage_browsers",
                          "get_connection_context", "get_more_tools", "search_docs", "exec_command"]) | st.text(max_size=8)
_ARGS = st.fixed_dictionaries({}, optional={
    "session_id": st.sampled_from(["S1", "S2", "", "s1"]) | st.integers() | st.none(),
    "action": st.sampled_from(["list", "invoke", "add_custom", "remove_custom", "list_custom", "LIST"]) | st.none(),
    "code": webmcp_reference() | playwright_code() | st.text(max_size=30),
    "context": st.text(max_size=10),
})


@settings(max_examples=300, deadline=None)
@given(arm=st.sampled_from(["control", "treatment", "playwright"]), tool=_TOOLS, args=_ARGS,
       msg_id=st.integers(min_value=1, max_value=10**9) | st.text(min_size=1, max_size=5))
def test_no_rejected_call_reaches_the_upstream(arm, tool, args, msg_id):
    import tempfile
    from pathlib import Path

    policy = arm_policy(arm)
    with tempfile.TemporaryDirectory() as d:
        s, up = session(arm, Path(d))
        reply = run(s.handle({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": tool, "arguments": args}}))
    assert reply["id"] == msg_id and ("result" in reply or "error" in reply)
    for sent in up.sent:  # everything that got through obeys every rule of the arm
        sent_args = sent["params"]["arguments"]
        assert sent["params"]["name"] in policy.tools and sent_args.get("session_id") == "S1"
        if sent["params"]["name"] == "webmcp":
            assert sent_args.get("action") in ("list", "invoke")
        if arm == "playwright":
            assert not mentions_webmcp(str(sent_args.get("code", "")))
    allowed = tool in policy.tools and args.get("session_id") == "S1" and (
        tool != "webmcp" or args.get("action") in ("list", "invoke")) and not (
        arm == "playwright" and isinstance(args.get("code"), str) and mentions_webmcp(args["code"]))
    assert len(up.sent) == (1 if allowed else 0)


def test_http_endpoint_refuses_oversized_bodies_by_id_and_keeps_serving(tmp_path):
    from starlette.testclient import TestClient

    from pytest_webbench.proxy.http_endpoint import MAX_BODY_BYTES, ProxyRoutes

    routes = ProxyRoutes()
    s, up = session("control", tmp_path)
    path = routes.add("t1", s)
    with TestClient(routes.app) as client:
        big = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {"code": "' + b"a" * MAX_BODY_BYTES + b'"}}}'
        refused = client.post(path, content=big, headers={"content-type": "application/json"})
        assert refused.status_code == 413 and refused.json()["id"] == 5
        listed = client.post(path, json={"jsonrpc": "2.0", "id": 6, "method": "tools/list"})
        assert listed.status_code == 200 and listed.json()["id"] == 6
        assert client.post(path, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        assert client.get(path).status_code == 405
        assert client.post("/trials/nope/x/mcp", json={}).status_code == 404
        # another trial's id without its route's key reaches nothing (sealed agents share this listener)
        guessed = client.post("/trials/t1/guessed-key/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        assert guessed.status_code == 404
    assert [m.get("method") for m in up.sent] == ["tools/list", "notifications/initialized"]
    assert read_call_log(tmp_path / "log.jsonl").records[0].rule == "invalid_message"


def test_huge_arguments_are_logged_bounded(tmp_path):
    s, up = session("control", tmp_path)
    run(s.handle(call("execute_playwright_code", session_id="S1", code="x" * 100_000)))
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert record.arguments["truncated"] is True and record.arguments["chars"] > 100_000
    assert len((tmp_path / "log.jsonl").read_text()) < 10_000
    assert len(up.sent[0]["params"]["arguments"]["code"]) == 100_000  # forwarded whole, logged bounded


AROUND = [
    ("await page.request.get('/api/products')", "direct_http_in_code"),
    ("const r = await page.context().request.post(u, {data: {}})", "direct_http_in_code"),
    ("const api = await playwright.request.newContext(); await api.get(u)", "direct_http_in_code"),
    ("return await page.evaluate(() => fetch('/api').then(r => r.text()))", "direct_http_in_code"),
    ("return await page.evaluate(() => { const x = new XMLHttpRequest(); x.open('GET', '/'); })", "direct_http_in_code"),
    ("return await page['req' + 'uest'].get(u)", "direct_http_in_code"),
    ("return await page?.request?.get(u)", "direct_http_in_code"),
    ("const { request } = page; return await request.get(u)", "direct_http_in_code"),
    ("const cdp = await context.newCDPSession(page); await cdp.send('Network.enable')", "cdp_in_code"),
    ("await page.route('**/*', (r) => r.fulfill({body: 'x'}))", "routing_in_code"),
    ("await context.routeFromHAR('x.har')", "routing_in_code"),
]
PAGE_API = [
    "await page.goto(u); return await page.title()",
    "await page.locator('.fetch-more').click(); return await page.textContent('h1')",
    "const r = await page.waitForResponse('**/api/*'); return r.status()",
    "await page.waitForRequest('**/api/*')",
    "const r = await page.goto(u); return r.request().method()",
    "return (await page.$$eval('.product', els => els.map(e => e.textContent)))",
]


@pytest.mark.parametrize("code, rule", AROUND)
def test_the_playwright_arm_s_code_may_not_go_around_the_page(tmp_path, code, rule):
    s, up = session("playwright", tmp_path)
    reply = run(s.handle(call("execute_playwright_code", session_id="S1", code=code)))
    assert reply["result"]["isError"] and up.sent == []
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert (record.decision, record.rule) == ("rejected", rule)
    # control and treatment may (their arms allow the REPL and WebMCP anyway): forwarded untouched
    c, cup = session("control", tmp_path / "c")
    run(c.handle(call("execute_playwright_code", session_id="S1", code=code)))
    assert len(cup.sent) == 1


@pytest.mark.parametrize("code", PAGE_API)
def test_the_playwright_arm_s_page_api_code_is_not_mistaken_for_going_around_it(tmp_path, code):
    s, up = session("playwright", tmp_path)
    run(s.handle(call("execute_playwright_code", session_id="S1", code=code)))
    assert len(up.sent) == 1


@pytest.mark.parametrize("line, why", [
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_playwright_code",'
     '"arguments":{"session_id":"S1","code":"\\ud800"}}}', "lone UTF-16 surrogate"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_playwright_code\\udfff","arguments":{}}}',
     "lone UTF-16 surrogate"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_playwright_code",'
     '"arguments":{"session_id":"S1","code":"1","x":' + "[" * 200 + "]" * 200 + "}}}", "nested deeper than 64"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + "[" * 5000 + "]" * 5000 + "}", "nested past its parser"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","error":{"code":1,"message":"x"},'
     '"params":{"name":"execute_playwright_code","arguments":{"session_id":"S1","code":"1"}}}', "carries no error"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_playwright_code",'
     '"arguments":{"session_id":"S1","code":"1","n":NaN}}}', "NaN and Infinity"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_playwright_code",'
     '"arguments":{"session_id":"S1","code":"1","n":[' + ",".join(["9e15"] * 240_000) + "]}}}", "over the browser server's limit"),
])
def test_what_the_browser_server_would_refuse_is_refused_here_as_the_agent_s(line, why, tmp_path):
    """The browser server answers these with an HTTP error, which counts as the harness's failure
    (an upstream failure errors the trial): so the agent could have its failed trial errored. They
    are refused at the proxy, logged, and never sent on."""
    s, up = session("control", tmp_path)
    for raw in (line, line.encode()):  # a str line, and the bytes of an HTTP body
        reply = run(s.handle_line(raw))
        assert reply["error"]["code"] == -32600 or reply["error"]["code"] == -32700, reply
        assert why in reply["error"]["message"], reply
    assert up.sent == [] and s.stats.upstream_failures == 0
    assert len(read_call_log(tmp_path / "log.jsonl").records) == 2  # each written, whatever it spelled
    emoji = call("execute_playwright_code", session_id="S1", code="\U0001F600")
    assert "result" in run(s.handle_line(json.dumps(emoji)))  # a surrogate pair, escaped: text, sent on
    assert len(up.sent) == 1


def test_a_call_log_line_is_written_whatever_the_agent_s_arguments_spell(tmp_path):
    from pytest_webbench.proxy.log import CallRecord

    log = CallLog(tmp_path / "log.jsonl")
    log.write(CallRecord(time=0.0, trial="t", seq=1, method="tools/call", tool="x\ud800", arguments={"k\udfff": ["\ud800"]},
                         decision="rejected", rule="tool_not_in_arm", outcome="rejected"))
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert record.tool == "x\ufffd" and record.arguments == {"k\ufffd": ["\ufffd"]}


def test_a_message_the_proxy_takes_is_one_the_browser_server_takes():
    """Past the MCP SDK's limit on a body the browser server answers HTTP 413, a failed upstream
    (the trial errored); and a message escaped to ASCII on the way grew up to six-fold."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    from pytest_webbench.proxy.framing import MAX_LINE_BYTES
    from pytest_webbench.proxy.http_endpoint import MAX_BODY_BYTES
    from pytest_webbench.proxy.framing import wire_bytes

    assert MAX_LINE_BYTES <= DEFAULT_MAX_REQUEST_BODY_SIZE and MAX_BODY_BYTES <= DEFAULT_MAX_REQUEST_BODY_SIZE
    line = json.dumps(call("execute_playwright_code", session_id="S1", code="\U0001F600" * 900_000), ensure_ascii=False).encode()
    assert len(line) < MAX_LINE_BYTES and len(wire_bytes(json.loads(line))) <= len(line)


def test_an_oversized_message_whose_id_is_not_json_is_logged_not_a_crash(tmp_path):
    s, _ = session("control", tmp_path)
    assert s.refuse_oversized(9_000_000, b'{"jsonrpc":"2.0","id":"\\x","method":"tools/call"', 4096) is None
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert record.rule == "invalid_message" and "9000000 bytes" in record.detail


def test_a_body_not_in_utf_8_is_refused_as_not_json(tmp_path):
    """json.loads reads UTF-16 and UTF-32 too, where a lone surrogate is no escape: sent on, it
    failed to encode and counted as the browser server's failure. MCP's JSON is UTF-8."""
    s, up = session("control", tmp_path)
    line = json.dumps(call("execute_playwright_code", session_id="S1", code="\ud800"))
    for body in (line.encode("utf-16"), line.replace("\\ud800", "\ud800").encode("utf-32-le", "surrogatepass")):
        reply = run(s.handle_line(body))
        assert reply["error"]["code"] == -32700 and "not JSON" in reply["error"]["message"], reply
    assert up.sent == [] and s.stats.upstream_failures == 0


def test_an_http_reply_holding_a_lone_surrogate_is_sent_as_json():
    """A browser server's text cut in the middle of an emoji: Starlette's JSONResponse failed on it (HTTP 500)."""
    from pytest_webbench.proxy.http_endpoint import MessageResponse

    body = MessageResponse({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "cut \ud83d"}]}}).body
    assert json.loads(body)["result"]["content"][0]["text"] == "cut \ud83d"


def test_an_agent_s_unhashable_webmcp_values_are_refused_or_accounted_never_a_crash(tmp_path):
    """A list where the proxy looks a value up (`action`, `tool_ref`) raised TypeError out of the
    proxy: the stdio proxy exited, the HTTP endpoint answered 500."""
    s, up = session("control", tmp_path)
    reply = run(s.handle(call("webmcp", session_id="S1", action=[])))
    assert "webmcp_action_forbidden" in reply["result"]["content"][0]["text"] and up.sent == []
    reply = run(s.handle(call("webmcp", session_id="S1", action="invoke", tool_ref=[1])))
    assert "result" in reply and len(up.sent) == 1
    assert list(s.stats.webmcp_invokes) == ["unknown:unreadable"]


def test_a_proxy_bug_on_a_message_is_an_error_reply_not_the_end_of_the_session(tmp_path, monkeypatch):
    s, up = session("control", tmp_path)

    def broken(message):
        raise KeyError("a bug")

    monkeypatch.setattr(s, "receive", broken)
    reply = run(s.handle_line(json.dumps(call("execute_playwright_code", session_id="S1", code="1"))))
    assert reply["id"] == 7 and reply["error"]["code"] == -32603 and "KeyError" in reply["error"]["message"]
    assert run(s.handle_line('{"jsonrpc": "2.0", "method": "notifications/initialized"}')) is None  # never answered
    assert up.sent == [] and [r.rule for r in read_call_log(tmp_path / "log.jsonl").records] == ["invalid_message"] * 2


class PageUpstream(RecordingUpstream):
    """Answers every tools/call with the text a page's WebMCP tool (or the server) chose."""

    def __init__(self, text: str, extra: dict | None = None):
        super().__init__()
        self.text, self.extra = text, extra or {}

    async def send(self, message, on_server_message=None):
        self.sent.append(message)
        return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": self.text}]}, **self.extra}


@pytest.mark.parametrize("action, text", [
    ("invoke", "[" * 5000),  # nested past json: RecursionError out of the accounting
    ("list", json.dumps({"tools": 5})),  # not a list: TypeError
    ("list", "[" * 5000),
])
def test_what_a_page_s_tool_returns_is_passed_on_and_logged_whatever_its_shape(action, text, tmp_path):
    up = PageUpstream(text)
    s = ProxySession(arm_policy("control"), "S1", up, CallLog(tmp_path / "log.jsonl"), trial="t")
    reply = run(s.handle(call("webmcp", session_id="S1", action=action, tool_ref="tr_1")))
    assert reply["result"]["content"][0]["text"] == text  # the page's own result, not a proxy error
    [record] = read_call_log(tmp_path / "log.jsonl").records
    assert record.decision == "forwarded" and record.outcome == "ok" and record.webmcp["action"] == action


def test_a_page_s_webmcp_status_and_tool_names_are_bounded_in_the_record(tmp_path):
    listed = {"tools": [{"tool_ref": "tr_1", "tool": {"name": "n" * 100_000}, "source": {"custom": True}}]}
    s = ProxySession(arm_policy("control"), "S1", PageUpstream(json.dumps(listed)), CallLog(tmp_path / "log.jsonl"), trial="t")
    run(s.handle(call("webmcp", session_id="S1", action="list")))
    s.upstream.text = json.dumps({"status": "x" * 1_000_000})
    run(s.handle(call("webmcp", session_id="S1", action="invoke", tool_ref="tr_1")))
    [key] = s.stats.webmcp_invokes
    assert key.startswith("injected:x") and len(key) < 200
    invoked = read_call_log(tmp_path / "log.jsonl").records[-1].webmcp
    assert len(invoked["tool"]) < 200 and len(invoked["status"]) < 200


def test_a_reply_with_a_result_and_an_error_that_is_no_object_is_logged_as_its_result(tmp_path):
    s = ProxySession(arm_policy("control"), "S1", PageUpstream("{}", {"error": "boom"}), CallLog(tmp_path / "log.jsonl"), trial="t")
    reply = run(s.handle(call("execute_playwright_code", session_id="S1", code="1")))
    assert reply["result"]["content"][0]["text"] == "{}"
    assert read_call_log(tmp_path / "log.jsonl").records[0].outcome == "ok"
