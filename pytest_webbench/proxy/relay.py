"""The proxy's core: one trial's MCP session, message by message.

It sits between an agent and the browser's MCP server at the JSON-RPC level, so it works the
same over stdio lines or HTTP posts and under both handshakes (`initialize` and the 2026
`server/discover`). It advertises only the arm's tools, rejects disallowed calls without
forwarding them, withholds the server's instructions, enforces the call cap and logs every
request with its decision and outcome.

The core is sans-IO: `receive` decides what to do with one inbound message (answer it now,
relay it, or forward it as a call), `complete` turns the upstream's reply into the agent's and
logs it. `handle` drives that over an async upstream (the fixture's HTTP endpoint); the stdio
mode drives it from threads, which on these machines costs a fraction of an event loop's
wake-ups (benchmarks/proxy_overhead.py).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..design.arms import WEBMCP_TOOL, ArmPolicy
from .framing import read_request, unsendable
from .log import CallLog, bounded
from .results import bounded_text, invoke_status, result_json, result_text, short
from .rules import Rejection, check_call, filter_tools

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
UPSTREAM_ERROR = -32000
HANDSHAKES = ("initialize", "server/discover")
# Requests the proxy forwards. Everything else an MCP server could offer (prompts, resources,
# completions, tasks) is where usage guidance and side doors live, so it is not offered.
FORWARDED_METHODS = frozenset({*HANDSHAKES, "ping", "tools/list", "tools/call", "logging/setLevel"})
EMPTY_LISTS = {"prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}
WITHHELD_CAPABILITIES = ("prompts", "resources", "completions", "tasks")
# An oversized line is not parsed, but its id usually sits near the start: answer it if found.
_ID_NEAR_START = re.compile(rb'"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")')


ServerMessageSink = Callable[[dict], Awaitable[None]]


class Upstream(Protocol):
    async def send(self, message: dict, on_server_message: ServerMessageSink | None = None) -> dict | None:
        """Forwards one message; the server's own messages before the reply go to the sink."""
        ...


@dataclass
class ProxyStats:
    forwarded_calls: int = 0
    rejected_calls: int = 0
    cap_hits: int = 0
    bad_messages: int = 0
    server_messages: int = 0
    upstream_failures: int = 0  # the browser server did not answer (dead, unreachable, garbled)
    webmcp_invokes: dict[str, int] = field(default_factory=dict)  # "injected:completed" -> n
    answer_seen: set[str] = field(default_factory=set)  # answer fields some permitted call's result showed
    screenshots: int = 0  # results that carried an image (what an image shows is not read)


@dataclass
class Answer:
    """Reply now, forward nothing (None: nothing to reply, as for a refused notification)."""
    reply: dict | None


@dataclass
class Relay:
    """Forward as is and expect no reply: a notification, or the client's answer to a server request."""
    message: dict


@dataclass
class Call:
    """Forward a request; hand its reply (or the failure) to `complete`."""
    message: dict
    tool: str | None = None
    arguments: dict | None = None
    started: float = field(default_factory=time.perf_counter)
    # The bytes the agent sent, forwarded as they are (a call is never rewritten on the way up).
    raw: bytes | None = None
    # Set by `complete` when the reply it returns differs from the upstream's.
    rewritten: bool = False


Step = Answer | Relay | Call


class ProxySession:
    def __init__(
        self, policy: ArmPolicy, session_id: str, upstream: Upstream, log: CallLog,
        trial: str, call_cap: int | None = None, watch: dict[str, list[str]] | None = None,
    ):
        self.policy, self.session_id, self.upstream, self.log = policy, session_id, upstream, log
        self.trial, self.call_cap = trial, call_cap
        # answer field -> the (casefolded) forms its value may take in a result: which permitted
        # call first showed each is logged, so a pass can show it came through the browser
        self.watch = watch or {}
        self.stats = ProxyStats()
        self._seq = itertools.count(1)
        # Calls may complete on several threads at once (stdio mode): accounting is serialised.
        self._lock = threading.Lock()
        # tool_ref -> (tool name, injected?) from the latest webmcp list result.
        self._webmcp_refs: dict[str, tuple[str, bool]] = {}

    async def aclose(self) -> None:
        close = getattr(self.upstream, "close", None)
        try:
            if close is not None:
                await close()
        finally:
            self.log.close()

    # -- async driver ----------------------------------------------------------------------
    async def handle_line(self, line: str | bytes, on_server_message: ServerMessageSink | None = None) -> dict | None:
        """The reply to one inbound line; server requests and notifications that arrive while a
        call runs go to `on_server_message` first (the agent must see a ping or an elicitation
        before the call can finish)."""
        return await self._drive(self.receive_line(line), on_server_message)

    async def handle(self, message: Any, on_server_message: ServerMessageSink | None = None) -> dict | None:
        return await self._drive(self.receive(message), on_server_message)

    async def _drive(self, step: Step, on_server_message: ServerMessageSink | None = None) -> dict | None:
        if isinstance(step, Answer):
            return step.reply
        if isinstance(step, Relay):
            try:
                await self.upstream.send(step.message)
            except Exception:
                pass  # nothing waits on a notification; the next call reports a dead upstream
            return None
        try:
            reply: dict | None | BaseException = await self.upstream.send(step.message, on_server_message)
        except Exception as exc:
            reply = exc
        try:
            return self.complete(step, reply)
        except Exception as exc:  # a proxy bug must not leave the agent without a reply
            return failed_reply(step, exc)

    # -- sans-IO core ----------------------------------------------------------------------
    def receive_line(self, line: str | bytes) -> Step:
        """One inbound line or HTTP body: exactly one JSON-RPC message, or an error reply."""
        try:
            message = read_request(line)
        except (ValueError, UnicodeDecodeError) as exc:
            return self._refuse(None, PARSE_ERROR, f"not JSON: {exc}", raw=line)
        except RecursionError:
            return self._refuse(None, PARSE_ERROR, "not JSON this proxy reads: nested past its parser", raw=line[:200])
        msg_id = _usable_id(message.get("id")) if isinstance(message, dict) else None
        if (problem := unsendable(line, message)) is not None:
            return self._refuse(msg_id, INVALID_REQUEST, problem, raw=line[:200])
        try:
            step = self.receive(message)
        except Exception as exc:  # a proxy bug must not take the agent's session down: refused, said on stderr
            print(f"webbench proxy: internal error on a message: {exc!r}", file=sys.stderr)
            return self._refuse(msg_id, INTERNAL_ERROR, f"the proxy failed on this message ({type(exc).__name__})",
                                raw=line[:200], answer=isinstance(message, dict) and "id" in message)  # never a notification
        if isinstance(step, Call) and isinstance(line, bytes) and b"\n" not in line:
            step.raw = line
        return step

    def refuse_oversized(self, size: int, head: bytes, limit: int) -> dict | None:
        """A line over the size limit: logged, and answered if its id can be read from its start."""
        match = _ID_NEAR_START.search(head)
        try:
            msg_id = json.loads(match.group(1)) if match else None
        except ValueError:  # an id such as "\x": not JSON after all, so unanswerable
            msg_id = None
        text = f"message of {size} bytes is over the proxy's limit of {limit} bytes"
        self._log_refusal(text, {"oversized_bytes": size, "head": head[:200].decode("utf-8", "replace")})
        return _error(msg_id, INVALID_REQUEST, text) if msg_id is not None else None

    def receive(self, message: Any) -> Step:
        if isinstance(message, list):
            return self._refuse(None, INVALID_REQUEST, "batches are not accepted: send one message at a time", raw=message)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            msg_id = message.get("id") if isinstance(message, dict) else None
            return self._refuse(_usable_id(msg_id), INVALID_REQUEST, "not a JSON-RPC 2.0 message", raw=message)
        has_id = "id" in message
        if has_id and _usable_id(message["id"]) is None:
            return self._refuse(None, INVALID_REQUEST, "id must be a string or an integer", raw=message)
        method = message.get("method")
        if method is not None and isinstance(message.get("error"), dict):  # the SDK reads it as an error reply
            return self._refuse(message.get("id"), INVALID_REQUEST, "a request carries no error", raw=message)
        if method is None:
            if has_id and (("result" in message) != ("error" in message)):
                return Relay(message)  # the client's answer to a server request: not a call
            return self._refuse(message.get("id"), INVALID_REQUEST, "neither a request, a notification nor a response", raw=message)
        if not isinstance(method, str) or ("params" in message and not isinstance(message["params"], dict)):
            return self._refuse(message.get("id"), INVALID_REQUEST, "method must be a string and params an object", raw=message)
        if not has_id:
            if method.startswith("notifications/"):
                return Relay(message)
            # a notification is never answered (JSON-RPC), even one the proxy drops
            return self._refuse(None, INVALID_REQUEST, f"{method!r} sent as a notification", raw=message, answer=False)
        if method == "tools/call":
            return self._tools_call(message)
        if method in FORWARDED_METHODS:
            return Call(message)
        return Answer(self._not_offered(message))

    def complete(self, call: Call, reply: dict | None | BaseException) -> dict:
        """The agent's reply to a forwarded request, filtered and accounted, and its log record."""
        failure = None  # the browser server failed this call: the reply is ours
        if isinstance(reply, BaseException):
            failure = f"browser server error: {reply or type(reply).__name__}"
        elif not isinstance(reply, dict) or not (isinstance(reply.get("result"), dict) or isinstance(reply.get("error"), dict)):
            failure = "browser server sent no usable reply"
        if failure is not None:
            reply = _error(call.message["id"], UPSTREAM_ERROR, failure)
            call.rewritten = True
            with self._lock:
                self.stats.upstream_failures += 1
        method = call.message["method"]
        result = reply.get("result")
        webmcp = None
        with self._lock:
            if isinstance(result, dict) and method in (*HANDSHAKES, "tools/list"):
                call.rewritten = True
                if method in HANDSHAKES:
                    result.pop("instructions", None)  # usage guidance is withheld in every arm
                    capabilities = result.get("capabilities")
                    if isinstance(capabilities, dict):
                        for name in WITHHELD_CAPABILITIES:
                            capabilities.pop(name, None)
                elif method == "tools/list" and isinstance(result.get("tools"), list):
                    result["tools"] = filter_tools(self.policy, result["tools"])
            if call.tool == WEBMCP_TOOL:
                try:
                    webmcp = self._account_webmcp(call.arguments or {}, reply)
                except Exception as exc:  # what a page's tools return is the page's: it never stops the call
                    print(f"webbench proxy: webmcp accounting failed: {exc!r}", file=sys.stderr)
                    webmcp = {"action": short((call.arguments or {}).get("action")), "status": "unreadable"}
        self._write(method, call.tool, call.arguments, "forwarded", call.started, reply, webmcp=webmcp)
        return reply

    # -- requests --------------------------------------------------------------------------
    def _not_offered(self, message: dict) -> dict:
        started, method = time.perf_counter(), message["method"]
        if method in EMPTY_LISTS:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {EMPTY_LISTS[method]: [], "resultType": "complete"}}
        else:
            reply = _error(message["id"], METHOD_NOT_FOUND, f"{method} is not offered through the benchmark proxy")
        self._write(method, None, None, "rejected", started, reply, rule="method_not_offered")
        return reply

    def _tools_call(self, message: dict) -> Step:
        started = time.perf_counter()
        params = message.get("params") or {}
        tool = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            return self._refuse(message["id"], INVALID_REQUEST, "tools/call needs params.name (a string) and params.arguments (an object)", raw=message)
        with self._lock:  # the cap is checked and spent in one step
            try:
                check_call(self.policy, self.session_id, tool, arguments)
                if self.call_cap is not None and self.stats.forwarded_calls >= self.call_cap:
                    self.stats.cap_hits += 1
                    raise Rejection("call_cap", f"the call cap of {self.call_cap} browser calls is reached: give your answer now")
            except Rejection as rejection:
                self.stats.rejected_calls += 1
                text = f"Rejected by the benchmark proxy ({rejection.rule}): {rejection}"
                # a tool the arm does not offer is, to the agent, an unknown tool: MCP answers that with
                # a protocol error (-32602), not a tool result; a refused call of an offered tool is a result
                reply = (_error(message["id"], INVALID_PARAMS, f"Unknown tool: {tool!r}. {text}")
                         if rejection.rule == "tool_not_in_arm" else _tool_error(message["id"], text))
                self._write("tools/call", tool, arguments, "rejected", started, reply, rule=rejection.rule,
                            cap_reached=rejection.rule == "call_cap")
                return Answer(reply)
            self.stats.forwarded_calls += 1
        return Call(message, tool, arguments, started)

    # -- WebMCP accounting -----------------------------------------------------------------
    def _account_webmcp(self, arguments: dict, reply: dict) -> dict[str, Any]:
        action = arguments.get("action")
        payload = result_json(reply)
        if action == "list":
            if not isinstance(payload, dict):
                return {"action": "list", "tools": None}
            self._webmcp_refs = {}
            listed = payload.get("tools")
            for entry in listed if isinstance(listed, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("tool_ref"), str):
                    meta = entry.get("tool") if isinstance(entry.get("tool"), dict) else entry
                    injected = isinstance(entry.get("source"), dict) and bool(entry["source"].get("custom"))
                    self._webmcp_refs[entry["tool_ref"]] = (short(meta.get("name")), injected)
            return {"action": "list", "tools": len(self._webmcp_refs)}
        if action == "invoke":
            ref = arguments.get("tool_ref")  # the agent's: a list would not hash
            name, injected = self._webmcp_refs.get(ref, (None, None)) if isinstance(ref, str) else (None, None)
            status = invoke_status(reply, payload, listed=name is not None)
            origin = "unknown" if injected is None else "injected" if injected else "native"
            key = f"{origin}:{status}"
            self.stats.webmcp_invokes[key] = self.stats.webmcp_invokes.get(key, 0) + 1
            return {"action": "invoke", "tool": name, "origin": origin, "status": status}
        return {"action": action}

    # -- logging ---------------------------------------------------------------------------
    def _log_refusal(self, text: str, raw: Any) -> None:
        with self._lock:
            self.stats.bad_messages += 1
        self.log.write_call(
            time=time.time(), trial=self.trial, seq=next(self._seq), method="(invalid)", arguments=bounded(_printable(raw)),
            decision="rejected", rule="invalid_message", outcome="rejected", detail=text,
        )

    def _refuse(self, msg_id: Any, code: int, text: str, raw: Any, answer: bool = True) -> Answer:
        """An error reply; where the message's id cannot be read, its id is null (JSON-RPC 2.0: a
        parse error or an invalid request is answered so, never left without a reply)."""
        self._log_refusal(text, raw)
        return Answer(_error(msg_id, code, text) if answer else None)

    def _write(
        self, method: str, tool: str | None, arguments: Any, decision: str, started: float, reply: dict,
        rule: str | None = None, webmcp: dict | None = None, cap_reached: bool = False,
    ) -> None:
        if decision == "rejected":
            outcome, detail = "rejected", None
        elif isinstance(reply.get("error"), dict):
            outcome, detail = "error", str(reply["error"].get("message"))
        elif reply["result"].get("isError"):
            outcome, detail = "tool_error", result_text(reply)[:500]
        else:
            outcome, detail = "ok", None
        saw = self._saw(reply) if decision == "forwarded" and outcome == "ok" and method == "tools/call" else None
        self.log.write_call(
            time=time.time(), trial=self.trial, seq=next(self._seq), method=method, tool=tool,
            arguments=bounded(arguments) if arguments is not None else None, decision=decision, rule=rule,
            outcome=outcome, detail=detail, latency_ms=(time.perf_counter() - started) * 1000,
            webmcp=webmcp, cap_reached=cap_reached, result=bounded_text(reply) if method == "tools/call" else None,
            saw=saw or None,
        )

    def _saw(self, reply: dict) -> list[str]:
        content = (reply.get("result") or {}).get("content")
        if isinstance(content, list) and any(isinstance(c, dict) and c.get("type") == "image" for c in content):
            self.stats.screenshots += 1
        pending = [f for f in self.watch if f not in self.stats.answer_seen]
        if not pending:
            return []
        text = result_text(reply).casefold()
        newly = [f for f in pending if any(form in text for form in self.watch[f])]
        self.stats.answer_seen.update(newly)
        return newly


def failed_reply(call: Call, exc: Exception) -> dict:
    """The agent's answer to a forwarded call whose reply the proxy failed on (said on stderr)."""
    print(f"webbench proxy: internal error on a reply: {exc!r}", file=sys.stderr)
    return _error(call.message["id"], INTERNAL_ERROR, f"the proxy failed on this reply ({type(exc).__name__})")


def _usable_id(value: Any) -> Any:
    """MCP ids are strings or integers (not null, not a bool, not a float)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _error(msg_id: Any, code: int, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}}


def _tool_error(msg_id: Any, text: str) -> dict:
    # `resultType` is required under protocol 2026-07-28 and ignored by older clients.
    result = {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def _printable(raw: Any) -> Any:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw
