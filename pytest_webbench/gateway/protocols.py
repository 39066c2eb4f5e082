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
    estimated: bool = False  # it did not: counted from the request's and reply's bytes instead

    def estimate(self, request_bytes: int, reply_bytes: int) -> None:
        """A reply without usage still costs: about four bytes a token each way (an over-count for
        a stream's framing, which errs toward the cap)."""
        self.input, self.output = request_bytes // 4, reply_bytes // 4
        self.estimated = True

    def add(self, other: Usage) -> None:
        for name in ("input", "cached", "cache_written", "output", "reasoning"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.reported = self.reported or other.reported
        self.estimated = self.estimated or other.estimated


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


MAX_CALL_ARGUMENT_CHARS = 4000
MAX_REPLY_TEXT_CHARS = 10000
CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")  # Responses output items that ask for a tool


def _call(name: Any, arguments: Any) -> dict[str, str]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
    return {"name": str(name or "")[:200], "arguments": text[:MAX_CALL_ARGUMENT_CHARS]}


class ToolCalls:
    """What a reply says, as the model sent it: the tool calls it asks for and its text (the
    transcript of record's)."""

    def __init__(self, api: Api):
        self.api = api
        self.done: list[dict[str, str]] = []
        self.text = ""
        self._partial: dict[int, dict[str, Any]] = {}  # streamed calls still being assembled, by index

    def _say(self, text: Any) -> None:
        if isinstance(text, str) and len(self.text) < MAX_REPLY_TEXT_CHARS:
            self.text = (self.text + text)[:MAX_REPLY_TEXT_CHARS]

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if self.api == "responses":
            if kind == "response.output_item.done":
                self._responses_item(event.get("item"))
            elif kind == "response.completed" and isinstance(event.get("response"), dict):
                output = event["response"].get("output")
                if isinstance(output, list) and output:
                    self.done, self.text = [], ""  # the whole reply's list is the one of record
                    for item in output:
                        self._responses_item(item)
        elif self.api == "messages":
            if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
                block = event["content_block"]
                if block.get("type") in ("tool_use", "server_tool_use"):
                    self._partial[event.get("index", 0)] = {"name": block.get("name"), "json": ""}
                elif block.get("type") == "text":
                    self._say(block.get("text"))
            elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
                part = self._partial.get(event.get("index", 0))
                if part is not None and event["delta"].get("type") == "input_json_delta":
                    part["json"] += str(event["delta"].get("partial_json", ""))
                elif event["delta"].get("type") == "text_delta":
                    self._say(event["delta"].get("text"))
            elif kind == "content_block_stop":
                part = self._partial.pop(event.get("index", 0), None)
                if part is not None:
                    self.done.append(_call(part["name"], part["json"] or "{}"))
            elif kind == "message":  # whole
                for block in event.get("content") or []:
                    if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                        self.done.append(_call(block.get("name"), block.get("input")))
                    elif isinstance(block, dict) and block.get("type") == "text":
                        self._say(block.get("text"))
        elif self.api == "chat":
            for choice in event.get("choices") or []:
                if not isinstance(choice, dict):
                    continue
                whole = choice.get("message")
                if isinstance(whole, dict):
                    self._say(whole.get("content"))
                    for call in whole.get("tool_calls") or []:
                        function = call.get("function") or {} if isinstance(call, dict) else {}
                        self.done.append(_call(function.get("name"), function.get("arguments")))
                delta = choice.get("delta")
                if isinstance(delta, dict):
                    self._say(delta.get("content"))
                for call in (delta.get("tool_calls") or []) if isinstance(delta, dict) else []:
                    if not isinstance(call, dict):
                        continue
                    part = self._partial.setdefault(call.get("index", 0), {"name": "", "json": ""})
                    function = call.get("function") or {}
                    part["name"] += str(function.get("name") or "")
                    part["json"] += str(function.get("arguments") or "")

    def _responses_item(self, item: Any) -> None:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    self._say(part.get("text"))
        if isinstance(item, dict) and item.get("type") in CALL_ITEMS:
            name = item.get("name") or item.get("type")
            if item.get("namespace"):
                name = f"{item['namespace']}__{name}"
            self.done.append(_call(name, item.get("arguments", item.get("input", item.get("action")))))

    def close(self) -> list[dict[str, str]]:
        for _, part in sorted(self._partial.items()):  # chat's streamed calls, or a Messages block cut off
            self.done.append(_call(part["name"], part["json"] or "{}"))
        self._partial = {}
        return self.done


class StreamReader:
    """Reads usage and the tool calls asked for from a reply as its bytes pass through, without
    holding the reply: SSE `data:` lines are parsed one by one (CRLF or LF), a JSON reply at its end."""

    def __init__(self, api: Api, event_stream: bool):
        self.api, self.event_stream = api, event_stream
        self.usage = Usage()
        self.calls = ToolCalls(api)
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
            self.calls.event(event)

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
                         "messages": {"type": "message", "usage": body.get("usage"), "content": body.get("content")}}.get(self.api, body)
                usage_from_event(self.api, whole, self.usage)
                self.calls.event(whole)
        return self.usage


def refusal(api: Api, message: str) -> tuple[int, dict, dict[str, str]]:
    """(status, body, headers) of a refusal the API's CLI stops on at once, without a retry (the
    pinned CLIs' behaviour, docs/research/cli-behaviour-at-a-spend-cap.md): Codex and Pi stop on
    429 `insufficient_quota` (Pi decides by the text: "insufficient_quota" is never retried),
    Claude Code on 402 `billing_error` with `x-should-retry: false`."""
    if api == "messages":
        return 402, {"type": "error", "error": {"type": "billing_error", "message": message}}, {"x-should-retry": "false"}
    return 429, {"error": {"message": message, "type": "insufficient_quota", "code": "insufficient_quota", "param": None}}, {}


def invalid_request(api: Api, message: str) -> dict:
    """The body of a request the gateway refuses as malformed or not allowed (a 4xx)."""
    if api == "messages":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None, "param": None}}


def unauthorized(api: Api, message: str) -> tuple[int, dict]:
    if api == "messages":
        return 401, {"type": "error", "error": {"type": "authentication_error", "message": message}}
    return 401, {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key", "param": None}}
