"""The harness's side of a sealed agent command (PID 1's side is `seal_init.py`).

One `exec` of the agent is one `unshare --net --mount --pid --fork` whose PID 1 builds the agent's
filesystem from an allowlist and binds `127.0.0.1:<port>` inside the new network namespace for each
port the trial may reach (the proxy's listener, which also serves the model gateway). It hands those
listening sockets to us over a socketpair; we accept on them here, in the host's network, and
forward each connection to the same port on the host's loopback. That is the agent's only way out:
no interface but `lo`, no route, no DNS.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import marshal
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from .process_limits import MAX_PROCESSES, forks_refused, limited_uid, new_cgroup, own_for_seal, remove_cgroup
from .seal_init import CONFIG_VAR, GO

def _root_mountpoint() -> str:
    """An empty folder on the host; the agent's root is a tmpfs on it, in its namespace only.
    Root uses /run; another user (seal by user namespace) a folder of its own under the temp dir."""
    if os.geteuid() == 0:
        return "/run/webbench-root"
    import tempfile

    return f"{tempfile.gettempdir()}/webbench-root-{os.geteuid()}"


ROOT_MOUNTPOINT = _root_mountpoint()
INIT_DIR = str(Path(__file__).parent)
# PID 1 is this folder's seal_init imported as a top-level module (-I -S: no site, no user paths, no
# package __init__ and so no harbor or pydantic): stdlib only, its .pyc cached.
INIT_LOADER = "import sys; sys.path.insert(0, sys.argv[1]); import seal_init; seal_init.main(sys.argv[2:])"
# uts and ipc too: a hostname or a shared-memory segment the agent makes stays in its namespace.
NAMESPACES = ("--net", "--mount", "--pid", "--uts", "--ipc", "--fork", "--kill-child", "--propagation", "private")
HANDOVER_TIMEOUT_SEC = 30
# What one seal may hold at once besides its processes (process_limits.py): each command's open
# files, and the connections through its exit (each costs the harness two descriptors).
MAX_OPEN_FILES = 4096
MAX_CONNECTIONS = 256

# What of the host's /etc a seal gets: what the CLIs, their shells and Chromium read (names, name
# resolution, the dynamic linker, time, certificates, fonts, Debian's alternatives and Python's site
# config, Chromium's own folders). Not the rest: shadow and gshadow (readable by the seal's uid 0),
# the TLS private keys under ssl/private, package managers' credentials (npmrc, pip.conf,
# gitconfig), ssh, the host's identity (machine-id) and the settings that may hold a proxy's
# credentials (environment, profile.d), and the host's services' settings.
ETC_ALLOWED = (
    "passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "protocols",
    "services", "networks", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "locale.alias",
    "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "fonts", "alternatives", "mime.types",
    "magic", "magic.mime", "os-release", "debian_version", "mtab", "chromium", "chromium.d", "bash.bashrc",
    "profile", "inputrc", "terminfo", "xdg", "python3", "python3.11", "python3.12",
    "python3.13",
)
# The longest line read from a sealed command's output (a browser's runner answers one JSON line a call).
MAX_LINE_BYTES = 64 * 1024 * 1024


class SealError(RuntimeError):
    """The seal could not be set up for a command."""


def unshare_command() -> str:
    """`unshare` (WEBBENCH_UNSHARE names another, e.g. to try a machine without namespace rights)."""
    return os.environ.get("WEBBENCH_UNSHARE", "unshare")


@functools.cache
def die_with_parent() -> list[str]:
    """A seal outlives a SIGKILLed harness process otherwise (unshare's --kill-child covers only its
    own death): `setpriv --pdeathsig KILL` (util-linux, beside unshare) has the kernel kill it when
    the thread that started it goes."""
    return ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []


@dataclass
class Seal:
    """One trial's walls: `rw` and `ro` are (host path, path inside) pairs; `ports` are host
    127.0.0.1 ports, reachable inside at the same numbers."""
    workdir: str
    ports: list[int]
    rw: list[tuple[str, str]]
    ro: list[tuple[str, str]] = field(default_factory=list)
    door: bool = False  # the harness may connect into the namespace (Door)
    # (path inside, bytes): a tmpfs of the seal's own, capped, gone with its namespace; nothing on the
    # host to fill or to remove (a browser's profile, the agent code's scratch)
    tmpfs: list[tuple[str, int]] = field(default_factory=list)

    def argv(self, command: str | None) -> list[str]:
        """The seal around one command, or (None) a seal serving a trial's commands (sealed_shell.py)."""
        # Not root: a user namespace gives PID 1 the rights it needs over its own namespaces.
        userns = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
        mode = ["--serve"] if command is None else ["--init", "--", "bash", "-c", command]
        return [*die_with_parent(), unshare_command(), *userns, *NAMESPACES, sys.executable, "-I", "-S", "-c", INIT_LOADER,
                INIT_DIR, *mode]

    def config(self, ctl_fd: int, cgroup: str | None = None, nproc_uid: int | None = None) -> str:
        """PID 1's settings. Without a `cgroup`, each command's RLIMIT_NPROC is the process limit,
        and `nproc_uid` the host uid its commands run as (process_limits.py)."""
        return marshal.dumps({"workdir": self.workdir, "ports": list(self.ports), "rw": [list(p) for p in self.rw],
                              "ro": [list(p) for p in self.ro],
                              "tmpfs": [list(p) for p in self.tmpfs], "root_mountpoint": ROOT_MOUNTPOINT,
                              "ctl_fd": ctl_fd, "door": self.door, "cgroup": cgroup, "max_files": MAX_OPEN_FILES,
                              "nproc": 0 if cgroup else MAX_PROCESSES, "nproc_uid": None if cgroup else nproc_uid,
                              "etc": list(ETC_ALLOWED)}).hex()


async def _end_cgroup(proc: asyncio.subprocess.Process, path: str, exits: Exits) -> None:
    """Once the seal has ended: what its limit refused, then its cgroup goes."""
    await proc.wait()
    exits.forks_refused = forks_refused(path)
    remove_cgroup(path)


Connector = Callable[[int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def host_loopback(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


class Door:
    """The harness's way into a sealed namespace: `connect(port)` is a connection to 127.0.0.1:port
    inside it, made from a socket PID 1's door child created there."""

    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self._lock = asyncio.Lock()

    async def connect(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        async with self._lock:  # one request and its answer at a time on the control socket
            await loop.sock_sendall(self.ctl, b"C")
            readable = loop.create_future()
            loop.add_reader(self.ctl, lambda: readable.done() or readable.set_result(None))
            try:
                await asyncio.wait_for(readable, HANDOVER_TIMEOUT_SEC)
            finally:
                loop.remove_reader(self.ctl)
            message, fds, _, _ = socket.recv_fds(self.ctl, 16, 1)
        if message != b"S" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ConnectionError("the seal's door is closed (its namespace has ended)")
        sock = socket.socket(fileno=fds[0])
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", port))
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    def close(self) -> None:
        self.ctl.close()


class Exits:
    """The sealed command's way out, for as long as it runs: accept on the sockets PID 1 handed
    over and forward each connection to the host's loopback at the same port (or through
    `connect`). `opened` counts the connections per port: the harness's own account of what the
    command reached."""

    def __init__(self, connect: Connector = host_loopback) -> None:
        self.servers: list[asyncio.AbstractServer] = []
        self.connections: set[asyncio.Task] = set()
        self.connect = connect
        self.opened: dict[int, int] = {}
        self.refused_connections = 0  # past MAX_CONNECTIONS open at once
        self.forks_refused = 0  # by the seal's process limit, counted once the seal has ended
        self.cgroup_ended: asyncio.Future | None = None
        self.door: Door | None = None
        self.control: socket.socket | None = None  # a serving seal's request socket (sealed_shell.py)
        self.ready = False  # PID 1 handed over its exits and went on (else it failed: see its stderr)
        # Reads each connection in place of a plain relay, from the next connection on: a write
        # task's site door (browsers/site_door.py), called (port, reader, writer, up_reader, up_writer).
        self.guard: Callable[..., Awaitable[None]] | None = None

    async def open(self, ctl: socket.socket, proc: asyncio.subprocess.Process) -> None:
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        loop.add_reader(ctl, lambda: readable.done() or readable.set_result(None))
        ended = asyncio.ensure_future(proc.wait())
        try:  # PID 1 hands over its sockets, or fails first (its error is on stderr)
            await asyncio.wait({readable, ended}, timeout=HANDOVER_TIMEOUT_SEC, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(ctl)
            if not ended.done():
                ended.cancel()
        if not readable.done():
            if not ended.done():  # PID 1 neither handed over nor ended: the command cannot run
                raise SealError(f"the seal's PID 1 did not hand over its sockets within {HANDOVER_TIMEOUT_SEC} s")
            return  # it ended first: its own error is on the command's stderr
        message, fds, _, _ = socket.recv_fds(ctl, 4096, 16)
        sockets = [socket.socket(fileno=fd) for fd in fds]  # owned from here: closed on any failure
        if not message.startswith(b"P"):  # PID 1 failed before the handover: its error is on stderr
            for sock in sockets:
                sock.close()
            return
        try:
            ports = [int(p) for p in message[1:].decode().split(",") if p]
            for port, sock in zip(ports, sockets):
                self.servers.append(await asyncio.start_server(self._forward_to(port), sock=sock))
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        ctl.send(GO)
        self.ready = True

    def _forward_to(self, port: int):
        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if len(self.connections) >= MAX_CONNECTIONS:  # the seal's share of the harness's descriptors
                self.refused_connections += 1
                writer.close()
                return
            task = asyncio.current_task()
            self.connections.add(task)
            self.opened[port] = self.opened.get(port, 0) + 1
            try:
                up_reader, up_writer = await self.connect(port)
            except (OSError, asyncio.CancelledError):  # no way through, or the exits closed meanwhile
                writer.close()
                self.connections.discard(task)
                return
            try:
                if self.guard is not None:
                    await self.guard(port, reader, writer, up_reader, up_writer)
                else:
                    await relay(reader, writer, up_reader, up_writer)
            finally:  # whatever ended it, its place among MAX_CONNECTIONS is free again
                self.connections.discard(task)
        return forward

    def close(self) -> None:
        """The listening sockets hold the namespace's network alive: closed when the command ends,
        with any connection the agent left open (an SSE stream)."""
        for server in self.servers:
            server.close()
        for task in list(self.connections):
            task.cancel()
        self.servers.clear()
        if self.door is not None:
            self.door.close()
            self.door = None
        if self.control is not None:
            self.control.close()  # PID 1 reads the end of its requests and ends the seal
            self.control = None


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up_reader: asyncio.StreamReader,
                up_writer: asyncio.StreamWriter) -> None:
    """Both directions until both end. Cancelled (its exits closed under a connection left open)
    it closes both sides and ends quietly: the connection's task is over, not failed."""
    try:
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
    except asyncio.CancelledError:
        pass
    finally:
        for w in (writer, up_writer):
            w.close()


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close: the other direction goes on
    except (ConnectionError, OSError):
        writer.close()


async def start_sealed(seal: Seal, command: str | None, env: dict[str, str], cwd: Path, *, stdin: bool = False,
                       connect: Connector = host_loopback):
    """Starts the command sealed; returns the process and its exits (close them when it ends; with
    `seal.door`, `exits.door` is the way in). `stdin`: a pipe to the command, else nothing. With
    no command, PID 1 serves commands sent on `exits.control` (sealed_shell.py)."""
    Path(ROOT_MOUNTPOINT).mkdir(parents=True, exist_ok=True)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    exits = Exits(connect)
    keep = False
    cgroup = new_cgroup()
    nproc_uid = None if cgroup else limited_uid()
    if nproc_uid is not None:  # its writable folders (what the harness puts below them it owns as it puts it)
        for host, _ in seal.rw:
            own_for_seal(host)
    try:
        ours.setblocking(False)
        proc = await asyncio.create_subprocess_exec(
            *seal.argv(command), cwd=cwd, env={**env, CONFIG_VAR: seal.config(theirs.fileno(), cgroup, nproc_uid)},
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            pass_fds=(theirs.fileno(),), start_new_session=True,  # a timeout kills the whole group
            limit=MAX_LINE_BYTES,
        )
        theirs.close()
        if cgroup is not None:
            exits.cgroup_ended = asyncio.ensure_future(_end_cgroup(proc, cgroup, exits))
        try:
            await exits.open(ours, proc)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            exits.close()
            raise
        if seal.door:
            exits.door, keep = Door(ours), True
        elif command is None and exits.ready:  # a serving seal: its requests go over the control socket
            exits.control, keep = ours, True
        return proc, exits
    finally:
        theirs.close()
        if not keep:
            ours.close()


_probe_lock = threading.Lock()
_probe: Future[bool] | None = None


def probe_seal_ahead() -> None:
    """Starts can_seal's probe on a thread of its own: it waits ~45 ms on a sealed process, which
    planning spends on the suite meanwhile (benchmarks/collection_scale.py)."""
    global _probe
    with _probe_lock:
        if _probe is None:
            _probe = Future()
            threading.Thread(target=_settle, args=(_probe,), name="webbench-seal-probe", daemon=True).start()


def _settle(future: Future[bool]) -> None:
    try:
        future.set_result(_try_a_seal())
    except BaseException as exc:  # noqa: BLE001 - raised again where the answer is asked for
        future.set_exception(exc)


def can_seal() -> bool:
    """Whether this host lets us seal a command: the real thing, run once per process (a bare
    `unshare` probe would not check the mounts, pivot_root or capset PID 1 needs)."""
    probe_seal_ahead()
    assert _probe is not None
    return _probe.result()


# What planning asks of the host, here rather than in host.py, which loads Harbor (~75 ms of collection).
SEALED = "mount+net"  # the isolation recorded for a sealed run (the PID namespace comes with it)
# The names under which a Harbor allowlist can name the harness's listener (the seal's one exit).
HARNESS_HOSTS = {"127.0.0.1", "localhost"}  # the seal forwards IPv4 loopback only


def isolation() -> str:
    """What walls this host gives agents' commands: `mount+net` (sealed) or `none`."""
    return SEALED if can_seal() else "none"


def hosts_beyond_the_seal(allowed_hosts) -> list[str]:
    """The hosts of an allowlist that the seal cannot let an agent reach (all but the listener's)."""
    return sorted(set(allowed_hosts) - HARNESS_HOSTS)


def _try_a_seal() -> bool:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="webbench-seal-probe-") as tmp:
        seal = Seal(workdir="/tmp", ports=[], rw=[(tmp, "/tmp")])
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            Path(ROOT_MOUNTPOINT).mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(seal.argv("exit 0"), env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                              CONFIG_VAR: seal.config(theirs.fileno())},
                                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            theirs.close()
            ours.settimeout(HANDOVER_TIMEOUT_SEC)
            try:
                if ours.recv(4096) is not None:
                    ours.send(GO)
            except OSError:
                pass
            return proc.wait(timeout=HANDOVER_TIMEOUT_SEC) == 0
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return False
        except OSError:
            return False
        finally:
            theirs.close()
            ours.close()
