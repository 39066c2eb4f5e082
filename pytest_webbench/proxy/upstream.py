"""Upstream transports: where the proxy forwards what it lets through."""

from __future__ import annotations

import functools
import json
import os
import re
import ssl
import subprocess
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from httpx_sse import EventSource

from .framing import MAX_LINE_BYTES, Oversized, read_lines, read_reply, wire_bytes

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


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every upstream client of the process, with httpx's own defaults: each
    client made its own, and loading the CA bundle cost ~20 ms of CPU per trial's route."""
    return httpx.create_ssl_context()


class HttpUpstream:
    """Streamable HTTP: POST each message; the reply is JSON or an SSE stream ending in it.

    `send` is for an event loop (the fixture's endpoint), `call` and `post` for threads (the
    stdio mode). A reply's stream is read as it arrives (httpx-sse parses it: CRLF or LF line
    ends, multi-line `data:`), and every server message before the reply (a progress or log
    notification, a ping or an elicitation the server waits on) goes to the agent at once: to
    `send`'s `on_server_message`, or to the attribute of that name in stdio mode.
    """

    # Above the longest call a browser server answers itself (browser_repl's 150 s and its 30 s of grace),
    # so an agent's slow code is the server's timeout error, never a missing reply counted as its failure.
    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 240):
        self.url = url
        self.timeout = timeout
        self._header_templates = dict(headers or {})
        self._async_client: httpx.AsyncClient | None = None
        self._sync_client: httpx.Client | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._session_id: str | None = None
        self.on_server_message: Callable[[dict], None] | None = None

    def _headers(self) -> dict[str, str]:
        headers = {k: expand_env_refs(v) for k, v in self._header_templates.items()}
        headers.update({"accept": "application/json, text/event-stream", "content-type": "application/json"})
        if self._session_id:
            headers[SESSION_HEADER] = self._session_id
        return headers

    def _expects_reply(self, message: dict, response: httpx.Response) -> bool:
        if sid := response.headers.get(SESSION_HEADER):
            self._session_id = sid
        if response.status_code == 202 or "id" not in message or "method" not in message:
            return False
        if response.status_code >= 400:
            response.raise_for_status()
        return True

    async def send(self, message: dict, on_server_message: Callable[[dict], Awaitable[None]] | None = None) -> dict | None:
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(timeout=self.timeout, verify=tls_context())
        request = self._async_client.build_request("POST", self.url, content=wire_bytes(message), headers=self._headers())
        response = await self._async_client.send(request, stream=True)
        try:
            if not self._expects_reply(message, response):
                await response.aread()
                return None
            if not _is_event_stream(response):  # a JSON body: the reply, if it answers this call
                return _reply_in(await response.aread(), message["id"])
            async for event in EventSource(response).aiter_sse():
                kind, parsed = _classify(event.data, message["id"])
                if kind == "reply":
                    return parsed
                if kind == "server" and on_server_message is not None:
                    await on_server_message(parsed)
            return None  # the stream ended without the reply
        finally:
            await response.aclose()

    def call(self, message: dict) -> dict | None:
        if self._sync_client is None:
            self._sync_client = httpx.Client(timeout=self.timeout, verify=tls_context())
        with self._sync_client.stream("POST", self.url, content=wire_bytes(message), headers=self._headers()) as response:
            if not self._expects_reply(message, response):
                response.read()
                return None
            if not _is_event_stream(response):
                return _reply_in(response.read(), message["id"])
            for event in EventSource(response).iter_sse():
                kind, parsed = _classify(event.data, message["id"])
                if kind == "reply":
                    return parsed
                if kind == "server" and self.on_server_message is not None:
                    self.on_server_message(parsed)
            return None

    post = call  # a notification's reply is empty either way

    def start_call(self, message: dict, done: Callable[..., None], raw: bytes | None = None) -> None:
        """Blocking HTTP on a small pool, so a slow call never holds up the next message."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="upstream-http")

        def run() -> None:
            try:
                reply: dict | BaseException | None = self.call(message)
            except Exception as exc:
                reply = exc
            done(reply)

        self._pool.submit(run)

    async def close(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
        self.close_blocking()

    def close_blocking(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # calls in flight finish and are answered first
        if self._sync_client is not None:
            self._sync_client.close()


def _is_event_stream(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").partition(";")[0].strip() == "text/event-stream"


def _reply_in(body: bytes, msg_id: object) -> dict | None:
    """A JSON body's reply to `msg_id`; anything else in its place (another id, a request) is none."""
    kind, parsed = _classify(body, msg_id)
    return parsed if kind == "reply" else None


def _classify(data: str | bytes, msg_id: object) -> tuple[str, dict | None]:
    """One SSE event's data: the reply to `msg_id`, a server message (request or notification)
    for the agent, or something to skip (a keep-alive, an empty priming event, garbage)."""
    if not data:
        return "skip", None
    try:
        message = read_reply(data)
    except (ValueError, RecursionError):
        return "skip", None
    if not isinstance(message, dict):
        return "skip", None
    if "method" in message:
        return "server", message
    key = _call_key(msg_id)
    if key is not None and _call_key(message.get("id")) == key and ("result" in message or "error" in message):
        return "reply", message
    return "skip", None


def _call_key(msg_id: object) -> tuple | None:
    """Which call a reply answers, over stdio or HTTP: its id and the id's type, so 1, "1", 1.0 and
    true stay apart (the proxy forwards only string and integer ids); None matches no call."""
    return (type(msg_id), msg_id) if type(msg_id) in (str, int) else None


class UpstreamClosed(ConnectionError):
    pass


class StdioUpstream:
    """A browser MCP server run as a child process: one JSON-RPC message per line each way.

    Threads, not an event loop, and no hand-offs: the caller's thread writes a request, the
    reader thread matches the reply by id and finishes the call itself, so calls overlap freely
    and each costs two pipe writes, as a bare forwarder does. The server's own requests and
    notifications go to `on_server_message`, never to a waiting call.
    """

    def __init__(self, command: list[str], env: dict[str, str] | None = None,
                 on_server_message: Callable[[dict], None] | None = None):
        self.on_server_message = on_server_message
        self.unreadable_lines = 0
        self._pending: dict[str, Callable[..., None]] = {}
        self._lock = threading.Lock()
        self._closed: str | None = None
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._reader = threading.Thread(target=self._read, name="upstream-reader", daemon=True)
        self._reader.start()

    def post(self, message: dict, raw: bytes | None = None) -> None:
        line = (raw if raw is not None else json.dumps(message, separators=(",", ":")).encode()) + b"\n"
        with self._lock:
            if self._closed:
                raise UpstreamClosed(self._closed)
            try:
                self._process.stdin.write(line)
                self._process.stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise UpstreamClosed(f"browser server is gone: {exc}") from exc

    def start_call(self, message: dict, done: Callable[..., None], raw: bytes | None = None) -> None:
        """Sends a request; `done(reply, raw_line)` gets its reply (or the failure) on the reader thread."""
        key = _call_key(message["id"])
        with self._lock:
            if key in self._pending:
                raise ValueError(f"request id {message['id']!r} is already in flight")
            self._pending[key] = done
        try:
            self.post(message, raw)
        except UpstreamClosed:
            with self._lock:
                self._pending.pop(key, None)
            raise

    def _read(self) -> None:
        for line in read_lines(self._process.stdout, MAX_LINE_BYTES):
            if isinstance(line, Oversized):
                self.unreadable_lines += 1
                continue
            try:
                message = read_reply(line)
            except (ValueError, RecursionError):  # a server printing to stdout, or nesting past the parsers
                self.unreadable_lines += 1  # skipped: the reader must live on for every call after it
                continue
            if not isinstance(message, dict):
                self.unreadable_lines += 1
            elif "method" in message:
                if self.on_server_message is not None:
                    try:
                        self.on_server_message(message)
                    except Exception:  # one the agent cannot be sent (nested past the writer): dropped
                        self.unreadable_lines += 1
            else:
                with self._lock:
                    done = self._pending.pop(_call_key(message.get("id")), None)
                if done is not None:
                    done(message, line)
        code = self._process.wait()
        with self._lock:
            self._closed = f"browser server exited with code {code}"
            pending, self._pending = list(self._pending.values()), {}
        for done in pending:
            done(UpstreamClosed(self._closed))

    def close_blocking(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.close()  # a stdio server ends at EOF; give it time to clean up
            except OSError:
                pass
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reader.join(timeout=10)
