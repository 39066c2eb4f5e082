"""The proxy's rules at the message level, against a recording upstream (nothing real behind it)."""

import asyncio
import json

import pytest
from hypothesis import given, settings, strategies as st

from pytest_webbench.arms import arm_policy
from pytest_webbench.proxy.log import CallLog, read_call_log
from pytest_webbench.proxy.relay import ProxySession
from pytest_webbench.proxy.rules import WEBMCP_IN_CODE, strip_webmcp_guidance

TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object"}} for n, d in [
    ("execute_playwright_code", "Run code. A `webmcp` client is in scope. Return a value."),
    ("browser_repl", "REPL"), ("computer_action", "Mouse"), ("webmcp", "WebMCP tools"),
    ("manage_browsers", "lifecycle"), ("get_connection_context", "account"), ("get_more_tools", "more"),
]]


class RecordingUpstream:
    def __init__(self):
        self.sent = []

    async def send(self, message):
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


@pytest.mark.parametrize("line", [b"not json", b"[1,2]", b'{"jsonrpc": "1.0", "id": 3}', b"\xff\xfe"])
def test_garbage_is_refused_and_logged(line, tmp_path):
    s, up = session("control", tmp_path)
    reply = run(s.handle_line(line))
    assert up.sent == [] and s.stats.bad_messages == 1
    if reply is not None:
        assert "error" in reply
    assert read_call_log(tmp_path / "log.jsonl").records[0].rule == "invalid_message"


def test_a_cut_off_log_line_does_not_break_the_reader(tmp_path):
    s, _ = session("control", tmp_path)
    run(s.handle(call("execute_playwright_code", session_id="S1", code="1")))
    with (tmp_path / "log.jsonl").open("a") as f:
        f.write('{"time": 1, "tri')
    contents = read_call_log(tmp_path / "log.jsonl")
    assert len(contents.records) == 1 and contents.unreadable_lines == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_webmcp_rule_property(code):
    # Rejected iff the code mentions WebMCP; and a rejection never reaches the upstream.
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        s, up = session("playwright", Path(d))
        run(s.handle(call("execute_playwright_code", session_id="S1", code=code)))
        mentions = bool(WEBMCP_IN_CODE.search(code))
        assert (len(up.sent) == 0) == mentions


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
