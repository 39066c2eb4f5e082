"""The transcript of record and what is read from it (grading/transcript.py, trajectory_scan.py,
evidence.py): the scan reads hosts as a resolver does and decodes payloads, the CLI's own account
is checked against the gateway's, and a pass must have been shown by a permitted browser call."""

from __future__ import annotations

import base64

import pytest

from pytest_webbench.gateway.meter import ModelCall
from pytest_webbench.grading.evidence import answer_forms, unseen_flag
from pytest_webbench.grading.trajectory_scan import ipv4_of, is_loopback, scan_calls, targets_for
from pytest_webbench.grading.transcript import disagreements, transcript_of
from pytest_webbench.design.suite import WebbenchMeta

SITE = "http://shop.localhost:43803"
TARGETS = [targets_for("the site", [SITE]), targets_for("the browser backend", ["http://127.0.0.1:39001/mcp"]),
           targets_for("the task's files", paths=["/work/main/suites/local-web/tasks/shop-price"]),
           targets_for("a public site", ["https://github.com/"])]


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("2130706433", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"), ("127.000.000.001", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("1.2.3.4", "1.2.3.4"),
    ("256.1.1.1", None), ("1.2.3.4.5", None), ("0x", "0.0.0.0"), ("abc", None),
])
def test_ipv4_is_read_as_inet_aton_reads_it(text, expected):
    """Values from inet_aton(3) as glibc implements it (what curl and wget pass to connect)."""
    import socket

    got = ipv4_of(text)
    assert (str(got) if got else None) == expected
    try:
        libc = socket.inet_ntoa(socket.inet_aton(text))
    except OSError:
        libc = None
    if text != "0x":  # glibc refuses a bare 0x; reading it as 0 only widens the scan
        assert (str(got) if got else None) == libc


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "shop.localhost", "127.9.9.9", "0.0.0.0", "0", "::1", "[::1]",
                                  "::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:0:0:1", "::", "ip6-localhost", "127.1"])
def test_every_name_of_the_loopback_is_the_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["example.com", "128.0.0.1", "::2", "10.0.0.1", "localhost.example.com"])
def test_other_hosts_are_not(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("command", [
    "curl -s http://127.0.0.1:43803/",
    "curl 127.1:43803",
    "wget -qO- http://0x7f000001:43803/c/bottles",
    "curl http://2130706433:43803",
    "curl 'http://[::ffff:127.0.0.1]:43803/'",
    "curl http://[::1]:43803",
    "curl http://shop.localhost:43803/",
    "curl http://localhost:$PORT/",  # a port the shell computes
    "curl http://127.0.0.1:$((43800+3))/",
    "echo " + base64.b64encode(b"curl http://127.0.0.1:43803/").decode() + " | base64 -d | sh",
    "python3 -c \"exec(bytes.fromhex('" + b"import urllib.request;urllib.request.urlopen('http://127.1:43803')".hex() + "'))\"",
])
def test_the_scan_finds_the_site_however_it_is_spelled(command):
    [flag] = scan_calls([{"name": "exec_command", "arguments": {"cmd": command}}], TARGETS)
    assert "tried to reach the site" in flag


@pytest.mark.parametrize("command, reached", [
    ("curl -X POST http://127.0.0.1:39001/mcp -d '{}'", "the browser backend"),
    ("cat /work/main/suites/local-web/tasks/shop-price/task.toml", "the task's files"),
    ("curl https://github.com/owner/repo", "a public site"),
])
def test_the_scan_names_what_was_reached(command, reached):
    [flag] = scan_calls([{"name": "exec_command", "arguments": {"cmd": command}}], TARGETS)
    assert f"tried to reach {reached}" in flag


def test_a_decoded_payload_run_by_a_shell_is_flagged_even_unread():
    payload = base64.b64encode(bytes(range(256))).decode()  # decodes to no text
    [flag] = scan_calls([{"name": "exec_command", "arguments": {"cmd": f"echo {payload} | base64 -d | bash"}}], TARGETS)
    assert "ran a decoded payload" in flag


@pytest.mark.parametrize("call", [
    {"name": "exec_command", "arguments": {"cmd": "ls -la && cat answer.json"}},
    {"name": "exec_command", "arguments": {"cmd": "echo '{\"price\": 17.49}' > answer.json"}},
    {"name": "mcp__browser__execute_playwright_code", "arguments": {"code": "await page.goto('http://shop.localhost:43803/')"}},
    {"name": "exec_command", "arguments": {"cmd": "sleep 1; date +%H:%M"}},
])
def test_an_honest_call_is_not_flagged(call):
    assert scan_calls([call], TARGETS) == []


def _line(**fields) -> ModelCall:
    base = dict(time=0.0, trial="t", seq=1, api="responses", path="/responses", status=200, decision="forwarded")
    return ModelCall(**{**base, **fields})


def test_the_cli_s_account_is_checked_against_the_gateway_s():
    record = transcript_of([
        _line(tool_calls=[{"name": "mcp__browser__webmcp", "arguments": '{"session_id": "S", "action": "list"}'}]),
        _line(seq=2, tool_calls=[]),
        _line(seq=3, status=429, decision="refused"),
    ])
    assert record.turns == 2
    honest = [{"source": "agent", "tool_calls": [{"function_name": "webmcp", "arguments": {"action": "list", "session_id": "S"}}]},
              {"source": "agent", "message": "{}"}]
    assert disagreements(record, honest) == []  # renamed by the converter, same arguments: the same call
    forged = honest + [{"source": "agent", "tool_calls": [{"function_name": "exec_command", "arguments": {"cmd": "ls"}}]}]
    flags = disagreements(record, forged)
    assert any("3 model turns; the gateway answered 2" in f for f in flags)
    assert any("1 tool call(s) its model never asked for" in f and "exec_command" in f for f in flags)


def test_arguments_and_messages_no_parser_reads_are_compared_as_text_not_a_crash():
    """A model's (or a forged trajectory's) arguments nested past Python's parser, and a message's
    parts whose text is no string: each raised in the harness, and the trial was errored."""
    from pytest_webbench.trial.harbor_run import final_agent_message

    deep = "[" * 5000 + "]" * 5000
    record = transcript_of([_line(tool_calls=[{"name": "x", "arguments": deep}])])
    assert disagreements(record, [{"source": "agent", "tool_calls": [{"function_name": "x", "arguments": deep}]}]) == []
    assert disagreements(record, [{"source": "agent", "tool_calls": [{"function_name": "x", "arguments": "[" * 5000}]}])
    assert final_agent_message([{"source": "agent", "message": [{"text": 7}, {"text": '{"a": 1}'}]}]) == b'{"a": 1}'


def _meta(**answer) -> WebbenchMeta:
    return WebbenchMeta.model_validate({"site": "shop", "grading": "pinned", "turn_cap": 5, "spend_limit_usd": 1.0, "tool_batch": "shop",
                                        "answer": answer})


def test_a_pass_must_have_been_shown_by_a_permitted_call():
    meta = _meta(price={"type": "number", "equals": 17.49}, sku={"type": "string", "equals": "MUG-1"})
    forms = answer_forms(meta)
    assert "17.49" in forms["price"] and "1749" in forms["price"] and forms["sku"] == ["mug-1"]
    assert unseen_flag(meta, {"price", "sku"}, 0) is None
    flag = unseen_flag(meta, {"sku"}, 2)
    assert "price" in flag and "2 screenshot(s)" in flag and "not a clean pass" in flag
