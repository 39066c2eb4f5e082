"""The model APIs the runners speak, as far as the gateway needs them: which request path is
which API, where a reply's usage is (streamed or not), and the refusal each CLI takes as final.

Usage fields (checked against the pinned CLIs' own requests, docs/research/cli-behaviour-at-a-spend-cap.md):
- Responses (Codex): `response.completed` -> `response.usage` {input_tokens (cached included),
  input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens};
- Messages (Claude Code): `message_start.message.usage` {input_tokens (cached apart),
  cache_read_input_tokens, cache_creation_input_tokens}, each field overridden by a later
  `message_delta.usage`, whose output_tokens is cumulative;
- chat completions (Pi, which sets stream_options.include_usage): the last chunk with `usage`
  {prompt_tokens (cached included), completion_tokens, prompt_tokens_details.cached_tokens}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Api = Literal["responses", "messages", "chat", "other"]


@dataclass
class Usage:
    input: int = 0  # every input token, cached ones included
    cached: int = 0  # read from a cache
    cache_written: int = 0  # written to a cache (Messages)
    output: int = 0
    reasoning: int = 0  # part of output, where the API says
    reported: bool = False  # the reply carried usage at all

    def add(self, other: Usage) -> None:
        for name in ("input", "cached", "cache_written", "output", "reasoning"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.reported = self.reported or other.reported


def api_of(path: str) -> Api:
    path = "/" + path.strip("/")
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    if path.endswith("/chat/completions"):
        return "chat"
    return "other"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_from_event(api: Api, event: dict, usage: Usage) -> None:
    """Folds one streamed event (or a whole JSON reply) into `usage`, in place."""
    if api == "responses":
        body = event.get("response") if event.get("type") == "response.completed" else (event if "usage" in event and "output" in event else None)
        found = (body or {}).get("usage") if isinstance(body, dict) else None
        if isinstance(found, dict):
            usage.input, usage.output = _int(found.get("input_tokens")), _int(found.get("output_tokens"))
            usage.cached = _int((found.get("input_tokens_details") or {}).get("cached_tokens"))
            usage.reasoning = _int((found.get("output_tokens_details") or {}).get("reasoning_tokens"))
            usage.reported = True
    elif api == "messages":
        found = None
        if event.get("type") == "message_start":
            found = (event.get("message") or {}).get("usage")
        elif event.get("type") == "message_delta":
            found = event.get("usage")
        elif event.get("type") == "message":  # a whole, unstreamed reply
            found = event.get("usage")
        if isinstance(found, dict):
            fresh = found.get("input_tokens")
            read = found.get("cache_read_input_tokens")
            written = found.get("cache_creation_input_tokens")
            if fresh is not None or read is not None or written is not None:
                # Messages counts input apart from the cache: total input = fresh + read + written
                fresh_now = _int(fresh) if fresh is not None else usage.input - usage.cached - usage.cache_written
                usage.cached = _int(read) if read is not None else usage.cached
                usage.cache_written = _int(written) if written is not None else usage.cache_written
                usage.input = fresh_now + usage.cached + usage.cache_written
            if found.get("output_tokens") is not None:
                usage.output = _int(found.get("output_tokens"))  # cumulative: the last one holds
            usage.reported = True
    elif api == "chat":
        found = event.get("usage")
        if isinstance(found, dict):
            usage.input, usage.output = _int(found.get("prompt_tokens")), _int(found.get("completion_tokens"))
            usage.cached = _int((found.get("prompt_tokens_details") or {}).get("cached_tokens"))
            usage.reasoning = _int((found.get("completion_tokens_details") or {}).get("reasoning_tokens"))
            usage.reported = True


class StreamReader:
    """Reads usage from a reply as its bytes pass through, without holding the reply: SSE `data:`
    lines are parsed one by one (CRLF or LF), a JSON reply at its end."""

    def __init__(self, api: Api, event_stream: bool):
        self.api, self.event_stream = api, event_stream
        self.usage = Usage()
        self._pending = b""
        self._whole = bytearray()

    def feed(self, chunk: bytes) -> None:
        if not self.event_stream:
            if len(self._whole) < 16 * 1024 * 1024:
                self._whole += chunk
            return
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            usage_from_event(self.api, event, self.usage)

    def close(self) -> Usage:
        if self.event_stream and self._pending:
            self._line(self._pending.rstrip(b"\r"))
        elif not self.event_stream and self._whole:
            try:
                body = json.loads(bytes(self._whole))
            except ValueError:
                body = None
            if isinstance(body, dict):
                whole = {"responses": {"type": "response.completed", "response": body},
                         "messages": {"type": "message", "usage": body.get("usage")}}.get(self.api, body)
                usage_from_event(self.api, whole, self.usage)
        return self.usage


def refusal(api: Api, message: str) -> tuple[int, dict, dict[str, str]]:
    """(status, body, headers) of a refusal the API's CLI stops on at once, without a retry (the
    pinned CLIs' behaviour, docs/research/cli-behaviour-at-a-spend-cap.md): Codex and Pi stop on
    429 `insufficient_quota` (Pi decides by the text: "insufficient_quota" is never retried),
    Claude Code on 402 `billing_error` with `x-should-retry: false`."""
    if api == "messages":
        return 402, {"type": "error", "error": {"type": "billing_error", "message": message}}, {"x-should-retry": "false"}
    return 429, {"error": {"message": message, "type": "insufficient_quota", "code": "insufficient_quota", "param": None}}, {}


def unauthorized(api: Api, message: str) -> tuple[int, dict]:
    if api == "messages":
        return 401, {"type": "error", "error": {"type": "authentication_error", "message": message}}
    return 401, {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key", "param": None}}
