"""What the proxy reads of a browser call's result: its text (for the log and the answer
evidence), its JSON (a WebMCP tool's payload, which the page wrote), a WebMCP invoke's status, and
labels bounded where a page chooses them."""

from __future__ import annotations

import json
from typing import Any

from .log import MAX_RESULT_CHARS


def short(value: Any, limit: int = 100) -> str:
    """A value a page controls (a WebMCP status or tool name) as the record's key or label: bounded."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def result_text(reply: dict) -> str:
    content = (reply.get("result") or {}).get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type") == "text")


def bounded_text(reply: dict) -> str | None:
    error = reply.get("error")
    text = result_text(reply) if "result" in reply else str(error.get("message", "")) if isinstance(error, dict) else ""
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"... ({len(text) - MAX_RESULT_CHARS} more characters)"
    return text or None


def result_json(reply: dict) -> Any:
    try:
        return json.loads(result_text(reply))
    except (ValueError, RecursionError):
        return None


def invoke_status(reply: dict, payload: Any, listed: bool) -> str:
    """completed / error / canceled / awaiting_submission as Kernel reports them, `unknown` for an
    outcome_unknown (the tool may have run), `stale_ref` for a ref whose document navigated."""
    failed = isinstance(reply.get("error"), dict) or reply["result"].get("isError")
    if failed:
        text = json.dumps(reply.get("error") or reply["result"])
        if "outcome_unknown" in text:
            return "unknown"
        if "stale" in text or "tool_ref_stale" in text:
            return "stale_ref"
        return "error" if listed else "unlisted_ref"
    status = payload.get("status") if isinstance(payload, dict) else None
    return short(status) if status else "unreadable"
