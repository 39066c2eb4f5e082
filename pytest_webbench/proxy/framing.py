"""Line framing for MCP over stdio: one JSON-RPC message per line, with a size limit.

A line over the limit is skipped in pieces (never parsed, never held whole) and reported as
`Oversized` with its size and first bytes, so the proxy can answer it by id and keep reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

# the MCP SDK's own limit on a request's body (mcp.server.transport_security): a larger message is
# refused here, as the agent's, rather than by the browser server as a failed upstream call
MAX_LINE_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 4096
_SKIP_CHUNK = 1024 * 1024


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
