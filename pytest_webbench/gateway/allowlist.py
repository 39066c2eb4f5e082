"""The gateway's request allowlist: a body goes to the provider only if every field, tool, item,
role and content part in it is one the run's CLI sends (`allowed_requests.toml`, recorded from the
pinned CLIs). The first thing that is not is refused, named by its place in the body
(`input[3].content[0].type`), so a user sees at once what a new CLI version started to send.

Free-form parts are the model's own words and the tools' own schemas (text, arguments, JSON
Schemas, ids): their contents are never read, only their place. Everything that makes the
provider act beyond one reply is a type or a field, and so is named here or refused: hosted tools
(alone, inside a namespace, or named by tool_choice), parts fetched from a URL or a stored file,
stored items, fallback models, web plugins.

Run as `python -m pytest_webbench.gateway.allowlist RECORDED.jsonl` (one `{"api", "body"}` a line)
to list what a recording holds that the allowlist does not.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("allowed_requests.toml")


class Refused(ValueError):
    """A request the gateway does not forward; `status` is the HTTP status it is answered with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@functools.cache
def allowed() -> dict[str, dict]:
    """Per protocol: each list as a frozenset, each table (keys by type) as a dict of them."""
    def sets(table: dict) -> dict:
        return {k: sets(v) if isinstance(v, dict) else frozenset(v) for k, v in table.items()}

    return {api: sets(table) for api, table in tomllib.loads(DATA.read_text()).items()}


def _keys(obj: dict, allowed_keys: frozenset[str] | None, where: str) -> None:
    """Every key of a container one the CLI sends in it (a stored file, a URL to fetch, an audio id
    hide in keys as well as in types)."""
    for key in obj:
        if allowed_keys is None or key not in allowed_keys:
            _refuse(f"{where}.{key}", "the key")


def _refuse(where: str, what: str) -> None:
    raise Refused(f"{where}: {what} is not what this run's CLI sends: refused")


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        _refuse(where, f"a {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        _refuse(where, f"a {type(value).__name__}")
    return value


def _one_of(value: Any, allowed_values: frozenset[str], where: str) -> None:
    if not isinstance(value, str) or value not in allowed_values:
        _refuse(where, repr(value)[:80])


def _image_url(url: Any, schemes: frozenset[str], where: str) -> None:
    """An image inline (a data: URL), never one the provider would fetch."""
    if isinstance(url, dict):  # chat: {"url": ..., "detail": ...}
        url = url.get("url")
    if not isinstance(url, str) or url.split(":", 1)[0].lower() not in schemes or ":" not in url:
        _refuse(where, f"an image at {str(url)[:60]!r}")


def check_allowed(api: str, request: dict[str, Any]) -> None:
    """Raises Refused at the first thing in `request` that the run's protocol does not allow."""
    rules = allowed().get(api)
    if rules is None:
        return  # not one of the CLIs' protocols: a test's stand-in route, whose path decides nothing else
    for key in request:
        if key not in rules["fields"]:
            _refuse(key, "the field")
    {"responses": _responses, "messages": _messages, "chat": _chat}[api](request, rules)


def _responses(request: dict, rules: dict) -> None:
    for i, tool in enumerate(_list(request.get("tools", []), "tools")):
        tool = _object(tool, f"tools[{i}]")
        _one_of(tool.get("type"), rules["tool_types"], f"tools[{i}].type")
        for j, inner in enumerate(_list(tool.get("tools", []), f"tools[{i}].tools")):
            _one_of(_object(inner, f"tools[{i}].tools[{j}]").get("type"), rules["namespace_tool_types"],
                    f"tools[{i}].tools[{j}].type")
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, dict):  # one function of the request's own, by name
        _one_of(choice.get("type"), frozenset({"function", "custom"}), "tool_choice.type")
    else:
        _one_of(choice, rules["tool_choice"], "tool_choice")
    for i, name in enumerate(_list(request.get("include", []), "include")):
        _one_of(name, rules["include"], f"include[{i}]")
    text = _object(request.get("text", {}), "text")
    if "format" in text:
        _one_of(_object(text["format"], "text.format").get("type"), rules["text_format_types"], "text.format.type")
    items = request.get("input", [])
    if isinstance(items, str):
        return
    for i, item in enumerate(_list(items, "input")):
        item = _object(item, f"input[{i}]")
        kind = item.get("type", "message")  # a message may leave its type out
        _one_of(kind, rules["item_types"], f"input[{i}].type")
        _keys(item, rules["item_keys"].get(kind), f"input[{i}]")
        if kind == "message":
            _one_of(item.get("role"), rules["roles"], f"input[{i}].role")
        for key in ("content", "output", "summary"):
            parts = item.get(key)
            if isinstance(parts, list):
                for j, part in enumerate(parts):
                    _responses_part(_object(part, f"input[{i}].{key}[{j}]"), rules, f"input[{i}].{key}[{j}]")
            elif parts is not None and not isinstance(parts, str):
                _refuse(f"input[{i}].{key}", f"a {type(parts).__name__}")


def _responses_part(part: dict, rules: dict, where: str) -> None:
    _one_of(part.get("type"), rules["part_types"], f"{where}.type")
    _keys(part, rules["part_keys"].get(part["type"]), where)
    if part["type"] == "input_image":
        if "file_id" in part:
            _refuse(f"{where}.file_id", "a stored file")
        _image_url(part.get("image_url"), rules["image_url_schemes"], f"{where}.image_url")


def _messages(request: dict, rules: dict) -> None:
    for i, tool in enumerate(_list(request.get("tools", []), "tools")):
        tool = _object(tool, f"tools[{i}]")
        if "type" in tool:
            _one_of(tool["type"], rules["tool_types"], f"tools[{i}].type")
        _cache_control(tool, rules, f"tools[{i}]")
    choice = request.get("tool_choice")
    if choice is not None:
        _one_of(_object(choice, "tool_choice").get("type"), rules["tool_choice_types"], "tool_choice.type")
    for i, edit in enumerate(_list(_object(request.get("context_management", {}), "context_management").get("edits", []),
                                   "context_management.edits")):
        _one_of(_object(edit, f"context_management.edits[{i}]").get("type"), rules["context_edit_types"],
                f"context_management.edits[{i}].type")
    system = request.get("system", [])
    if not isinstance(system, str):
        for i, block in enumerate(_list(system, "system")):
            _messages_block(_object(block, f"system[{i}]"), rules, f"system[{i}]")
    for i, message, content in _each_message(request, rules):
        if isinstance(content, list):
            for j, block in enumerate(content):
                _messages_block(_object(block, f"messages[{i}].content[{j}]"), rules, f"messages[{i}].content[{j}]")
        elif not isinstance(content, str):
            _refuse(f"messages[{i}].content", f"a {type(content).__name__}")


def _each_message(request: dict, rules: dict):
    """Each message of a Messages or chat request, its keys and role checked: (index, message, content)."""
    for i, message in enumerate(_list(request.get("messages", []), "messages")):
        message = _object(message, f"messages[{i}]")
        _keys(message, rules["message_keys"], f"messages[{i}]")
        _one_of(message.get("role"), rules["roles"], f"messages[{i}].role")
        yield i, message, message.get("content")


def _messages_block(block: dict, rules: dict, where: str) -> None:
    _one_of(block.get("type"), rules["block_types"], f"{where}.type")
    _keys(block, rules["block_keys"].get(block["type"]), where)
    _cache_control(block, rules, where)
    if block["type"] == "image":
        _one_of(_object(block.get("source"), f"{where}.source").get("type"), rules["image_source_types"],
                f"{where}.source.type")
    if block["type"] == "tool_result" and isinstance(block.get("content"), list):
        for k, inner in enumerate(block["content"]):
            _messages_block(_object(inner, f"{where}.content[{k}]"), rules, f"{where}.content[{k}]")


def _cache_control(block: dict, rules: dict, where: str) -> None:
    if "cache_control" in block:
        cache = _object(block["cache_control"], f"{where}.cache_control")
        _one_of(cache.get("type"), rules["cache_control_types"], f"{where}.cache_control.type")
        if "ttl" in cache:
            _one_of(cache["ttl"], rules["cache_ttls"], f"{where}.cache_control.ttl")


def _chat(request: dict, rules: dict) -> None:
    for key in _object(request.get("stream_options", {}), "stream_options"):
        _one_of(key, rules["stream_options"], f"stream_options.{key}")
    for i, tool in enumerate(_list(request.get("tools", []), "tools")):
        _one_of(_object(tool, f"tools[{i}]").get("type"), rules["tool_types"], f"tools[{i}].type")
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, dict):
        _one_of(choice.get("type"), rules["tool_types"], "tool_choice.type")
    else:
        _one_of(choice, rules["tool_choice"], "tool_choice")
    for i, message, content in _each_message(request, rules):
        if isinstance(content, list):
            for j, part in enumerate(content):
                where = f"messages[{i}].content[{j}]"
                _one_of(_object(part, where).get("type"), rules["part_types"], f"{where}.type")
                _keys(part, rules["part_keys"].get(part["type"]), where)
                _cache_control(part, rules, where)  # OpenRouter passes Anthropic's on to it
                if part["type"] == "image_url":
                    _image_url(part.get("image_url"), rules["image_url_schemes"], f"{where}.image_url")
        elif content is not None and not isinstance(content, str):
            _refuse(f"messages[{i}].content", f"a {type(content).__name__}")
        for j, call in enumerate(_list(message.get("tool_calls", []), f"messages[{i}].tool_calls")):
            _one_of(_object(call, f"messages[{i}].tool_calls[{j}]").get("type"), rules["tool_types"],
                    f"messages[{i}].tool_calls[{j}].type")


def main(argv: list[str] | None = None) -> int:
    """Lists what a recording of the CLIs' requests holds that the allowlist does not."""
    import json
    import sys

    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m pytest_webbench.gateway.allowlist RECORDED.jsonl", file=sys.stderr)
        return 2
    found = 0
    for n, line in enumerate(Path(args[0]).read_text().splitlines(), 1):
        entry = json.loads(line)
        try:
            check_allowed(entry["api"], entry["body"])
        except Refused as exc:
            found += 1
            print(f"{args[0]}:{n}: {entry['api']}: {exc}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
