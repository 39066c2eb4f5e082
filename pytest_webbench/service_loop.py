"""One background event loop per pytest process for everything that serves or waits.

Sites, the backend's MCP server, the proxy's endpoint and the browser driver all live on this
loop, so tests stay plain synchronous functions and a sync Playwright fixture elsewhere cannot
collide with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvicorn

T = TypeVar("T")


class ServiceLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="webbench-services", daemon=True)
        self._thread.start()
        self._servers: list[tuple[uvicorn.Server, asyncio.Future]] = []

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs a coroutine on the service loop and waits for it from this thread. If the wait
        ends early (a timeout, Ctrl-C), the coroutine is cancelled: nothing runs on unowned."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def serve(self, app: Any, name: str, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serves an ASGI app (on 127.0.0.1 at a free port unless told otherwise); returns its
        base URL once it accepts."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this: without it a kept-alive connection waits ~40 ms per
        # reply (Nagle against the client's delayed ACK).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]
        # A request still running at shutdown (a stalled stream) is cancelled after 2 s, not awaited.
        config = uvicorn.Config(app, log_level="warning", lifespan="auto", access_log=False, timeout_graceful_shutdown=2,
                                interface="asgi3")  # every app here is ASGI 3; a bound method is not sniffed as one
        server = uvicorn.Server(config)
        server.config.setup_event_loop = lambda: None  # type: ignore[method-assign]

        async def start() -> asyncio.Future:
            task = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError(f"{name} server stopped while starting")
                await asyncio.sleep(0.005)
            return task

        self._servers.append((server, self.run(start(), timeout=30)))
        logging.getLogger(__name__).debug("%s listening on port %d", name, port)
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"

    def close(self) -> None:
        async def stop_all() -> None:
            for server, _ in self._servers:
                server.should_exit = True
            await asyncio.gather(*(task for _, task in self._servers), return_exceptions=True)

        async def cancel_leftovers() -> None:
            # Tasks a server left behind (an SSE shutdown watcher, a half-read request) are
            # cancelled, not destroyed pending with a warning.
            leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)

        if self._servers:
            self.run(stop_all(), timeout=30)
        self.run(cancel_leftovers(), timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
