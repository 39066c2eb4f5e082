"""One seal kept for a trial's commands, where each used to get its own.

Building a seal costs about 32 ms of CPU (setpriv, unshare, a Python PID 1 that imports ctypes and
builds the root), and a Codex trial runs eleven of Harbor's commands. Here PID 1 is started once
(`seal_init.serve_main`) and each command is a request on its control socket: a memfd holding the
command, and the command's stdin, stdout and stderr, passed as file descriptors. PID 1 forks the
command as it forked the one command before (no capability, no_new_privs, its own process group),
in a fresh SysV IPC namespace and `/dev/shm`, and answers with its exit code once it has killed
whatever the command left, so a process an agent leaves behind never sees the next command, as
when each command's namespace ended with it. The seal's own parts a command could change are
closed to it (`seal_init._build_root(lasting=True)`: `/dev` read-only, PID 1 hidden in `/proc`),
and a command that lowers PID 1's resource limits spends the seal (PID 1 says so and exits).

A seal runs one command at a time: commands started at once get a seal each (host.py keeps the
idle ones), so no command ever shares its namespaces with another that is running. A command
that times out, or whose caller is cancelled, ends its seal (the next command builds a fresh
one), and so does a change of network policy: the exits are the seal's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import marshal
import os
import signal
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from .seal import Exits, Seal, start_sealed

# request number, exit code (128 + N for signal N, as a shell says it), and whether the seal is spent
# (the command changed PID 1's resource limits, which every later command would inherit)
REPLY = struct.Struct("=IiB")
MAX_PID1_ERROR_BYTES = 64 * 1024


@dataclass
class Finished:
    return_code: int
    stdout: bytes
    stderr: bytes


class SealedShell:
    def __init__(self, seal: Seal, cwd: Path, max_output_bytes: int) -> None:
        self.seal = seal
        self.cwd = cwd
        self.max_output_bytes = max_output_bytes
        self.proc: asyncio.subprocess.Process | None = None
        self.exits: Exits | None = None
        self.ended = False
        self.busy = False  # running a command: its owner (host.py) gives it no other until it ends
        self._numbers = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._replies = bytearray()
        self._pid1_output: asyncio.Future | None = None  # PID 1's own stdout and stderr, read as it lives

    @property
    def ports(self) -> list[int]:
        return self.seal.ports

    async def start(self) -> Finished | None:
        """Builds the seal; None, or what PID 1 said when it could not (exit 126 and its error)."""
        self.proc, self.exits = await start_sealed(self.seal, None, {"PATH": "/usr/bin:/bin"}, self.cwd)
        if self.exits.control is None:  # PID 1 failed before its handover: its error is on its stderr
            self.exits.close()
            _, err = await self.proc.communicate()  # PID 1 has ended: its pipes end with it
            self.ended = True
            return Finished(self.proc.returncode or 126, b"", err[:MAX_PID1_ERROR_BYTES])
        asyncio.get_running_loop().add_reader(self.exits.control, self._read_replies)
        # read all along, so PID 1 never blocks on a full pipe; its last words name why it ended
        self._pid1_output = asyncio.gather(_tail(self.proc.stdout), _tail(self.proc.stderr))
        return None

    def alive(self) -> bool:
        """Whether the seal can take a command: not ended, and PID 1 still there (killed from
        outside, by the OOM killer say, its control socket reads as ended)."""
        if self.ended or self.proc.returncode is not None:
            return False
        try:
            if self.exits.control.recv(1, socket.MSG_PEEK) == b"":
                return False
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True

    def _read_replies(self) -> None:
        try:
            data = self.exits.control.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # PID 1 ended: every command still waiting ended with it
            self._end(ConnectionError("the seal's PID 1 ended"))
            return
        self._replies += data
        while len(self._replies) >= REPLY.size:
            number, code, spent = REPLY.unpack_from(self._replies)
            del self._replies[:REPLY.size]
            if spent:
                self.ended = True  # PID 1 exits after this reply: no further command is sent to it
            future = self._waiting.pop(number, None)
            if future is not None and not future.done():
                future.set_result(code)

    async def run(self, command: str, env: dict[str, str], workdir: str, timeout_sec: float | None) -> Finished:
        """One command in the seal; a timeout ends the seal and returns 124, as `timeout` would."""
        if self.ended:
            raise RuntimeError("this seal has ended; a new one serves the next command")
        loop = asyncio.get_running_loop()
        number = next(self._numbers)
        exited = self._waiting[number] = loop.create_future()
        request = os.memfd_create("webbench-request", os.MFD_CLOEXEC)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.write(request, marshal.dumps({"number": number, "argv": ["bash", "-c", command], "env": env,
                                             "workdir": workdir}))
            socket.send_fds(self.exits.control, [b"R"], [request, stdin, out_w, err_w])
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            for fd in (request, stdin, out_w, err_w):
                os.close(fd)
        # file objects now, so a pipe whose reader never started (cancelled at once) is still closed
        outputs = asyncio.gather(self._keep(open(out_r, "rb", 0)), self._keep(open(err_r, "rb", 0)))
        try:
            await asyncio.wait({outputs, exited}, timeout=timeout_sec)
        except BaseException:  # cancelled (Harbor's agent timeout, an interrupted run): no orphans
            self.kill()
            outputs.cancel()
            outputs.add_done_callback(lambda f: f.cancelled() or f.exception())  # nothing left to report
            raise
        finally:
            timed_out = not (outputs.done() and exited.done())
            if timed_out:
                self.kill()  # every process of the seal ends, so its pipes reach their end
        out, err = await outputs
        if timed_out:
            return Finished(124, out, err + b"\n(timed out)")
        if exited.exception() is not None:  # PID 1 died under the command (killed from outside)
            return Finished(125, out, err + f"\nwebbench seal: {exited.exception()}".encode() + await self._last_words())
        return Finished(exited.result(), out, err)

    async def _keep(self, pipe) -> bytes:
        """A pipe's bytes up to max_output_bytes (`read_bounded`)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        try:
            return await read_bounded(reader, self.max_output_bytes)
        finally:
            transport.close()

    def _end(self, why: BaseException) -> None:
        self.ended = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(why)
                future.exception()  # read by `run` if it still waits; else not worth a warning
        self._waiting.clear()
        if self.exits is not None:
            if self.exits.control is not None:
                with contextlib.suppress(ValueError, OSError):
                    asyncio.get_running_loop().remove_reader(self.exits.control)
            self.exits.close()

    def kill(self) -> None:
        """Ends the seal at once: PID 1 and, with it, every process of the namespace."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._end(ConnectionError("the seal was ended"))

    async def _last_words(self) -> bytes:
        if self._pid1_output is None:
            return b""
        with contextlib.suppress(Exception):
            _, err = await asyncio.wait_for(asyncio.shield(self._pid1_output), 5)
            return b"\n" + err if err else b""
        return b""

    async def close(self) -> None:
        self.kill()
        if self.proc is not None:
            if self._pid1_output is not None:
                await self._pid1_output  # to the end of PID 1's pipes, so that their transport closes
            await self.proc.wait()
        if self.exits is not None and self.exits.cgroup_ended is not None:
            await self.exits.cgroup_ended  # what the seal's process limit refused is counted

    @property
    def forks_refused(self) -> int:
        return self.exits.forks_refused if self.exits is not None else 0


async def read_bounded(stream: asyncio.StreamReader, limit: int) -> bytes:
    """A stream's first `limit` bytes, read to its end (the rest dropped, so the writer never blocks
    on a full pipe, and an endless one costs the harness no memory)."""
    kept = bytearray()
    while chunk := await stream.read(1024 * 1024):
        if len(kept) < limit:
            kept += chunk[:limit - len(kept)]
    return bytes(kept)


async def _tail(stream: asyncio.StreamReader) -> bytes:
    """The last MAX_PID1_ERROR_BYTES of a stream, read to its end."""
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-MAX_PID1_ERROR_BYTES:]
    return kept
