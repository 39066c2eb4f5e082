"""The model APIs the runners speak, as far as the gateway needs them: which request path is
which API, where a reply's usage is (streamed or not), and the refusal each CLI takes as final.

Usage fields (checked against the pinned CLIs' own requests, docs/research/cli-behaviour-at-a-spend-cap.md):
- Responses (Codex): each terminal event, `response.completed`, `response.incomplete` (an output
  limit reached) and `response.failed`, -> `response.usage` {input_tokens (cached included),
  input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens};
- Messages (Claude Code): `message_start.message.usage` {input_tokens (cached apart),
  cache_read_input_tokens, cache_creation_input_tokens}, each field overridden by a later
  `message_delta.usage`, whose output_tokens is cumulative;
- chat completions (Pi, which sets stream_options.include_usage): the last chunk with `usage`
  {prompt_tokens (cached included), completion_tokens, prompt_tokens_details.cached_tokens}.

A reply's usage is `final` once the event that carries its last count was read (a Responses terminal
event, Messages' `message_delta`, chat's usage chunk, a whole reply's `usage`); a reply that ended
without it (an `error` event, a stream cut off) is charged what the gateway reserved for it. A count
that is not a whole number from 0 to MAX_REPLY_TOKENS is the provider's fault (`Usage.fault`).
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
    estimated: bool = False  # its usage was not read whole: counted as the worst the request could cost
    final: bool = False  # the event carrying the reply's last count was read
    fault: str | None = None  # the provider's count could not be read (not a whole number, or absurd)

    def estimate(self, input_bound: int, output_bound: int) -> None:
        """A reply whose usage was not read whole still costs: the most the request could have used
        (its input's bound and its output limit), which errs toward the cap."""
        self.input, self.cached, self.cache_written = max(self.input, input_bound), 0, 0
        self.output = max(self.output, output_bound)
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


MAX_REPLY_TOKENS = 10_000_000  # more than any model's context and output together: a count past it is absurd
RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class _BadCount(ValueError):
    pass


def _int(value: Any) -> int:
    """A token count: absent (None) is 0; anything but a whole number from 0 to MAX_REPLY_TOKENS
    (a negative, a float, a string, a bool, an absurd size) is the provider's fault."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPLY_TOKENS:
        return value
    raise _BadCount(f"a token count of {str(value)[:40]!r}")


def _part(found: dict, key: str) -> dict:
    value = found.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _BadCount(f"{key} is not an object")
    return value


def usage_from_event(api: Api, event: dict, usage: Usage) -> None:
    """Folds one streamed event (or a whole JSON reply) into `usage`, in place; a count that cannot
    be read is said in `usage.fault` (the first one), and the reply is then charged as unread."""
    before = (usage.input, usage.output) if usage.reported else None
    try:
        _fold(api, event, usage)
        if before is not None and (usage.input < before[0] or usage.output < before[1]):
            # counts are cumulative within a reply: one that went down is a count the meter cannot trust
            # (a provider's large count followed by a small one), so the reply is charged its worst case
            usage.input, usage.output = max(usage.input, before[0]), max(usage.output, before[1])
            raise _BadCount(f"a count went down within one reply ({before[0]}/{before[1]} input/output, then less)")
    except _BadCount as exc:
        usage.fault = usage.fault or f"the model API's usage could not be read: {exc}"
        usage.final = False


def _fold(api: Api, event: dict, usage: Usage) -> None:
    if api == "responses":
        kind = event.get("type")
        whole = kind is None and "usage" in event and "output" in event  # an unstreamed reply
        body = event.get("response") if kind in RESPONSES_TERMINAL else (event if whole else None)
        if not isinstance(body, dict) or "usage" not in body:
            return
        found = body.get("usage")
        if found is None:  # a terminal event that says nothing of its usage: the reply is unread
            return
        if not isinstance(found, dict):
            raise _BadCount("usage is not an object")
        usage.input, usage.output = _int(found.get("input_tokens")), _int(found.get("output_tokens"))
        usage.cached = _int(_part(found, "input_tokens_details").get("cached_tokens"))
        usage.reasoning = _int(_part(found, "output_tokens_details").get("reasoning_tokens"))
        if usage.cached > usage.input or usage.reasoning > usage.output:
            raise _BadCount("a part larger than its whole")
        usage.reported = usage.final = True
    elif api == "messages":
        found, last = None, False
        if event.get("type") == "message_start":
            found = (event.get("message") or {}).get("usage") if isinstance(event.get("message"), dict) else None
        elif event.get("type") in ("message_delta", "message"):  # the last count; a whole, unstreamed reply
            found, last = event.get("usage"), True
        if found is not None and not isinstance(found, dict):
            raise _BadCount("usage is not an object")
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
            usage.final = usage.final or last
    elif api == "chat":
        found = event.get("usage")
        if found is not None and not isinstance(found, dict):
            raise _BadCount("usage is not an object")
        if isinstance(found, dict):
            usage.input, usage.output = _int(found.get("prompt_tokens")), _int(found.get("completion_tokens"))
            details = _part(found, "prompt_tokens_details")
            usage.cached = _int(details.get("cached_tokens"))
            usage.cache_written = _int(details.get("cache_write_tokens"))  # OpenRouter's, for Anthropic's models
            usage.reasoning = _int(_part(found, "completion_tokens_details").get("reasoning_tokens"))
            if usage.cached + usage.cache_written > usage.input:
                raise _BadCount("a part larger than its whole")
            usage.reported = usage.final = True


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
