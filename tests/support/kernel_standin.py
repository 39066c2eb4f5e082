"""A stand-in for Kernel's hosted MCP server: real MCP (the `mcp` SDK's server) over stdio or
streamable HTTP, offering the hosted tool list with its extras (a required `context` argument,
`get_more_tools`, lifecycle, account and docs tools) and replaying results in Kernel's shapes.

Every call it receives is appended to a JSON-lines record file, so a test can prove what the
proxy did not forward. Some inputs trigger behaviour a proxy must survive:
- `execute_playwright_code` code containing `progress`: a progress notification before the reply;
  `ping-client`: a ping request to the client, answered before the reply; `elicit-client`: a log
  notification, a ping and an elicitation on the call's own stream (served statefully over SSE
  they ride the POST's stream), the elicitation's answer in the result; `crash`: the server dies.
- `webmcp invoke` refs: `tr_native` completes, `tr_custom` (injected) completes, `tr_custom_error`
  ends with status error, `tr_stale` is refused as stale, `tr_unknown` times out outcome_unknown.

Run over stdio: `python tests/support/kernel_standin.py --record FILE`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from pytest_webbench.browsers.mcp_server import INSTRUCTIONS, TOOLS

CONTEXT_ARG = {"type": "string", "description": "Why you are calling this tool (analytics)."}
EXTRA_TOOLS = [
    types.Tool(name="get_more_tools", description="Discover more Kernel tools.", input_schema={"type": "object"}),
    types.Tool(name="search_docs", description="Search Kernel's docs (WebMCP guide included).", input_schema={"type": "object"}),
    types.Tool(name="exec_command", description="Run a shell command in the browser VM.", input_schema={"type": "object"}),
]
PAGE = {"window_id": 1, "tab_id": 1, "page_title": "CodeHub", "page_url": "https://codehub.example/pulls/23", "frame": "main"}
LISTED = [
    ("tr_native", "search_issues", None),
    ("tr_custom", "get_pull_request", {"id": "ct_1", "namespace": "codehub"}),
    ("tr_custom_error", "get_release", {"id": "ct_1", "namespace": "codehub"}),
    ("tr_stale", "get_commit", {"id": "ct_1", "namespace": "codehub"}),
    ("tr_unknown", "merge_pull_request", None),
]


def hosted_tools() -> list[types.Tool]:
    """Kernel's tools as the hosted server lists them with analytics on: `context` required."""
    tools = []
    for tool in [*TOOLS, *EXTRA_TOOLS]:
        schema = json.loads(json.dumps(tool.input_schema))
        schema.setdefault("properties", {})["context"] = CONTEXT_ARG
        schema["required"] = [*schema.get("required", []), "context"]
        tools.append(tool.model_copy(update={"input_schema": schema}))
    return tools


def _text(value: Any) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=json.dumps(value, indent=2))]


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_standin(record: Path) -> Server:
    def remember(name: str, arguments: dict) -> None:
        with record.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": name, "arguments": arguments}) + "\n")

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=hosted_tools())

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, dict(params.arguments or {})
        remember(name, args)
        if name == "execute_playwright_code":
            code = str(args.get("code", ""))
            if "crash" in code:
                os._exit(3)
            if "progress" in code:
                await ctx.session.report_progress(0.5, 1.0, "half way")
            if "ping-client" in code:
                await ctx.session.send_ping()
            if "elicit-client" in code:
                from mcp.shared.message import ServerMessageMetadata

                scoped = ServerMessageMetadata(related_request_id=ctx.request_id)
                await ctx.session.send_log_message("info", "about to ask", related_request_id=ctx.request_id)
                await ctx.session.send_request(types.PingRequest(), types.EmptyResult, metadata=scoped)
                answer = await ctx.session.elicit_form(
                    "Which colour?", {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]},
                    related_request_id=ctx.request_id)
                return types.CallToolResult(content=_text({"success": True, "result": answer.content, "action": answer.action}))
            if "big-result" in code:
                return types.CallToolResult(content=_text({"success": True, "result": "x" * 3_000_000}))
            return types.CallToolResult(content=_text({"success": True, "result": len(code), "error": None, "stdout": "", "stderr": ""}))
        if name == "webmcp":
            action = args.get("action")
            if action == "list":
                return types.CallToolResult(content=_text({"tools": [
                    {"tool_ref": ref, "tool": {"name": tool, "description": tool, "inputSchema": {"type": "object"}},
                     "source": {**PAGE, **({"custom": custom} if custom else {})}}
                    for ref, tool, custom in LISTED
                ]}))
            if action == "invoke":
                ref = args.get("tool_ref")
                if ref in ("tr_native", "tr_custom"):
                    return types.CallToolResult(content=_text({"invocation_id": f"inv_{ref}", "status": "completed", "output": {"number": 23}}))
                if ref == "tr_custom_error":
                    return types.CallToolResult(content=_text({"invocation_id": "inv_e", "status": "error", "error_text": "TypeError: release is undefined"}))
                if ref == "tr_unknown":
                    return _error('Error in webmcp (invoke): {"code": "outcome_unknown", "message": "the tool did not respond in time; it may have run", "invocation_id": "inv_u"}')
                return _error(f'Error in webmcp (invoke): {{"code": "tool_ref_stale", "message": "tool_ref {ref} is stale: its document navigated; call list again"}}')
            return _text({"ok": action})
        if name in ("browser_repl", "execute_browser_repl"):
            return types.CallToolResult(content=_text({"success": True, "content": [{"type": "text", "text": "1"}]}))
        if name == "computer_action":
            return types.CallToolResult(content=[types.TextContent(type="text", text="Executed 1 action(s) successfully")])
        return types.CallToolResult(content=_text({"tool": name, "ok": True}))

    return Server("kernel-mcp-server (stand-in)", version="1.0.0", instructions=INSTRUCTIONS,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main() -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--port-file", type=Path, help="serve streamable HTTP at /mcp on a free port, written here")
    args = parser.parse_args()
    server = build_standin(args.record)
    if args.port_file:
        return serve_http(server, args.port_file)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


def serve_http(server: Server, port_file: Path) -> None:
    """As Kernel hosts it: streamable HTTP, here as its own process so a test can kill it."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    config = uvicorn.Config(app, log_level="warning")
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(sock.getsockname()[1]))
    tmp.rename(port_file)  # the port appears whole, once the socket listens
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
