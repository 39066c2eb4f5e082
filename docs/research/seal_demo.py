#!/usr/bin/env python3
"""Seal an agent command: own network, PID and mount namespaces; only chosen host ports reachable.

    python3 seal_demo.py demo                      # every check, the latency and startup figures
    python3 seal_demo.py run --trial DIR --port P [--port P2] [--visible DIR] [--mode unix|fdpass] -- CMD ...

One command line, started with asyncio.create_subprocess_exec, does everything:

    unshare --net --mount --pid --fork --kill-child --propagation private \
        <python> -I -S -c '<import seal_demo; seal_demo.main(...)>' /tmp/h-seal --init -- bash -c '<agent command>'

The Python after `--init` is PID 1 of the new PID namespace (the "init"). Before the agent starts it
  1. builds a new root on a tmpfs (allowlist: /usr, /etc, the /bin,/lib... links, a minimal /dev, a
     fresh /proc, the trial's private folders read-write, the visible folders read-only, and the
     folder of the per-trial unix sockets), pivot_roots into it and detaches the old root;
  2. brings up `lo` and binds 127.0.0.1:PORT for every allowed port (before the agent exists, so
     there is no race);
       mode "unix":   it forwards each connection to /run/webbench-net/PORT.sock, a unix socket
                      the harness listens on (host side) and forwards to the real 127.0.0.1:PORT;
       mode "fdpass": it hands the listening sockets to the harness over an inherited socketpair
                      (SCM_RIGHTS); the harness accepts on them itself: no in-namespace forwarder,
                      no socket files, one hop less;
  3. forks the agent: own process group, no capabilities at all (bounding set, ambient,
     inheritable, effective, permitted cleared, no_new_privs), optionally another uid, an
     allowlisted environment, cwd = workdir; then execs it;
  4. forwards while the agent runs, reaps orphans, relays SIGTERM/SIGINT/SIGHUP to the agent's
     group, and exits with the agent's status. When PID 1 exits the kernel kills everything left in
     the namespace (forwarders are in-process anyway), and `--kill-child` kills PID 1 if `unshare`
     itself is SIGKILLed.
"""

from __future__ import annotations

T0 = __import__("time").monotonic()  # PID 1's start, for the stage trace
import ctypes
import fcntl
import marshal  # the config: built in, unlike json (whose import costs PID 1 ~10 ms of CPU)
import os
import signal
import socket
import struct
import sys
import threading
import time
import warnings  # noqa: F401  os.execvpe (get_exec_path) imports it lazily: same reason

asyncio = contextlib = json = shutil = statistics = Path = None  # imported by main(), on the host side only

HERE = os.path.dirname(os.path.realpath(__file__))
NET_DIR = "/run/webbench-net"  # where the per-trial socket folder appears inside (mode unix)
CONFIG_VAR = "WEBBENCH_SEAL_CONFIG"
# PID 1 imports this file as a module (its .pyc is cached; a script would be recompiled every time).
INIT_LOADER = "import sys; sys.path.insert(0, sys.argv[1]); import seal_demo; seal_demo.main(sys.argv[2:])"
# Host folders of ours (the demo keeps them under /tmp/h-seal; a harness would use /run/webbench-*).
RUN_DIR = os.environ.get("SEAL_RUN_DIR", f"{HERE}/run")
ROOT_MOUNTPOINT = f"{RUN_DIR}/root"  # an empty folder the new root's tmpfs is mounted on (in the namespace only)
SOCK_ROOT = f"{RUN_DIR}/sock"  # one folder of unix sockets per trial (mode unix)

# ---------------------------------------------------------------------------------------------
# Inside the namespace: PID 1
# ---------------------------------------------------------------------------------------------

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc.syscall.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p]
    return _libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src: str | None, dst: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    b = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc().mount(b(src), b(dst), b(fstype), flags, b(data)), f"mount {src} {dst} {fstype or ''}")


def bind(src: str, dst: str, readonly: bool) -> None:
    mount(src, dst, None, MS_BIND | MS_REC)
    if readonly:  # a bind mount takes MS_RDONLY only on a remount
        mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(libc().prctl(option, arg, arg3, 0, 0), f"prctl {option}")


def drop_all_capabilities(uid: int | None) -> None:
    """Called in the agent's child just before exec: whatever it runs gets no capability back
    (uid 0 keeps owning root's files, but cannot mount, unmount, pivot, mknod, ptrace PID 1...)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(bytes(24))  # effective, permitted, inheritable = 0 (x2 words)
    _check(libc().capset(ctypes.create_string_buffer(header), data), "capset")


def build_root(cfg: dict) -> None:
    """The agent's whole filesystem: an allowlist on a tmpfs, then pivot_root into it."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we do leaks back to the host
    r = cfg["root_mountpoint"]
    mount("webbench-root", r, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")

    def place(path: str, directory: bool = True) -> str:
        target = r + path
        if directory:
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        return target

    # The system: /usr and /etc read-only; /bin, /lib... as on the host (links into /usr, or binds).
    for path in ("/usr", "/etc"):
        bind(path, place(path), readonly=True)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), r + host)
        elif os.path.isdir(host):
            bind(host, place(host), readonly=True)
    # A minimal /dev: no block devices (root could read /dev/vda raw), a private devpts.
    dev = place("/dev")
    mount("webbench-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        bind("/dev/" + node, place("/dev/" + node, directory=False), readonly=False)
    mount("devpts", place("/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    os.symlink("pts/ptmx", dev + "/ptmx")
    mount("webbench-shm", place("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    # /proc of the new PID namespace (we are its PID 1): only the sandbox's processes.
    mount("proc", place("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # The trial's private folders, then the visible host folders (read-only, at their own path).
    for src, dst in cfg["rw"]:
        bind(src, place(dst), readonly=False)
    for src, dst in cfg["ro"]:
        bind(src, place(dst), readonly=True)
    if cfg["mode"] == "unix":
        bind(cfg["sock_dir"], place(NET_DIR), readonly=False)
    # Swap roots; the old one is detached, so nothing of it is left to unmount back into view.
    os.chdir(r)
    number = SYS_PIVOT_ROOT[os.uname().machine]
    _check(libc().syscall(number, b".", b"."), "pivot_root")
    _check(libc().umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)  # `/` itself read-only


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def listen_tcp(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.bind(("127.0.0.1", port))
    s.listen(512)
    return s


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)  # half-close: the other direction keeps going
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _bridge(client: socket.socket, path: str) -> None:
    """One connection of the agent's, to the harness's unix socket for that port."""
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _accept_loop(lsock: socket.socket, path: str) -> None:
    while True:
        client, _ = lsock.accept()
        threading.Thread(target=_bridge, args=(client, path), daemon=True).start()


def init_main(cfg: dict, command: list[str]) -> None:
    """PID 1 of the sandbox. No asyncio here: its import alone costs ~100 ms of CPU; threads do."""
    trace = [("imports", time.monotonic())]
    prctl(PR_SET_DUMPABLE, 0)  # the agent cannot read our /proc/1/{environ,mem,fd...}
    ctl = socket.socket(fileno=cfg["ctl_fd"]) if cfg["mode"] == "fdpass" else None
    build_root(cfg)
    trace.append(("mounts+pivot", time.monotonic()))
    loopback_up()
    listeners = {port: listen_tcp(port) for port in cfg["ports"]}  # bound before the agent exists: no race
    trace.append(("lo+listen", time.monotonic()))
    if ctl is not None:  # the harness serves these sockets itself; we only wait for its go
        # (socket.send_fds would import `array` lazily, after the old root is gone: sendmsg directly)
        fds = [s.fileno() for s in listeners.values()]
        ctl.sendmsg([",".join(map(str, listeners)).encode()],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
        for s in listeners.values():
            s.close()
        listeners = {}
        go = ctl.recv(1)
        ctl.close()  # before the fork: the agent must not inherit it
        if go != b"G":
            os._exit(125)

    trace.append(("handover", time.monotonic()))
    if cfg.get("trace"):
        prev = T0
        line = []
        for name, t in trace:
            line.append(f"{name} {1000 * (t - prev):.1f}")
            prev = t
        os.write(2, ("webbench-sandbox trace (ms): " + ", ".join(line) + "\n").encode())
    env = dict(os.environ)
    agent = os.fork()  # before any thread exists
    if agent == 0:  # the agent: own process group, nothing privileged, then exec
        try:
            os.setpgid(0, 0)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            os.chdir(cfg["workdir"])
            drop_all_capabilities(cfg.get("uid"))
            os.execvpe(command[0], command, env)
        except BaseException as e:  # noqa: BLE001
            os.write(2, f"webbench-sandbox: cannot start {command[0]!r}: {e}\n".encode())
            os._exit(127)

    def relay(sig: int, _frame) -> None:  # a TERM/INT/HUP for the sandbox goes to the agent's group
        try:
            os.killpg(agent, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay)
    for port, lsock in listeners.items():
        threading.Thread(target=_accept_loop, args=(lsock, f"{NET_DIR}/{port}.sock"), daemon=True).start()
    while True:  # PID 1 reaps every orphan; the agent's end is ours
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(125)
        if pid == agent:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)  # PID 1 leaves: the kernel kills what is left


# ---------------------------------------------------------------------------------------------
# On the host: the harness side (asyncio, imported only here: PID 1 does not need it)
# ---------------------------------------------------------------------------------------------

async def _apump(reader, writer) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def abridge(r1, w1, r2, w2) -> None:
    try:
        await asyncio.gather(_apump(r1, w2), _apump(r2, w1))
    finally:
        for w in (w1, w2):
            w.close()


BASE_ENV_KEYS = ("LANG", "TERM")


def agent_env(home: str, path_first: list[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """An allowlisted environment: nothing of the harness's own (keys, tokens, paths) gets in."""
    env = {"PATH": ":".join([*path_first, "/usr/local/bin", "/usr/bin", "/bin"]), "HOME": home,
           "LANG": os.environ.get("LANG", "C.UTF-8"), "TERM": os.environ.get("TERM", "dumb")}
    env.update(extra or {})
    return env


class Sandbox:
    """One trial's sealed environment. `ports` are host 127.0.0.1 ports, reachable inside at the
    same numbers; `rw` and `ro` are (host path, sandbox path) pairs."""

    def __init__(self, name: str, workdir: str, ports: list[int], rw: list[tuple[str, str]],
                 ro: list[tuple[str, str]], mode: str = "unix", uid: int | None = None,
                 run_dir: str = SOCK_ROOT) -> None:
        self.name, self.workdir, self.ports, self.rw, self.ro, self.mode, self.uid = name, workdir, ports, rw, ro, mode, uid
        # A unix socket path must fit in 108 bytes: a short digest, not the (long) trial name.
        self.sock_dir = f"{run_dir}/{__import__('hashlib').sha1(name.encode()).hexdigest()[:12]}"
        self._servers: list = []
        self._conns: set = set()

    def _forward_to(self, port: int):
        async def handle(r, w):
            task = asyncio.current_task()
            self._conns.add(task)
            try:
                ur, uw = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                w.close()
                return
            try:
                await abridge(r, w, ur, uw)
            finally:
                self._conns.discard(task)
        return handle

    async def __aenter__(self) -> "Sandbox":
        os.makedirs(ROOT_MOUNTPOINT, exist_ok=True)
        os.makedirs(os.path.dirname(self.sock_dir), mode=0o700, exist_ok=True)
        if self.mode == "unix":  # one socket per allowed port, in a folder of the trial's own
            shutil.rmtree(self.sock_dir, ignore_errors=True)
            os.makedirs(self.sock_dir, mode=0o700)
            for port in self.ports:
                self._servers.append(await asyncio.start_unix_server(self._forward_to(port), f"{self.sock_dir}/{port}.sock"))
        return self

    async def __aexit__(self, *exc) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._conns):  # e.g. an SSE stream the agent left open
            task.cancel()
        self._servers.clear()
        if self.mode == "unix":
            shutil.rmtree(self.sock_dir, ignore_errors=True)

    def config(self, ctl_fd: int | None = None) -> str:
        """PID 1's settings. They go in its environment (popped before the agent starts), not on its
        command line: /proc/1/cmdline is world-readable, /proc/1/environ is not (PID 1 is not dumpable)."""
        return marshal.dumps({"mode": self.mode, "ports": self.ports, "workdir": self.workdir, "rw": self.rw,
                           "ro": self.ro, "sock_dir": self.sock_dir, "root_mountpoint": ROOT_MOUNTPOINT,
                           "uid": self.uid, "ctl_fd": ctl_fd, "trace": bool(os.environ.get("SEAL_TRACE"))}).hex()

    def argv(self, command: list[str]) -> list[str]:
        """The single command line: unshare, then PID 1 (this file, by the harness's own Python,
        -I -S: no site, no user paths), then the agent's command after `--`."""
        # Not root: a user namespace gives PID 1 the capabilities it needs over its own namespaces
        # (the agent is then host uid == the harness's, as ever, and still has no capability).
        userns = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
        return ["unshare", *userns, "--net", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
                sys.executable, "-I", "-S", "-c", INIT_LOADER, HERE, "--init", "--", *command]

    async def _accept_fds(self, ctl: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(ctl, lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, 10)
        finally:
            loop.remove_reader(ctl)
        msg, fds, _, _ = socket.recv_fds(ctl, 4096, 16)
        if not msg:
            raise RuntimeError("the sandbox ended before handing over its sockets")
        servers = []
        for port, fd in zip(map(int, msg.decode().split(",")), fds):
            lsock = socket.socket(fileno=fd)
            servers.append(await asyncio.start_server(self._forward_to(port), sock=lsock))
        ctl.send(b"G")
        return servers

    async def run(self, command: list[str], env: dict[str, str], timeout: float | None = None,
                  stdout=-1, stderr=-1, on_start=None) -> tuple[int, bytes, bytes]:
        ctl_parent = ctl_child = None
        servers: list = []
        pass_fds: tuple[int, ...] = ()
        if self.mode == "fdpass":
            ctl_parent, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ctl_parent.setblocking(False)
            pass_fds = (ctl_child.fileno(),)
        proc = await asyncio.create_subprocess_exec(
            *self.argv(command), env={**env, CONFIG_VAR: self.config(ctl_child.fileno() if ctl_child else None)}, stdout=stdout, stderr=stderr,
            stdin=asyncio.subprocess.DEVNULL, pass_fds=pass_fds, start_new_session=True)
        try:
            if ctl_parent is not None:
                ctl_child.close()
                servers = await self._accept_fds(ctl_parent)
            if on_start is not None:
                on_start(proc)
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # unshare and PID 1: the namespace dies with them
            out, err = await proc.communicate()
            return 124, out or b"", (err or b"") + b"\n(timed out)"
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            if ctl_parent is not None:
                ctl_parent.close()
            for server in servers:  # the listening sockets hold the namespace's network: close them
                server.close()
        return proc.returncode, out or b"", err or b""


# ---------------------------------------------------------------------------------------------
# The demo: test servers standing in for the MCP proxy and the model gateway, then the checks
# ---------------------------------------------------------------------------------------------

async def start_test_server(label: str) -> tuple[asyncio.AbstractServer, int]:
    """A tiny HTTP/1.1 server (keep-alive): GET /ping answers at once, GET /sse streams 5 events
    200 ms apart (a long-lived MCP-style stream), anything else 404."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                if path.startswith("/sse"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n")
                    for i in range(5):
                        event = f"event: tick\ndata: {label} {i} {time.time():.3f}\n\n".encode()
                        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                        await writer.drain()
                        await asyncio.sleep(0.2)
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    continue
                body = f"pong {label}\n".encode() if path.startswith("/ping") else b"not found\n"
                status = b"200 OK" if path.startswith("/ping") else b"404 Not Found"
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


BENCH_CLIENT = r'''
import http.client, json, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def fresh():
    t = time.perf_counter(); c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", "/ping")
    c.getresponse().read(); c.close(); return time.perf_counter() - t
c = http.client.HTTPConnection("127.0.0.1", port)
def kept():
    t = time.perf_counter(); c.request("GET", "/ping"); c.getresponse().read(); return time.perf_counter() - t
for f in (fresh, kept):
    for _ in range(20): f()  # warm-up
out = {"fresh": sorted(fresh() for _ in range(n)), "kept": sorted(kept() for _ in range(n))}
print(json.dumps(out))
'''

NPM = "/work/main/.webbench/npm"


def summary(samples: list[float]) -> str:
    s = sorted(samples)
    return f"median {statistics.median(s) * 1000:.3f} ms, p90 {s[int(len(s) * 0.9)] * 1000:.3f} ms"


async def demo(mode_list: list[str]) -> int:
    base = Path(HERE) / "trials"
    mcp, mcp_port = await start_test_server("mcp")
    gw, gw_port = await start_test_server("gateway")
    decoy, decoy_port = await start_test_server("decoy")  # another harness port: must stay unreachable
    failures = 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}" + (f"  ({detail.strip()[:300]})" if detail else ""), flush=True)

    for mode in mode_list:
        trial = base / f"t-{mode}" / "environment"
        folders = {"/app": trial / "app", "/logs": trial / "logs", "/installed-agent": trial / "installed-agent",
                   "/tmp": trial / "tmp", "/home/agent": trial / "home"}
        for f in folders.values():
            f.mkdir(parents=True, exist_ok=True)
        (trial / "app" / "bench_client.py").write_text(BENCH_CLIENT)
        rw = [(str(h), s) for s, h in folders.items()]
        ro = [(NPM, NPM)] if os.path.isdir(NPM) else []
        path_first = [f"{NPM}/node_modules/.bin", f"{NPM}/node_modules/node/bin"]
        env = agent_env("/home/agent", path_first, {"DISABLE_TELEMETRY": "1"})
        print(f"\n== mode {mode}: allowed ports mcp={mcp_port} gateway={gw_port}, decoy={decoy_port} (host only)", flush=True)
        async with Sandbox(f"demo-{mode}", "/app", [mcp_port, gw_port], rw, ro, mode=mode) as box:
            async def sh(script: str, timeout: float = 60) -> tuple[int, str, str]:
                code, out, err = await box.run(["bash", "-c", script], env, timeout)
                return code, out.decode(errors="replace"), err.decode(errors="replace")

            # 1. network
            code, out, err = await sh(f"curl -sS --max-time 5 http://127.0.0.1:{mcp_port}/ping && "
                                      f"curl -sS --max-time 5 http://127.0.0.1:{gw_port}/ping")
            check("HTTP to both allowed ports", code == 0 and "pong mcp" in out and "pong gateway" in out, out + err)
            code, out, err = await sh(f"curl -sSN --max-time 10 http://127.0.0.1:{mcp_port}/sse | "
                                      "while IFS= read -r l; do echo \"$(date +%s.%N) $l\"; done")
            stamps = [float(line.split()[0]) for line in out.splitlines() if "data:" in line]
            spread = stamps[-1] - stamps[0] if len(stamps) == 5 else 0
            check("SSE stream passes, events arrive one by one (not buffered)", code == 0 and spread > 0.6,
                  f"{len(stamps)} events over {spread:.2f} s")
            code, out, err = await sh(f"curl -sS --max-time 5 http://127.0.0.1:{decoy_port}/ping")
            check("another host 127.0.0.1 port is refused", code == 7 and "pong" not in out, err)
            code, out, err = await sh("echo links=$(ip -o link | wc -l) default4=$(ip -4 route show default | wc -l) "
                                      "default6=$(ip -6 route show default | wc -l); ip -o addr | awk '{print $2, $4}'")
            check("only `lo` exists (127.0.0.1, ::1), no default route", code == 0 and "links=1 default4=0 default6=0" in out
                  and "127.0.0.1/8" in out, out.replace("\n", " | "))
            code, out, err = await sh("getent hosts example.com; echo rc=$?; curl -sS --max-time 5 http://example.com/ 2>&1; "
                                      "curl -sS --max-time 5 http://10.255.255.53/ 2>&1")
            check("DNS and any outside address fail at once (no route: nothing is sent)",
                  "rc=2" in out and "Could not resolve host" in out and ("unreachable" in out.lower() or "Couldn't connect" in out),
                  out.replace("\n", " | "))
            # 2. PID namespace and /proc
            code, out, err = await sh("ps -eo pid,ppid,user,args")
            check("ps sees only the sandbox (PID 1 = init, then the agent)", code == 0 and len(out.splitlines()) <= 5
                  and "pytest" not in out and CONFIG_VAR not in out and "trials" not in out, out.replace("\n", " | "))
            code, out, err = await sh(f"cat /proc/{os.getpid()}/environ; echo rc=$?; cat /proc/1/environ; echo rc=$?; "
                                      "ls /proc/1/root/ 2>&1; echo rc=$?")
            check("harness /proc/<pid>/environ absent, PID 1's environ/root unreadable", out.count("rc=1") == 2 and "rc=2" in out,
                  (out + err).replace("\n", " | "))
            # 3. filesystem view
            code, out, err = await sh("git -C /work/main show HEAD:README.md 2>&1 | head -2; echo rc=${PIPESTATUS[0]}; "
                                      "cat /work/main/README.md; echo rc=$?; ls -A /work/main; ls /work/main/.git; echo rc=$?; "
                                      "ls /root; echo rc=$?; ls /work/.library; echo rc=$?; ls /")
            check("checkout, .git, /root, /work/.library invisible", out.count("rc=128") == 1 and out.count("rc=1\n") == 1
                  and out.count("rc=2") == 3, (out + err).replace("\n", " | "))
            code, out, err = await sh(f"ls {NPM}/node_modules | wc -l; touch {NPM}/x 2>&1; touch /app/ok && echo app-writable; "
                                      "touch /etc/x 2>&1; touch /x 2>&1; ls /dev")
            check("CLI folder readable but read-only; /app writable; /etc and / read-only; minimal /dev",
                  "app-writable" in out and out.count("Read-only file system") == 3 and "vda" not in out, out.replace("\n", " | "))
            code, out, err = await sh(f"umount {NPM} 2>&1; mount -t tmpfs x /tmp 2>&1; unshare -m true 2>&1; "
                                      "ip link add x type dummy 2>&1; cat /proc/kcore 2>&1 | head -c 50; echo; grep Cap /proc/self/status")
            check("no capability left: umount/mount/unshare/ip link fail", "CapEff:\t0000000000000000" in out
                  and "CapBnd:\t0000000000000000" in out and "must be superuser to unmount" in out
                  and "mount: /tmp: permission denied" in out and "unshare failed: Operation not permitted" in out
                  and "RTNETLINK answers: Operation not permitted" in out, out.replace("\n", " | "))
            # 4. environment allowlist and the CLIs
            code, out, err = await sh("env | sort | tr '\\n' ' '; echo; codex --version; claude --version; pi --version; "
                                      "node --version", timeout=120)
            check("codex, claude, pi --version with the allowlisted env", code == 0 and "codex-cli" in out
                  and "Claude Code" in out, (out + err).replace("\n", " | "))
            # latency
            host_code = BENCH_CLIENT
            proc = await asyncio.create_subprocess_exec("/usr/bin/python3", "-c", host_code, str(gw_port), "200",
                                                        stdout=asyncio.subprocess.PIPE)
            direct = json.loads((await proc.communicate())[0])
            code, out, err = await sh(f"/usr/bin/python3 /app/bench_client.py {gw_port} 200")
            sealed = json.loads(out)
            for kind in ("fresh", "kept"):
                d, s = statistics.median(direct[kind]), statistics.median(sealed[kind])
                print(f"  latency {kind:5} connection/request: direct {summary(direct[kind])}; sealed {summary(sealed[kind])}; "
                      f"added {1000 * (s - d):.3f} ms", flush=True)
            # startup
            samples = []
            for _ in range(30):
                t = time.perf_counter()
                code, _, err = await box.run(["true"], env)
                samples.append(time.perf_counter() - t)
                assert code == 0, err
            print(f"  startup (spawn to exit of `true`, sealed): {summary(samples)}", flush=True)
            # lifecycle: whatever the agent leaves behind dies with it
            marker = f"4242.{os.getpid() % 1000}{len(mode)}"

            def leftovers() -> list[str]:
                found = []
                for p in Path("/proc").iterdir():
                    try:
                        if p.name.isdigit() and marker.encode() in (p / "cmdline").read_bytes():
                            found.append(p.name)
                    except OSError:
                        pass
                return found

            t = time.perf_counter()  # the daemons keep the stdout pipe open: without a PID namespace this would hang
            code, out, err = await sh(f"setsid sleep {marker} & disown; (sleep {marker} &) ; "
                                      f"curl -sSN http://127.0.0.1:{mcp_port}/sse >/dev/null & sleep 0.3; echo bye")
            took = time.perf_counter() - t
            await asyncio.sleep(0.2)
            check("agent exits: its daemons (setsid, double fork, holding stdout) and an open SSE stream die with it",
                  code == 0 and not leftovers() and took < 2, f"run() took {took:.2f} s; left: {leftovers()}")
            started = []
            task = asyncio.create_task(box.run(["bash", "-c", f"sleep {marker}; echo never"], env, 30, on_start=started.append))
            await asyncio.sleep(1.0)
            os.kill(started[0].pid, signal.SIGKILL)  # only `unshare`, as an OOM killer or a crash would
            code, out, err = await task
            await asyncio.sleep(0.2)
            check("SIGKILL of `unshare` alone takes PID 1 and the agent down (--kill-child)", code == -9 and not leftovers(),
                  f"rc={code}, left: {leftovers()}")
            started = []
            task = asyncio.create_task(box.run(["bash", "-c", f"trap 'echo got-TERM; exit 3' TERM; sleep {marker} & wait"],
                                               env, 30, on_start=started.append))
            await asyncio.sleep(1.0)
            os.killpg(started[0].pid, signal.SIGTERM)  # the harness's polite stop: the whole group
            code, out, err = await task
            await asyncio.sleep(0.2)
            check("SIGTERM to the group reaches the agent (relayed by PID 1), exit status passed back",
                  "got-TERM" in out.decode() and not leftovers(), f"rc={code} out={out.decode().strip()} left: {leftovers()}")
            code, out, err = await box.run(["bash", "-c", "sleep 5"], env, 1.0)
            await asyncio.sleep(0.2)
            check("timeout: killpg(SIGKILL) of the session ends everything", code == 124 and not leftovers(), f"rc={code}")
        # the sandbox is gone with its forwarders: nothing of ours left in the host's tables
        left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and (p / "cmdline").exists()
                and b"--init" in (p / "cmdline").read_bytes() and b"seal_demo" in (p / "cmdline").read_bytes()]
        check("no sandbox process left afterwards", not left, str(left))
    # baselines for startup
    for label, argv in (("plain bash -c true", ["bash", "-c", "true"]),
                        ("unshare --net --mount --pid --fork true", ["unshare", "--net", "--mount", "--pid", "--fork", "true"])):
        samples = []
        for _ in range(30):
            t = time.perf_counter()
            p = await asyncio.create_subprocess_exec(*argv)
            await p.wait()
            samples.append(time.perf_counter() - t)
        print(f"  startup baseline {label}: {summary(samples)}")
    for server in (mcp, gw, decoy):
        server.close()
    print(f"\n{'all checks passed' if not failures else f'{failures} check(s) FAILED'}")
    return 1 if failures else 0


async def run_cli(args) -> int:
    trial = Path(args.trial).resolve() / "environment"
    folders = {"/app": trial / "app", "/logs": trial / "logs", "/installed-agent": trial / "installed-agent",
               "/tmp": trial / "tmp", "/home/agent": trial / "home"}
    for f in folders.values():
        f.mkdir(parents=True, exist_ok=True)
    rw = [(str(h), s) for s, h in folders.items()]
    ro = [(str(Path(v).resolve()), str(Path(v).resolve())) for v in args.visible]
    path_first = [f"{v}/node_modules/.bin" for v in args.visible] + [f"{v}/node_modules/node/bin" for v in args.visible]
    env = agent_env("/home/agent", path_first, dict(kv.split("=", 1) for kv in args.env))
    async with Sandbox(trial.parent.name, args.workdir, args.port, rw, ro, mode=args.mode, uid=args.uid) as box:
        code, _, _ = await box.run(args.command, env, args.timeout, stdout=None, stderr=None)
    return code


def host_imports() -> None:
    """What the harness side needs (PID 1 never imports these)."""
    global asyncio, contextlib, json, shutil, statistics, Path
    import asyncio
    import contextlib
    import json
    import shutil
    import statistics
    from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--init", "--"]:
        init_main(marshal.loads(bytes.fromhex(os.environ.pop(CONFIG_VAR))), argv[2:])
    host_imports()
    import argparse
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo")
    d.add_argument("--mode", action="append", choices=["unix", "fdpass"])
    r = sub.add_parser("run")
    r.add_argument("--trial", required=True, help="trial folder (its environment/ subfolders are created)")
    r.add_argument("--workdir", default="/app")
    r.add_argument("--port", type=int, action="append", default=[])
    r.add_argument("--visible", action="append", default=[])
    r.add_argument("--env", action="append", default=[], metavar="K=V")
    r.add_argument("--mode", choices=["unix", "fdpass"], default="unix")
    r.add_argument("--uid", type=int)
    r.add_argument("--timeout", type=float)
    r.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        return asyncio.run(demo(args.mode or ["unix", "fdpass"]))
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    return asyncio.run(run_cli(args))


if __name__ == "__main__":
    sys.exit(main())
