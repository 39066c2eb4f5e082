"""The checks the proxy applies to one `tools/call`, each named so a rejection says which rule."""

from __future__ import annotations

import re
from typing import Any

from ..design.arms import WEBMCP_TOOL, ArmPolicy

# Any spelling of WebMCP in code: webmcp, modelContext, document?.modelContext,
# navigator["modelContext"], a bound executeTool... all contain one of these, case-insensitively.
WEBMCP_IN_CODE = re.compile(r"web_?mcp|model_?context", re.IGNORECASE)
CODE_ARGUMENTS = ("code",)
# What the playwright arm's code may not do besides WebMCP: each a rule name and the spellings that
# reach it. Static, like the WebMCP check; on the local backend the same members are also missing
# from the code's scope at run time (browsers/driver.js), for what a spelling here misses.
AROUND_THE_PAGE = (
    ("direct_http_in_code", re.compile(
        r"\b(?:page|context|browser|playwright)\s*(?:\(\s*\))?\s*\??\.\s*request\b"  # page.request, context()?.request
        r"|\brequest\s*\??\.\s*newContext\b|\bAPIRequestContext\b"
        r"|\??\.\s*request\s*\??\.\s*(?:get|post|put|patch|delete|head|fetch)\s*\("
        r"|\{[^}]*\brequest\b[^}]*\}\s*=\s*(?:await\s+)?(?:page|context|browser|playwright)\b"  # const { request } = page
        r"|\bfetch\s*\(|\bXMLHttpRequest\b|\bsendBeacon\b|\bEventSource\b|\bnew\s+WebSocket\b"
        r"|\[\s*['\"`](?:request|fetch)['\"`]\s*\]")),
    ("cdp_in_code", re.compile(r"\bnewCDPSession\b|\bnewBrowserCDPSession\b|\bconnectOverCDP\b")),
    ("routing_in_code", re.compile(r"\??\.\s*(?:route|routeFromHAR|routeWebSocket|unroute|unrouteAll)\s*\("
                                   r"|\[\s*['\"`](?:route|routeFromHAR|routeWebSocket)['\"`]\s*\]")),
)
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
        if not isinstance(action, str) or action not in policy.webmcp_actions:  # a list is unhashable
            raise Rejection(
                "webmcp_action_forbidden",
                f"webmcp action {action!r} is not allowed here (allowed: {', '.join(sorted(policy.webmcp_actions))})",
            )
    for key in CODE_ARGUMENTS:
        code = arguments.get(key)
        if not isinstance(code, str):
            continue
        if policy.forbid_webmcp_in_code and mentions_webmcp(code):
            raise Rejection("webmcp_in_code", "code that refers to WebMCP is not allowed in this arm")
        if policy.page_api_only and (rule := goes_around_the_page(code)):
            raise Rejection(rule, "this arm drives the page through Playwright's page API only: no direct HTTP "
                                  "(fetch, page.request, XMLHttpRequest), no CDP session, no routing of traffic")


_JS_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")
_STRING_JOIN = re.compile(r"""['"`]\s*\+\s*['"`]""")


def mentions_webmcp(code: str) -> bool:
    """A static check, so it also looks through the cheap disguises: JS escapes in names
    (`model\\u0043ontext`) and split string literals (`'model' + 'Context'`). Code built at run
    time (fromCharCode, atob) is beyond it; the arm's instructions forbid WebMCP too."""
    return bool(WEBMCP_IN_CODE.search(code) or WEBMCP_IN_CODE.search(_undisguised(code)))


def goes_around_the_page(code: str) -> str | None:
    """The rule a piece of code breaks by going around the page, if any (same disguises looked
    through as for WebMCP)."""
    plain = _undisguised(code)
    for rule, pattern in AROUND_THE_PAGE:
        if pattern.search(code) or pattern.search(plain):
            return rule
    return None


def _undisguised(code: str) -> str:
    """The code with JS escapes decoded and split string literals joined."""
    return _STRING_JOIN.sub("", _JS_ESCAPE.sub(lambda m: _char(int(next(g for g in m.groups() if g), 16)), code))


def _char(code_point: int) -> str:
    try:
        return chr(code_point)
    except ValueError:
        return ""


def filter_tools(policy: ArmPolicy, tools: list[Any]) -> list[dict]:
    kept = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        name = tool.get("name")
        if name in NEVER_ADVERTISED or not isinstance(name, str) or not policy.allows_tool(name):
            continue
        if policy.forbid_webmcp_in_code:
            tool = _without_webmcp_guidance(tool)
        kept.append(tool)
    return kept


def _without_webmcp_guidance(value: Any) -> Any:
    """The tool's description and every description inside its schemas, WebMCP sentences cut."""
    if isinstance(value, dict):
        return {
            k: strip_webmcp_guidance(v) if k == "description" and isinstance(v, str) else _without_webmcp_guidance(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_without_webmcp_guidance(v) for v in value]
    return value


def strip_webmcp_guidance(description: str) -> str:
    """Drops every sentence (or parenthesised aside) that mentions WebMCP."""
    without_asides = re.sub(r"\s*\([^()]*\)", lambda m: "" if WEBMCP_IN_CODE.search(m.group(0)) else m.group(0), description)
    sentences = re.split(r"(?<=[.!?])\s+", without_asides)
    kept = [s for s in sentences if not WEBMCP_IN_CODE.search(s)]
    return " ".join(kept).strip()
