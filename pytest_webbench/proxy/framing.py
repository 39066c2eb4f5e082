"""The proxy's messages on the wire: line framing for MCP over stdio (one JSON-RPC message per
line, with a size limit), how a message is read and written, the bytes a message is sent on as,
and what the browser server would refuse of them.

msgspec reads and writes messages on the path of every call (a fifth to a tenth of json's time);
json takes over wherever msgspec would read or write a message otherwise than json does, and
tests/test_proxy_encoding.py holds the two to the same values.

A line over the limit is skipped in pieces (never parsed, never held whole) and reported as
`Oversized` with its size and first bytes, so the proxy can answer it by id and keep reading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from ..results.well_formed import MAX_NESTING, nesting, well_formed

# the MCP SDK's own limit on a request's body (mcp.server.transport_security): a larger message is
# refused here, as the agent's, rather than by the browser server as a failed upstream call
MAX_LINE_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 4096
# a lone surrogate: JSON's escape of one (not an escaped backslash before "ud800"), or its bytes in a str line
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SKIP_CHUNK = 1024 * 1024
_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
# msgspec refuses a lone surrogate's escape, NaN, Infinity and 1e400, which json reads; and raises
# RecursionError at a depth of its own, where json's may differ
_NOT_READ = (msgspec.DecodeError, RecursionError, UnicodeEncodeError)


def read_request(line: str | bytes) -> Any:
    """An agent's line as json.loads reads it, strictly as UTF-8 (MCP's JSON is): raises ValueError
    (UnicodeDecodeError included) for what is not JSON, RecursionError past both parsers' depth
    (msgspec reads one level deeper than json; `unsendable` refuses anything past 64 levels)."""
    try:
        return _DECODER.decode(line)
    except _NOT_READ:
        return json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)


def read_reply(line: bytes | str) -> Any:
    """A line of the browser server's as Python's json reads it (which also takes UTF-16 and 32)."""
    try:
        return _DECODER.decode(line)
    except _NOT_READ:
        return json.loads(line)


def message_bytes(message: Any) -> bytes:
    """A message for the agent, compact, on one line (JSON escapes a newline inside a string). A
    4 KB tool list takes msgspec 14 us against json.dumps's 180 (measured under load). Where msgspec
    cannot write it as json does, json writes it, escaped to ASCII: a lone surrogate (a page's text
    cut in an emoji), and a NaN or infinity a server sent, which msgspec would write as null, so any
    null in its output sends the message to json."""
    try:
        data = _ENCODER.encode(message)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):  # UnicodeEncodeError is a ValueError
        data = b"null"
    if b"null" in data:
        return json.dumps(message, separators=(",", ":")).encode()
    return data


def wire_bytes(message: Any) -> bytes:
    """A message as sent on to the browser server: as compact as it came (escaped to ASCII, text
    outside it grows up to six-fold), and strict JSON (no NaN or Infinity, which a JavaScript
    server refuses). Raises ValueError for those, UnicodeEncodeError for a lone surrogate."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@dataclass
class Oversized:
    size: int
    head: bytes


def read_lines(stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | Oversized]:
    """Lines without their line ending; blank lines are skipped. Blocks on a pipe until a line
    is complete, which is what makes the threaded proxy fast."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if line.endswith(b"\n") or len(line) <= limit:
            if line.strip():
                yield line.rstrip(b"\r\n")
            continue
        size, head = len(line), line[:HEAD_BYTES]
        while True:
            rest = stream.readline(_SKIP_CHUNK)
            size += len(rest)
            if not rest or rest.endswith(b"\n"):
                yield Oversized(size - (1 if rest.endswith(b"\n") else 0), head)
                break


def unsendable(line: str | bytes, message: Any) -> str | None:
    """Why the browser server would refuse the message with an HTTP error, which counts against the
    harness as a failed upstream: refused here as the agent's instead. Each check only where the
    bytes allow it at all, so an ordinary call costs a regex and a count."""
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    # a substring test first (memchr-fast): the pattern's look-behind costs ~10 us a call on its own
    if (b"\\u" in data or b"\xed" in data) and _SURROGATE.search(data) and well_formed(message) is not message:
        return "not text: it spells a lone UTF-16 surrogate"
    if data.count(b"[") + data.count(b"{") > MAX_NESTING and nesting(message) > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    if len(data) * 4 > MAX_LINE_BYTES or b"NaN" in data or b"Infinity" in data:  # numbers can grow as they are written again
        try:
            size = len(wire_bytes(message))
        except ValueError:
            return "NaN and Infinity are not JSON"
        if size > MAX_LINE_BYTES:
            return f"{size} bytes as sent on, over the browser server's limit of {MAX_LINE_BYTES}"
    return None
