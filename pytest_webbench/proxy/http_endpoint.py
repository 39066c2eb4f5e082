"""The proxy's streamable-HTTP endpoint: one server per pytest process, one route per trial.

Agents that take an MCP URL get `<base>/trials/<trial-id>/mcp`; each route has its own policy,
session id, call cap and log. Replies are plain JSON (the streamable-HTTP spec lets a server
answer a single request that way), notifications get 202, and there is no server stream.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .framing import HEAD_BYTES, Oversized
from .relay import ProxySession

MAX_BODY_BYTES = 8 * 1024 * 1024


class ProxyRoutes:
    def __init__(self) -> None:
        self.sessions: dict[str, ProxySession] = {}
        self.app = Starlette(routes=[Route("/trials/{trial}/mcp", self._endpoint, methods=["GET", "POST", "DELETE"])])

    def add(self, trial: str, session: ProxySession) -> str:
        self.sessions[trial] = session
        return f"/trials/{trial}/mcp"

    def remove(self, trial: str) -> ProxySession | None:
        """Stops serving the trial; the caller closes the returned session on the service loop."""
        return self.sessions.pop(trial, None)

    async def _endpoint(self, request: Request) -> Response:
        session = self.sessions.get(request.path_params["trial"])
        if session is None:
            return JSONResponse({"error": "no such trial (it has ended or never started)"}, status_code=404)
        if request.method == "GET":
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            return Response(status_code=200)
        body = await _body_within(request, MAX_BODY_BYTES)
        if isinstance(body, Oversized):
            reply = session.refuse_oversized(body.size, body.head, MAX_BODY_BYTES)
            return JSONResponse(reply, status_code=413) if reply else Response(status_code=413)
        reply = await session.handle_line(body)
        if reply is None:
            return Response(status_code=202)
        return JSONResponse(reply)


async def _body_within(request: Request, limit: int) -> bytes | Oversized:
    """The body, or `Oversized` once it passes the limit (the rest is drained, not kept)."""
    chunks, size, head = [], 0, b""
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        elif not head:
            head = b"".join(chunks)[:HEAD_BYTES] or chunk[:HEAD_BYTES]
            chunks = []
    return Oversized(size, head) if size > limit else b"".join(chunks)
