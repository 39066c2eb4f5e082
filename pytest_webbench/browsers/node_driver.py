"""The harness's Node driver process (driver.js): one per pytest worker, holding the harness's own
CDP connection to each browser it is given, local or Kernel's. One JSON line per request, replies
matched by id. It runs on the Node runtime and playwright-core that Playwright for Python ships."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .base import BackendError
from .code_runner import fail_named_call
from .pod import playwright_driver

DRIVER_JS = Path(__file__).with_name("driver.js")


class NodeDriver:
    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._reader: asyncio.Task | None = None
        self._start_lock = asyncio.Lock()
        self._stderr_tail: list[str] = []
        self._artifacts: str | None = None

    def _remove_artifacts(self) -> None:
        if self._artifacts is not None:
            shutil.rmtree(self._artifacts, ignore_errors=True)
            self._artifacts = None

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        async with self._start_lock:
            if self._proc is not None and self._proc.returncode is None:
                return self._proc
            node, package = playwright_driver()
            # The harness's own process, yet given only what it needs: no key of the harness's.
            # Its own folder for what Playwright writes (each session's trace, as it records): its
            # temp dir too, and removed with it
            self._remove_artifacts()  # a driver that died leaves its folder
            self._artifacts = tempfile.mkdtemp(prefix="webbench-driver-")
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "WEBBENCH_PLAYWRIGHT_PACKAGE": str(package),
                   "WEBBENCH_ARTIFACTS": self._artifacts, "TMPDIR": self._artifacts,
                   **{k: v for k, v in os.environ.items() if k == "WEBBENCH_MAX_ARTIFACT_BYTES"}}
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
        while True:
            try:
                line = await proc.stdout.readline()
            except ValueError:  # past the line limit (the driver keeps its replies under it): that call times out
                continue
            if not line:
                break
            try:
                reply = json.loads(line)
            except (ValueError, RecursionError) as exc:
                # a reply no parser here reads (a page's value nested past Python's limit): its call alone fails
                fail_named_call(self._pending, line, f"the browser driver's reply could not be read ({type(exc).__name__})")
                continue
            future = self._pending.pop(reply.get("id"), None) if isinstance(reply, dict) else None
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

    async def close(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        self._remove_artifacts()
