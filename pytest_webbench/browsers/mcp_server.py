"""An MCP server with Kernel's tool surface over any `BrowserBackend`.

Tool names, argument shapes and result shapes follow Kernel's hosted MCP server: results are
text items holding pretty-printed JSON (plus image items for screenshots), failures of the
backend are `isError` texts of the form `Error in <tool> (<action>): <message>`, and code that
throws is a normal result with `success: false`. The proxy sits in front of it and decides what
each arm may see; this server offers everything, lifecycle and account tools included.

Run standalone over stdio (for the proxy's stdio upstream): `python -m pytest_webbench.browsers.mcp_server`.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from .base import BackendError, BrowserBackend

SERVER_NAME = "com.onkernel/kernel-mcp-server (local stand-in)"

# Kernel returns usage guidance as the server's instructions; the proxy withholds them.
INSTRUCTIONS = """Use any website on a user's behalf in a cloud browser: navigate, sign in, fill forms, buy, download.

for each step, prefer these layers in order. move to the next when the current one is unavailable or insufficient:

1. webmcp: tools the site itself exposes to agents.
2. execute_playwright_code: structured dom interaction.
3. computer_action: visual control, for pages the dom cannot drive."""

_SESSION = {"type": "string", "minLength": 1, "description": "Browser session ID or name."}
_ACTION_TYPES = [
    "click_mouse", "move_mouse", "type_text", "press_key", "scroll", "drag_mouse",
    "set_cursor", "sleep", "write_clipboard", "read_clipboard", "screenshot", "get_mouse_position",
]
_DATA_ACTIONS = {"screenshot", "read_clipboard", "get_mouse_position"}
_WEBMCP_ACTIONS = ["list", "invoke", "list_custom", "add_custom", "remove_custom"]


def _xy(extra: dict | None = None) -> dict:
    props = {"x": {"type": "number"}, "y": {"type": "number"}, **(extra or {})}
    return {"type": "object", "properties": props, "required": ["x", "y"]}


TOOLS: list[types.Tool] = [
    types.Tool(
        name="execute_playwright_code",
        description=(
            "Execute Playwright/TypeScript automation code against an existing Kernel browser session. "
            "`page`, `context` and `browser` are in scope, and a browser-wide `webmcp` client "
            "(await webmcp.listTools(); await webmcp.invokeTool(toolRef, input)). Return a value to see it."
        ),
        input_schema={
            "type": "object",
            "properties": {"session_id": _SESSION, "code": {"type": "string"}, "executor": {"type": "string"}},
            "required": ["session_id", "code"],
        },
    ),
    types.Tool(
        name="browser_repl",
        description=(
            "Execute persistent Browser REPL code: top-level bindings survive across calls until reset. "
            "Expression values are ignored; emit output with repl.write(value) or console.log. "
            "`page`, `context` and `browser` are in scope."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "session_id": _SESSION,
                "code": {"type": "string", "default": ""},
                "reset": {"type": "boolean", "default": False},
                "timeout_sec": {"type": "integer", "minimum": 1, "maximum": 150, "default": 60},
            },
            "required": ["session_id"],
        },
    ),
    types.Tool(
        name="computer_action",
        description=(
            "Execute computer actions on a browser session. Action types: " + ", ".join(_ACTION_TYPES) + ". "
            "screenshot, read_clipboard and get_mouse_position return data, so they must be the last action."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "session_id": _SESSION,
                "actions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": {"type": "string", "enum": _ACTION_TYPES},
                            "click_mouse": _xy({"button": {"type": "string"}, "num_clicks": {"type": "integer"}}),
                            "move_mouse": _xy(),
                            "type_text": {"type": "object", "properties": {"text": {"type": "string"}}},
                            "press_key": {"type": "object", "properties": {"keys": {"type": "array", "items": {"type": "string"}}}},
                            "scroll": _xy({"delta_x": {"type": "number"}, "delta_y": {"type": "number"}}),
                            "drag_mouse": {"type": "object", "properties": {"path": {"type": "array"}}},
                            "sleep": {"type": "object", "properties": {"duration_ms": {"type": "integer"}}},
                            "screenshot": {"type": "object", "properties": {"region": {"type": "object"}}},
                        },
                        "required": ["type"],
                    },
                },
            },
            "required": ["session_id", "actions"],
        },
    ),
    types.Tool(
        name="webmcp",
        description=(
            'Discover and invoke native and custom WebMCP tools in a Kernel browser. Use "list" to get the '
            'current snapshot and opaque tool_ref values, then "invoke" with the exact tool_ref and input. '
            "A tool_ref expires when its document navigates. Never retry invoke automatically after "
            "outcome_unknown: check the page instead."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": _WEBMCP_ACTIONS},
                "session_id": _SESSION,
                "exclude_custom": {"type": "boolean"},
                "namespace": {"type": "string"},
                "source": {"type": "string"},
                "force_overwrite_namespace": {"type": "boolean"},
                "custom_tool_id": {"type": "string"},
                "tool_ref": {"type": "string", "maxLength": 128},
                "input": {"type": "object"},
                "timeout_sec": {"type": "integer", "minimum": 1, "maximum": 120, "default": 60},
            },
            "required": ["action", "session_id"],
            "additionalProperties": True,
        },
    ),
    types.Tool(
        name="manage_browsers",
        description="Create, list, get and delete browser sessions.",
        input_schema={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["create", "list", "get", "delete"]},
                "session_id": {"type": "string"},
            },
            "required": ["action"],
        },
    ),
    types.Tool(
        name="get_connection_context",
        description="Inspect the authenticated Kernel connection before a project-scoped operation.",
        input_schema={"type": "object", "properties": {}},
    ),
]


class ToolError(Exception):
    """Becomes an isError result, worded as Kernel words it."""


def _json(value: Any) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=json.dumps(value, indent=2))]


class KernelSurface:
    """Dispatches Kernel's tools onto a backend. Sessions are created by the harness, or here."""

    def __init__(self, backend: BrowserBackend):
        self.backend = backend
        self._created = 0

    async def call(self, name: str, args: dict) -> list[types.ContentBlock]:
        handler = getattr(self, f"_tool_{name}", None)
        if handler is None:
            raise ToolError(f"Error: unknown tool {name}")
        action = args.get("action") or {"execute_playwright_code": "execute", "browser_repl": "execute"}.get(name, "call")
        try:
            return await handler(args)
        except BackendError as exc:
            detail = json.dumps(exc.body) if exc.body else str(exc)
            raise ToolError(f"Error in {name} ({action}): {detail}") from exc

    @staticmethod
    def _session(args: dict) -> str:
        session_id = args.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise ToolError("Error: session_id is required")
        return session_id

    async def _tool_execute_playwright_code(self, args: dict) -> list[types.ContentBlock]:
        code = args.get("code")
        if not isinstance(code, str):
            raise ToolError("Error: code is required")
        result = await self.backend.execute_playwright(self._session(args), code, timeout_sec=60)
        keys = ("success", "result", "error", "stdout", "stderr")
        return _json({k: result.get(k) for k in keys})

    async def _tool_browser_repl(self, args: dict) -> list[types.ContentBlock]:
        code, reset = args.get("code") or "", bool(args.get("reset", False))
        if not code and not reset:
            raise ToolError("Error in browser_repl (execute): code is required unless reset=true")
        timeout = min(max(int(args.get("timeout_sec") or 60), 1), 150)
        return _json(await self.backend.repl(self._session(args), code, reset=reset, timeout_sec=timeout))

    async def _tool_computer_action(self, args: dict) -> list[types.ContentBlock]:
        actions = args.get("actions")
        if not isinstance(actions, list) or not actions:
            raise ToolError("Error: actions must be a non-empty array")
        for i, action in enumerate(actions):
            kind = action.get("type") if isinstance(action, dict) else None
            if kind not in _ACTION_TYPES:
                raise ToolError(f"Error: actions[{i}].type must be one of {', '.join(_ACTION_TYPES)}")
            if kind in _DATA_ACTIONS and i != len(actions) - 1:
                raise ToolError(f"Error: {kind} must be the last action in the sequence.")
        session_id = self._session(args)
        if actions[-1]["type"] in {"read_clipboard", "get_mouse_position"}:
            raise ToolError(f"Error in computer_action (actions): {actions[-1]['type']} is not supported by the local backend")
        out = await self.backend.computer_action(session_id, actions)
        done = len(actions) - (1 if actions[-1]["type"] == "screenshot" else 0)
        if actions[-1]["type"] != "screenshot":
            return [types.TextContent(type="text", text=f"Executed {done} action(s) successfully")]
        blocks: list[types.ContentBlock] = []
        if done:
            blocks.append(types.TextContent(type="text", text=f"Executed {done} action(s), then captured screenshot."))
        viewport = out.get("viewport") or {}
        blocks.append(types.TextContent(
            type="text",
            text=f"Viewport: {viewport.get('width')}x{viewport.get('height')}. Use these dimensions as the "
            "coordinate space for click, scroll, and move actions.",
        ))
        blocks.append(types.ImageContent(type="image", data=out["results"][-1]["image"], mime_type="image/png"))
        return blocks

    async def _tool_webmcp(self, args: dict) -> list[types.ContentBlock]:
        action, session_id = args.get("action"), self._session(args)
        if action == "list":
            return _json(await self.backend.webmcp_list(session_id, exclude_custom=bool(args.get("exclude_custom"))))
        if action == "invoke":
            if not args.get("tool_ref"):
                raise ToolError("Error: tool_ref is required for invoke action.")
            if not isinstance(args.get("input"), dict):
                raise ToolError("Error: input is required for invoke action.")
            timeout = min(max(int(args.get("timeout_sec") or 60), 1), 120)
            result = await self.backend.webmcp_invoke(session_id, args["tool_ref"], args["input"], timeout_sec=timeout)
            keys = ("invocation_id", "status", "error_text", "output")
            return _json({k: result[k] for k in keys if k in result})
        if action == "add_custom":
            if not args.get("namespace") or not args.get("source"):
                raise ToolError("Error: namespace and source are required for add_custom action.")
            return _json(await self.backend.add_custom_tools(
                session_id, args["namespace"], args["source"], bool(args.get("force_overwrite_namespace"))
            ))
        if action == "list_custom":
            return _json(await self.backend.list_custom_tools(session_id))
        if action == "remove_custom":
            raise ToolError("Error in webmcp (remove_custom): not supported by the local backend")
        raise ToolError(f"Error: action must be one of {', '.join(_WEBMCP_ACTIONS)}")

    async def _tool_manage_browsers(self, args: dict) -> list[types.ContentBlock]:
        action = args.get("action")
        if action == "create":
            self._created += 1
            created = await self.backend.create_session(f"local-{self._created}")
            return _json({"browser": created})
        if action == "delete":
            await self.backend.delete_session(self._session(args))
            return [types.TextContent(type="text", text="Browser session deleted successfully")]
        if action == "get":
            return _json({"session_id": self._session(args)})
        if action == "list":
            return _json({"items": [], "has_more": False, "next_offset": None})
        raise ToolError("Error: action must be one of create, list, get, delete")

    async def _tool_get_connection_context(self, args: dict) -> list[types.ContentBlock]:
        return _json({"authentication": {"method": "none", "source": "local"}, "connection_scope": {"kind": "local"}})


def build_server(backend: BrowserBackend) -> Server:
    surface = KernelSurface(backend)

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            content = await surface.call(params.name, dict(params.arguments or {}))
        except ToolError as exc:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        return types.CallToolResult(content=content)

    return Server(
        SERVER_NAME, version="1.0.0", instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
    )


def main(argv: list[str] | None = None) -> None:
    """`--session ID [--goto URL] [--site URL]` opens a browser session before serving, as the
    harness does for a trial, so a client can call tools on it straight away. The session's browser
    reaches the `--goto` page's site and each `--site`, nothing else (the local backend's walls)."""
    import argparse

    import anyio
    from mcp.server.stdio import stdio_server

    from .local import LocalBackend

    parser = argparse.ArgumentParser(prog="python -m pytest_webbench.browsers.mcp_server")
    parser.add_argument("--session", action="append", default=[], help="open a session with this id first")
    parser.add_argument("--goto", help="URL to open in each of those sessions")
    parser.add_argument("--site", action="append", default=[], help="a site those sessions' browsers may reach")
    args = parser.parse_args(argv)

    async def serve() -> None:
        backend = LocalBackend()
        server = build_server(backend)
        try:
            for session_id in args.session:
                await backend.create_session(session_id, site_urls=[*args.site, *([args.goto] if args.goto else [])])
                if args.goto:
                    await backend.goto(session_id, args.goto)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            await backend.close()

    anyio.run(serve)


if __name__ == "__main__":
    main()
