"""The proxy's streamable-HTTP endpoint: one server per pytest process, one route per trial.

Agents that take an MCP URL get `<base>/trials/<trial-id>/<key>/mcp`, the key a random one per
route, so an agent that guesses another trial's id still reaches nothing (sealed agents all share
this listener as their one exit); each route has its own policy,
session id, call cap and log. A reply is plain JSON (the streamable-HTTP spec lets a server answer
a single request that way) unless the browser server sent messages of its own while the call ran
(a ping, an elicitation, progress): then the reply is an SSE stream that carries them to the
agent as they arrive and ends with the reply, as the stdio mode writes them in order. Notifications
and the agent's answers to server requests get 202; there is no standalone GET stream.

As the transport asks (and as the MCP SDK's own server answers): a POST that is not
`application/json` is 400 (a web page can send `text/plain` across origins without asking), one
whose Accept takes neither JSON and an event stream 406, an `MCP-Protocol-Version` no version of
the protocol names 400, and a message JSON-RPC cannot read (unparseable, a batch, not a request)
400 with its error reply, whose id is null. Host and Origin are checked by the listener
(listener_guard.py).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .framing import HEAD_BYTES, MAX_LINE_BYTES, Oversized, message_bytes
from .relay import ProxySession

MAX_BODY_BYTES = MAX_LINE_BYTES
# Calls of one trial holding a body at once (read, being read, or being relayed): the rest wait
# unread, so one trial holds MAX_OPEN_BODIES x MAX_BODY_BYTES of the harness's memory at most.
MAX_OPEN_BODIES = 8


class MessageResponse(JSONResponse):
    """A reply written as the event stream's are (framing.message_bytes): a browser server's text cut
    in the middle of an emoji holds a lone surrogate, which Starlette's JSONResponse cannot write."""

    def render(self, content: Any) -> bytes:
        return message_bytes(content)


class ProxyRoutes:
    def __init__(self) -> None:
        self.sessions: dict[str, ProxySession] = {}
        self._keys: dict[str, str] = {}
        self._bodies: dict[str, asyncio.Semaphore] = {}
        self.app = Starlette(routes=[Route("/trials/{trial}/{key}/mcp", self._endpoint, methods=["GET", "POST", "DELETE"])])

    def add(self, trial: str, session: ProxySession) -> str:
        self.sessions[trial] = session
        self._keys[trial] = secrets.token_urlsafe(16)
        self._bodies[trial] = asyncio.Semaphore(MAX_OPEN_BODIES)
        return f"/trials/{trial}/{self._keys[trial]}/mcp"

    def remove(self, trial: str) -> ProxySession | None:
        """Stops serving the trial; the caller closes the returned session on the service loop."""
        self._keys.pop(trial, None)
        self._bodies.pop(trial, None)
        return self.sessions.pop(trial, None)

    async def _endpoint(self, request: Request) -> Response:
        trial = request.path_params["trial"]
        session, key = self.sessions.get(trial), self._keys.get(trial, "")
        if session is None or not hmac.compare_digest(request.path_params["key"], key):
            return JSONResponse({"error": "no such trial route (wrong key, ended, or never started)"}, status_code=404)
        if request.method == "GET":
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            return Response(status_code=200)
        if refused := _transport_refusal(request):
            return refused
        slots = self._bodies[trial]
        await slots.acquire()
        try:
            body = await _body_within(request, MAX_BODY_BYTES)
        except BaseException:
            slots.release()
            raise
        if isinstance(body, Oversized):
            slots.release()
            reply = session.refuse_oversized(body.size, body.head, MAX_BODY_BYTES)
            return MessageResponse(reply, status_code=413) if reply else Response(status_code=413)
        return await _answer(session, body, slots.release)


_REPLY = object()  # marks the last item on a call's queue: the reply itself


async def _answer(session: ProxySession, body: bytes, done=lambda: None) -> Response:
    """JSON when the reply is all there is; otherwise an SSE stream of the server's messages as
    they come, then the reply. `done` is called once the call's body is no longer held."""
    queue: asyncio.Queue = asyncio.Queue()

    async def to_agent(message: dict) -> None:
        session.stats.server_messages += 1
        await queue.put(message)

    async def relay() -> None:
        try:
            reply = await session.handle_line(body, to_agent)
        finally:  # the queue always ends, so a stream never waits on a failed relay
            done()
            await queue.put(_REPLY)
        await queue.put(reply)

    task = asyncio.ensure_future(relay())
    first = await queue.get()
    if first is _REPLY:
        await task  # raises what the relay raised (a proxy bug: a 500, as before)
        reply = queue.get_nowait()
        if reply is None:
            return Response(status_code=202)
        # an error with a null id: the message itself could not be read (JSON-RPC), a bad request
        unreadable = isinstance(reply.get("error"), dict) and reply.get("id") is None
        return MessageResponse(reply, status_code=400 if unreadable else 200)

    async def events() -> AsyncIterator[str]:
        item = first
        while item is not _REPLY:
            yield _sse(item)
            item = await queue.get()
        await task
        if (reply := queue.get_nowait()) is not None:
            yield _sse(reply)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


def _transport_refusal(request: Request) -> Response | None:
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    def refused(status: int, text: str) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}}, status_code=status)

    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        return refused(400, f"Invalid Content-Type header {content_type or '(none)'!r}: POST one JSON-RPC message as application/json")
    accept = request.headers.get("accept", "").lower()
    if "*/*" not in accept and not ("application/json" in accept and "text/event-stream" in accept):
        return refused(406, "Not Acceptable: the client must accept both application/json and text/event-stream")
    version = request.headers.get("mcp-protocol-version")
    if version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS:
        return refused(400, f"Unsupported MCP-Protocol-Version {version!r}: supported are {', '.join(SUPPORTED_PROTOCOL_VERSIONS)}")
    return None


def _sse(message: dict) -> str:
    # JSON escapes newlines, so one data line holds the whole message
    return f"event: message\ndata: {message_bytes(message).decode()}\n\n"


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
