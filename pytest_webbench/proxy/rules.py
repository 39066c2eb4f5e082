"""The checks the proxy applies to one `tools/call`, each named so a rejection says which rule."""

from __future__ import annotations

import re
from typing import Any

from ..arms import WEBMCP_TOOL, ArmPolicy

# Any spelling of WebMCP in code: webmcp, modelContext, document?.modelContext,
# navigator["modelContext"], a bound executeTool... all contain one of these, case-insensitively.
WEBMCP_IN_CODE = re.compile(r"web_?mcp|model_?context", re.IGNORECASE)
CODE_ARGUMENTS = ("code",)
# Tools never advertised in any arm, whatever the upstream offers.
NEVER_ADVERTISED = frozenset({"get_more_tools"})


class Rejection(Exception):
    def __init__(self, rule: str, message: str):
        super().__init__(message)
        self.rule = rule


def check_call(policy: ArmPolicy, session_id: str, tool: str, arguments: dict[str, Any]) -> None:
    if not policy.allows_tool(tool):
        raise Rejection("tool_not_in_arm", f"the tool {tool!r} is not available in this arm")
    given = arguments.get("session_id")
    if given is None:
        raise Rejection("session_id_missing", "every browser call must name your session_id")
    if given != session_id:
        raise Rejection("session_id_foreign", f"session_id {given!r} is not your browser session")
    if tool == WEBMCP_TOOL:
        action = arguments.get("action")
        if action not in policy.webmcp_actions:
            raise Rejection(
                "webmcp_action_forbidden",
                f"webmcp action {action!r} is not allowed here (allowed: {', '.join(sorted(policy.webmcp_actions))})",
            )
    if policy.forbid_webmcp_in_code:
        for key in CODE_ARGUMENTS:
            code = arguments.get(key)
            if isinstance(code, str) and WEBMCP_IN_CODE.search(code):
                raise Rejection("webmcp_in_code", "code that refers to WebMCP is not allowed in this arm")


def filter_tools(policy: ArmPolicy, tools: list[dict]) -> list[dict]:
    kept = []
    for tool in tools:
        name = tool.get("name")
        if name in NEVER_ADVERTISED or not policy.allows_tool(name):
            continue
        if policy.forbid_webmcp_in_code and isinstance(tool.get("description"), str):
            tool = {**tool, "description": strip_webmcp_guidance(tool["description"])}
        kept.append(tool)
    return kept


def strip_webmcp_guidance(description: str) -> str:
    """Drops every sentence (or parenthesised aside) that mentions WebMCP."""
    sentences = re.split(r"(?<=[.!?])\s+", description)
    kept = [s for s in sentences if not WEBMCP_IN_CODE.search(s)]
    return " ".join(kept).strip()
