"""The local backend: Kernel's browser operations on Debian's Chromium, on this machine.

One Node process per pytest worker (`driver.js`) owns one Chromium and a browser context per
session. It runs agents' Playwright code as JavaScript, as Kernel does, with the Node runtime and
playwright-core that Playwright for Python ships, so nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any

from .base import TRACE_FILE, BackendError

DRIVER_JS = Path(__file__).with_name("driver.js")
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def playwright_driver() -> tuple[Path, Path]:
    """The Node binary and playwright-core package bundled with Playwright for Python."""
    import playwright

    driver = Path(playwright.__file__).parent / "driver"
    node, package = driver / "node", driver / "package"
    if not node.exists() or not (package / "package.json").exists():
        raise BackendError(f"Playwright for Python's driver is incomplete at {driver}; reinstall playwright")
    return node, package


def chromium_path() -> str:
    path = os.environ.get("WEBBENCH_CHROMIUM") or shutil.which("chromium") or DEFAULT_CHROMIUM
    if not Path(path).exists():
        raise BackendError(
            f"no Chromium at {path}: install Debian's package (apt-get install chromium) "
            "or set WEBBENCH_CHROMIUM"
        )
    return path


class LocalBackend:
    """Talks to the Node driver: one JSON line per request, replies matched by id."""

    name = "local"
    billed = False

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._reader: asyncio.Task | None = None
        self._start_lock = asyncio.Lock()
        self._stderr_tail: list[str] = []

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        async with self._start_lock:
            if self._proc is not None and self._proc.returncode is None:
                return self._proc
            node, package = playwright_driver()
            env = dict(os.environ, WEBBENCH_PLAYWRIGHT_PACKAGE=str(package), WEBBENCH_CHROMIUM=chromium_path())
            self._proc = await asyncio.create_subprocess_exec(
                str(node), str(DRIVER_JS),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=env, limit=64 * 1024 * 1024,
            )
            self._reader = asyncio.create_task(self._read_replies(self._proc))
            asyncio.create_task(self._drain_stderr(self._proc))
            return self._proc

    async def _read_replies(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                continue
            future = self._pending.pop(reply.get("id"), None)
            if future is not None and not future.done():
                future.set_result(reply)
        # The driver exited: fail whatever was waiting, so no caller hangs.
        await proc.wait()
        tail = "\n".join(self._stderr_tail[-20:])
        for future in self._pending.values():
            if not future.done():
                future.set_exception(BackendError(f"the browser driver exited (code {proc.returncode}): {tail}"))
        self._pending.clear()

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            self._stderr_tail = (self._stderr_tail + [line.decode(errors="replace").rstrip()])[-50:]

    async def call(self, op: str, timeout: float = 120, **args: Any) -> Any:
        proc = await self._ensure_started()
        request_id = next(self._ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        assert proc.stdin is not None
        proc.stdin.write((json.dumps({"id": request_id, "op": op, **args}) + "\n").encode())
        await proc.stdin.drain()
        try:
            reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._pending.pop(request_id, None)
            raise BackendError(f"the browser driver did not answer {op} within {timeout} s") from None
        if not reply.get("ok"):
            raise BackendError(reply.get("error") or f"{op} failed", code=reply.get("code"), body=reply.get("body"))
        return reply["result"]

    async def create_session(self, session_id: str, page_api_only: bool = False, trace: bool = False) -> dict[str, Any]:
        await self.call("open", session=session_id, page_api_only=page_api_only, trace=trace)
        return {"session_id": session_id, "backend": self.name}

    async def delete_session(self, session_id: str) -> None:
        await self.call("close", session=session_id)

    async def execute_playwright(self, session_id: str, code: str, timeout_sec: float = 60) -> dict:
        return await self.call("exec", session=session_id, code=code, timeout_ms=int(timeout_sec * 1000), timeout=timeout_sec + 30)

    async def repl(self, session_id: str, code: str, reset: bool = False, timeout_sec: float = 60) -> dict:
        return await self.call(
            "repl", session=session_id, code=code, reset=reset, timeout_ms=int(timeout_sec * 1000), timeout=timeout_sec + 30
        )

    async def computer_action(self, session_id: str, actions: list[dict]) -> dict:
        return await self.call("computer", session=session_id, actions=actions)

    async def webmcp_list(self, session_id: str, exclude_custom: bool = False) -> dict:
        return await self.call("webmcp_list", session=session_id, exclude_custom=exclude_custom)

    async def webmcp_invoke(self, session_id: str, tool_ref: str, input: dict, timeout_sec: float = 60) -> dict:
        return await self.call(
            "webmcp_invoke", session=session_id, tool_ref=tool_ref, input=input,
            timeout_ms=int(timeout_sec * 1000), timeout=timeout_sec + 30,
        )

    async def add_custom_tools(
        self, session_id: str, namespace: str, source: str, force_overwrite_namespace: bool = False
    ) -> dict:
        return await self.call(
            "add_custom", session=session_id, namespace=namespace, source=source,
            force_overwrite_namespace=force_overwrite_namespace,
        )

    async def list_custom_tools(self, session_id: str) -> dict:
        return await self.call("list_custom", session=session_id)

    async def save_trace(self, session_id: str, folder: Path) -> dict[str, Any]:
        """Playwright's trace of the session (screenshots, DOM snapshots, every action), for
        `playwright show-trace`; tracing stops here, before the harness reads the page."""
        path = folder / TRACE_FILE
        folder.mkdir(parents=True, exist_ok=True)
        saved = await self.call("trace_save", session=session_id, path=str(path), timeout=120)
        return {"file": TRACE_FILE} if saved.get("saved") else {}

    async def screenshot(self, session_id: str) -> bytes:
        return base64.b64decode((await self.call("screenshot", session=session_id))["image"])

    async def read_page(self, session_id: str, url: str, script: str) -> Any:
        return (await self.check_page(session_id, url, script))["value"]

    async def check_page(self, session_id: str, url: str, script: str) -> dict:
        return await self.call("read_page", session=session_id, url=url, script=script)

    async def session_lost(self, session_id: str) -> str | None:
        try:
            status = await self.call("status", session=session_id, timeout=30)
        except BackendError as exc:
            return f"the browser driver failed: {exc}"
        if status["crashed"]:
            return "the session's Chromium exited during the trial"
        return None if status["open"] else "the session was closed during the trial"

    async def delete_leftovers(self, prefix: str) -> dict[str, str]:
        return {}  # every context dies with this process's driver: nothing is billed or left behind

    async def current_url(self, session_id: str) -> str:
        return (await self.call("current_url", session=session_id))["url"]

    async def close(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
