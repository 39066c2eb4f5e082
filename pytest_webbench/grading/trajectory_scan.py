"""The trajectory scan: did the agent reach the site, the browser backend or the task's files
other than through the arm's browser tools?

It reads Harbor's ATIF trajectory (`agent/trajectory.json`, written by every installed agent)
and looks at every tool call that is not a browser MCP tool (a shell command, a file read, a
fetch) for the site's addresses, the backend's and proxy's addresses, or the task's folder. A
flag goes into the trial's record and the report; it never changes a score.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

BROWSER_TOOLS = ("execute_playwright_code", "browser_repl", "execute_browser_repl", "computer_action", "webmcp")
MAX_SHOWN = 160


def is_browser_tool(name: str) -> bool:
    """`webmcp`, `mcp__browser__webmcp`, `browser.webmcp`, `browser_webmcp`: the proxy's tools."""
    return any(name == tool or name.endswith(("__" + tool, "." + tool, "_" + tool)) for tool in BROWSER_TOOLS)


def url_needles(url: str) -> list[str]:
    """What a command reaching this URL would contain: host:port, and 127.0.0.1:port."""
    parts = urlsplit(url)
    if not parts.hostname:
        return []
    needles = [parts.netloc]
    if parts.port:
        needles.append(f"127.0.0.1:{parts.port}")
        needles.append(f"localhost:{parts.port}")
    return needles


def load_trajectory_steps(trajectory: Path) -> list[dict]:
    """The steps of Harbor's ATIF trajectory; none if the agent wrote none (or an unreadable one)."""
    try:
        steps = json.loads(trajectory.read_text(encoding="utf-8")).get("steps") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []


def scan_trajectory(steps: list[dict], targets: dict[str, list[str]]) -> list[str]:
    """Flags, one per offending tool call: `targets` maps what was reached (e.g. "the site") to
    the strings that show it (hosts with ports, folder paths)."""
    flags = []
    for step in steps:
        for call in step.get("tool_calls") or []:
            name = str(call.get("function_name", ""))
            if is_browser_tool(name):
                continue
            text = json.dumps(call.get("arguments"), ensure_ascii=False)
            for label, needles in targets.items():
                if any(n and n in text for n in needles):
                    shown = text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."
                    flags.append(f"{name} tried to reach {label} outside the browser tools: {shown}")
                    break
    return flags
