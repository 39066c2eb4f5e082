"""The proxy's core: one trial's MCP session, message by message.

It sits between an agent and the browser's MCP server at the JSON-RPC level, so it works the
same over stdio lines or HTTP posts and under both handshakes (`initialize` and the 2026
`server/discover`). It advertises only the arm's tools, rejects disallowed calls without
forwarding them, withholds the server's instructions, enforces the call cap and logs every
request with its decision and outcome.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..arms import WEBMCP_TOOL, ArmPolicy
from .log import CallLog, CallRecord, bounded
from .rules import Rejection, check_call, filter_tools

PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR = -32700, -32600, -32603
UPSTREAM_ERROR = -32000
HANDSHAKES = ("initialize", "server/discover")


class Upstream(Protocol):
    async def send(self, message: dict) -> dict | None: ...


@dataclass
class ProxyStats:
    forwarded_calls: int = 0
    rejected_calls: int = 0
    cap_hits: int = 0
    bad_messages: int = 0
    webmcp_invokes: dict[str, int] = field(default_factory=dict)  # "custom:completed" -> n


class ProxySession:
    def __init__(
        self, policy: ArmPolicy, session_id: str, upstream: Upstream, log: CallLog,
        trial: str, call_cap: int | None = None,
    ):
        self.policy, self.session_id, self.upstream, self.log = policy, session_id, upstream, log
        self.trial, self.call_cap = trial, call_cap
        self.stats = ProxyStats()
        self._seq = 0
        # tool_ref -> (tool name, custom?) from the latest webmcp list results.
        self._webmcp_refs: dict[str, tuple[str, bool]] = {}

    # -- entry point -----------------------------------------------------------------------
    async def handle_line(self, line: str | bytes) -> dict | None:
        """One inbound line or HTTP body: exactly one JSON-RPC message, or an error reply."""
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            return self._refuse(None, PARSE_ERROR, f"not JSON: {exc}", raw=line)
        return await self.handle(message)

    async def handle(self, message: Any) -> dict | None:
        if isinstance(message, list):
            return self._refuse(None, INVALID_REQUEST, "batches are not accepted: send one message at a time", raw=message)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            msg_id = message.get("id") if isinstance(message, dict) else None
            return self._refuse(msg_id, INVALID_REQUEST, "not a JSON-RPC 2.0 message", raw=message)
        method = message.get("method")
        if not isinstance(method, str):
            # A response from the client to a server request: pass it on, log nothing as a call.
            return await self.upstream.send(message) if "id" in message else None
        if "id" not in message:
            await self.upstream.send(message)  # a notification
            return None
        if method == "tools/call":
            return await self._tools_call(message)
        return await self._request(message)

    # -- requests --------------------------------------------------------------------------
    async def _request(self, message: dict) -> dict:
        started = time.perf_counter()
        reply = await self._forward(message)
        result = reply.get("result") if isinstance(reply, dict) else None
        if isinstance(result, dict):
            if message["method"] in HANDSHAKES:
                result.pop("instructions", None)  # usage guidance is withheld in every arm
            elif message["method"] == "tools/list" and isinstance(result.get("tools"), list):
                result["tools"] = filter_tools(self.policy, result["tools"])
        self._write(message["method"], None, None, "forwarded", started, reply)
        return reply

    async def _tools_call(self, message: dict) -> dict:
        started = time.perf_counter()
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        tool = params.get("name")
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        if not isinstance(tool, str):
            return self._refuse(message["id"], INVALID_REQUEST, "tools/call needs params.name", raw=message)
        try:
            check_call(self.policy, self.session_id, tool, arguments)
            if self.call_cap is not None and self.stats.forwarded_calls >= self.call_cap:
                self.stats.cap_hits += 1
                raise Rejection("call_cap", f"the call cap of {self.call_cap} browser calls is reached: give your answer now")
        except Rejection as rejection:
            self.stats.rejected_calls += 1
            reply = _tool_error(message["id"], f"Rejected by the benchmark proxy ({rejection.rule}): {rejection}")
            self._write("tools/call", tool, arguments, "rejected", started, reply, rule=rejection.rule,
                        cap_reached=rejection.rule == "call_cap")
            return reply
        self.stats.forwarded_calls += 1
        reply = await self._forward(message)
        webmcp = self._account_webmcp(arguments, reply) if tool == WEBMCP_TOOL else None
        self._write("tools/call", tool, arguments, "forwarded", started, reply, webmcp=webmcp)
        return reply

    async def _forward(self, message: dict) -> dict:
        try:
            reply = await self.upstream.send(message)
        except Exception as exc:  # the upstream died or answered garbage: tell the agent, keep going
            return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": UPSTREAM_ERROR, "message": f"browser server error: {exc}"}}
        if reply is None:
            return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": UPSTREAM_ERROR, "message": "browser server sent no reply"}}
        return reply

    # -- WebMCP accounting -----------------------------------------------------------------
    def _account_webmcp(self, arguments: dict, reply: dict) -> dict[str, Any]:
        action = arguments.get("action")
        payload = _result_json(reply)
        if action == "list" and isinstance(payload, dict):
            self._webmcp_refs = {}
            for entry in payload.get("tools") or []:
                if isinstance(entry, dict) and isinstance(entry.get("tool_ref"), str):
                    meta = entry.get("tool") if isinstance(entry.get("tool"), dict) else entry
                    custom = isinstance(entry.get("source"), dict) and bool(entry["source"].get("custom"))
                    self._webmcp_refs[entry["tool_ref"]] = (str(meta.get("name")), custom)
            return {"action": "list", "tools": len(self._webmcp_refs)}
        if action == "invoke":
            ref = arguments.get("tool_ref")
            name, custom = self._webmcp_refs.get(ref, (None, None))
            if name is None:
                status = "unlisted_ref"
            elif reply.get("error") or (reply.get("result") or {}).get("isError"):
                text = json.dumps(reply.get("result") or reply.get("error"))
                status = "unknown" if "outcome_unknown" in text else "stale_ref" if "stale" in text else "error"
            else:
                status = str((payload or {}).get("status") or "unknown")
            origin = "injected" if custom else "native" if custom is not None else "unknown"
            key = f"{origin}:{status}"
            self.stats.webmcp_invokes[key] = self.stats.webmcp_invokes.get(key, 0) + 1
            return {"action": "invoke", "tool": name, "origin": origin, "status": status}
        return {"action": action}

    # -- logging ---------------------------------------------------------------------------
    def _refuse(self, msg_id: Any, code: int, text: str, raw: Any) -> dict | None:
        self.stats.bad_messages += 1
        self._seq += 1
        self.log.write(CallRecord(
            time=time.time(), trial=self.trial, seq=self._seq, method="(invalid)", arguments=bounded(_printable(raw)),
            decision="rejected", rule="invalid_message", outcome="rejected", detail=text,
        ))
        if msg_id is None and code != PARSE_ERROR and not isinstance(raw, list):
            return None  # JSON-RPC: no id known, nothing to answer but a parse error
        return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text}}

    def _write(
        self, method: str, tool: str | None, arguments: Any, decision: str, started: float, reply: dict,
        rule: str | None = None, webmcp: dict | None = None, cap_reached: bool = False,
    ) -> None:
        self._seq += 1
        if decision == "rejected":
            outcome, detail = "rejected", None
        elif "error" in reply:
            outcome, detail = "error", str(reply["error"].get("message"))
        elif (reply.get("result") or {}).get("isError"):
            outcome, detail = "tool_error", _result_text(reply)[:500]
        else:
            outcome, detail = "ok", None
        self.log.write(CallRecord(
            time=time.time(), trial=self.trial, seq=self._seq, method=method, tool=tool,
            arguments=bounded(arguments) if arguments is not None else None, decision=decision, rule=rule,
            outcome=outcome, detail=detail, latency_ms=(time.perf_counter() - started) * 1000,
            webmcp=webmcp, cap_reached=cap_reached,
        ))


def _tool_error(msg_id: Any, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": text}], "isError": True}}


def _result_text(reply: dict) -> str:
    content = (reply.get("result") or {}).get("content") or []
    return "\n".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text")


def _result_json(reply: dict) -> Any:
    try:
        return json.loads(_result_text(reply))
    except ValueError:
        return None


def _printable(raw: Any) -> Any:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw
