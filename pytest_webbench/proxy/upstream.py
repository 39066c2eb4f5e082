"""Upstream transports: where the proxy forwards what it lets through."""

from __future__ import annotations

import json
import os
import re

import httpx

SESSION_HEADER = "mcp-session-id"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env_refs(value: str) -> str:
    """`${KERNEL_API_KEY}` in a header value is read from the environment at send time, so the
    secret itself never sits on a command line or in a log."""

    def lookup(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise KeyError(f"environment variable {name} is not set (named in an upstream header)")
        return os.environ[name]

    return _ENV_REF.sub(lookup, value)


class HttpUpstream:
    """Streamable HTTP: POST each message; the reply is JSON or an SSE stream ending in it."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 180):
        self.url = url
        self._header_templates = dict(headers or {})
        self._client = httpx.AsyncClient(timeout=timeout)
        self._session_id: str | None = None

    async def send(self, message: dict) -> dict | None:
        headers = {k: expand_env_refs(v) for k, v in self._header_templates.items()}
        headers.update({"accept": "application/json, text/event-stream", "content-type": "application/json"})
        if self._session_id:
            headers[SESSION_HEADER] = self._session_id
        response = await self._client.post(self.url, content=json.dumps(message), headers=headers)
        if sid := response.headers.get(SESSION_HEADER):
            self._session_id = sid
        if response.status_code == 202 or "id" not in message or "method" not in message:
            return None
        response.raise_for_status()
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return _last_reply_in_sse(response.text, message.get("id"))
        return response.json()

    async def close(self) -> None:
        await self._client.aclose()


def _last_reply_in_sse(body: str, msg_id: object) -> dict | None:
    """The stream may carry server notifications before the reply: keep only the reply."""
    reply = None
    for event in body.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
        if not data:
            continue
        try:
            message = json.loads(data)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == msg_id and ("result" in message or "error" in message):
            reply = message
    return reply
