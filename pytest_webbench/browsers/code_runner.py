"""The client of a trial's code runner (sealed/runner.js): the process that runs the agent's
Playwright code, spoken to in JSON lines, replies matched by id. browsers/pod.py starts it in its
seal; nothing it replies is read as the harness's own fact."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
from typing import Any

from ..environments.seal import Exits
from .base import BackendError

_REPLY_ID = re.compile(rb'\{"id":([0-9]+),')  # serveLines (sealed/webmcp.js) writes a reply's id first


def fail_named_call(pending: dict[int, asyncio.Future], line: bytes, why: str) -> None:
    """A reply line that cannot be read fails the one call it names by its id, which serveLines
    writes first; every other call goes on."""
    if (named := _REPLY_ID.match(line)) and (future := pending.pop(int(named[1]), None)) and not future.done():
        future.set_exception(BackendError(why))


class Runner:
    """The agent's code runner: a process speaking JSON lines, replies matched by id. Its replies
    are the agent's own results (what its code returned), never read as the harness's facts."""

    def __init__(self, proc: asyncio.subprocess.Process, exits: Exits | None) -> None:
        self.proc, self.exits = proc, exits
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._stderr: list[str] = []
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._drain())]

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):  # a line past the limit: the runner is not ours any more
                self.proc.kill()
                break
            if not line:
                break
            try:
                reply = json.loads(line)
                future = self._pending.pop(reply.get("id"), None)
            except RecursionError:  # a value nested past Python's parser: its call fails, the runner serves on
                fail_named_call(self._pending, line, "the code runner's reply is nested too deep to read")
                continue
            except (ValueError, AttributeError, TypeError):
                continue
            if future is not None and not future.done():
                future.set_result(reply)
        await self.proc.wait()
        tail = "\n".join(self._stderr[-10:])
        for future in self._pending.values():
            if not future.done():
                future.set_exception(BackendError(f"the code runner exited (code {self.proc.returncode}): {tail}"))
        self._pending.clear()

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self._stderr = (self._stderr + [line.decode(errors="replace").rstrip()[:500]])[-50:]

    async def call(self, op: str, timeout: float, **args: Any) -> Any:
        if self.proc.returncode is not None:
            raise BackendError(f"the code runner has exited (code {self.proc.returncode})")
        request_id = next(self._ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"id": request_id, "op": op, **args}) + "\n").encode())
        await self.proc.stdin.drain()
        try:
            reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._pending.pop(request_id, None)
            raise BackendError(f"the code runner did not answer {op} within {timeout} s") from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            error = reply.get("error") if isinstance(reply, dict) else None
            raise BackendError(str(error or f"{op} failed")[:4000], code=str(reply.get("code"))[:64] if isinstance(reply, dict) and reply.get("code") else None)
        return reply.get("result")

    async def end(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        for task in self._tasks:
            task.cancel()
        if self.exits is not None:
            self.exits.close()
