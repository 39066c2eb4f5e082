"""PID 1 of a sealed agent command: builds the agent's world, hands the harness its one exit, runs it.

Started by `seal.py` as `unshare --net --mount --pid --fork ... python -I -S -c <loader> --init --
bash -c <command>`, it is the first process of fresh network, mount and PID namespaces. In order:

  1. a new root on a tmpfs holding only an allowlist (`/usr` and part of `/etc` read-only, a minimal `/dev`, the
     namespace's own `/proc`, the trial's private folders read-write, the pinned CLIs read-only at
     their own path, a capped tmpfs of its own where asked), then pivot_root into it and detach the
     old root: the checkout, the results, the harness's home are not hidden, they are absent;
  2. `lo` up and `127.0.0.1:<port>` bound for each allowed port (the harness's proxy and model
     gateway share one listener, so one port), before the agent exists; the listening sockets go to
     the harness over an inherited socketpair, and the harness accepts on them and forwards to its
     own listener. Nothing else has a route: other ports, the site, the Kernel API, DNS all fail;
  3. where asked (`door`), a child of PID 1 keeps the control socket and answers each byte the
     harness sends with a fresh, unconnected TCP socket of this namespace: the harness connects it
     to a port inside (a browser's debugging port) from its own side. Nothing the command runs
     holds that socket, so the way in is the harness's alone;
  4. the agent is forked with no capability at all, no_new_privs and no kernel keyring (seccomp),
     in its own process group, with the environment it was given minus our config; PID 1 reaps
     orphans, relays TERM/INT/HUP to the agent's group and exits with the agent's status, at which
     the kernel ends whatever the agent left in the namespace.

With `--serve` instead of a command (`serve_main`, for `sealed_shell.py`), PID 1 keeps the control
socket after step 2 and does step 4 once for each command the harness sends on it.

Standard library only, imported before the pivot (the interpreter's own files vanish with the old
root, so nothing may be imported lazily afterwards), no asyncio (its import alone costs PID 1
~100 ms of CPU). Recipe and measurements: docs/research/sealing-an-agent.md.
"""

from __future__ import annotations

import ctypes
import fcntl
import marshal  # the config: built in, cheaper than json
import os
import resource
import select
import signal
import socket
import struct
import sys
import warnings  # noqa: F401  os.execvpe imports it lazily, which would fail after the pivot

if __package__:  # the harness's import, for CONFIG_VAR and the rest
    from .seal_limits import drop_all_capabilities, join_cgroup, limit_command, limited_user_namespace
else:  # PID 1's: this folder is on its path (seal.py's INIT_LOADER)
    from seal_limits import drop_all_capabilities, join_cgroup, limit_command, limited_user_namespace

CONFIG_VAR = "WEBBENCH_SEAL_CONFIG"  # PID 1's settings: in its environment, since argv is world-readable
GO = b"G"

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE = 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/kmsg")
RLIMITS = sorted(name for name in dir(resource) if name.startswith("RLIMIT_"))

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, dst: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {src} on {dst}")


# Per-mount options kept on a read-only remount: in a user namespace a mount's nosuid, nodev, noexec
# and atime settings are locked, and a remount that drops one is refused.
KEPT_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048,
                "relatime": 1 << 21, "strictatime": 1 << 24}


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it: space, tab, newline and backslash as octal escapes."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _mounts_below(top: str) -> list[tuple[str, int]]:
    """Every mount at or below `top` in this namespace, with the options a remount must keep."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" ")
            point = _unescape(fields[4])
            if point == top or point.startswith(top.rstrip("/") + "/"):
                kept = 0
                for option in fields[5].split(","):
                    kept |= KEPT_OPTIONS.get(option, 0)
                out.append((point, kept))
    return out


def _bind(src: str, dst: str, readonly: bool) -> None:
    _mount(src, dst, None, MS_BIND | MS_REC)
    if readonly:  # a bind mount takes MS_RDONLY only on a remount, and only for the mount remounted:
        # every mount the recursive bind brought along (Docker's /etc/hosts, a tmpfs below /usr) is
        # remounted read-only too, or it stays writable through the seal
        for point, kept in _mounts_below(dst):
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


def _bind_device(src: str, dst: str) -> None:
    """A host device node, read-only: reads and writes go to the device as ever (a device's data
    is not the mount's), but a chmod or touch would reach the host's node, which every process
    of the machine shares. Not nodev, or the node would not open."""
    _mount(src, dst, None, MS_BIND)
    _mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


def mount_tmpfs(path: str, size_bytes: int) -> None:
    """A tmpfs of `size_bytes` at `path` (the host environment's capped workspace; root only)."""
    _mount("webbench-workspace", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size_bytes}")


def unmount(path: str) -> None:
    _libc.umount2(path.encode(), MNT_DETACH)


def _prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def _etc(place, allowed: list[str]) -> None:
    """The seal's /etc: each allowed entry of the host's (seal.py's ETC_ALLOWED), bound read-only (a
    link copied as a link); the folder itself is the seal's root's, read-only once built."""
    place("/etc")
    for name in allowed:
        host = "/etc/" + name
        if os.path.islink(host):
            place("/etc/" + name.rpartition("/")[0]) if "/" in name else None
            os.symlink(os.readlink(host), place("/etc") + "/" + name)
        elif os.path.isdir(host):
            _bind(host, place(host), readonly=True)
        elif os.path.isfile(host):
            _bind(host, place(host, directory=False), readonly=True)


def _build_root(cfg: dict, lasting: bool = False) -> None:
    """`lasting`: the root serves many commands (`serve_main`), so nothing one command may change
    in it may outlast that command: `/dev` and `/dev/pts` are read-only (`/dev/shm`, a fresh mount
    for each command, stays writable), and `/proc` hides the processes a command cannot trace
    (PID 1, not dumpable), whose files a capability-less uid 0 could otherwise write
    (`oom_score_adj`)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates back to the host
    root = cfg["root_mountpoint"]
    _mount("webbench-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")

    def place(path: str, directory: bool = True) -> str:
        target = root + path
        os.makedirs(target if directory else os.path.dirname(target), exist_ok=True)
        if not directory:
            open(target, "a").close()
        return target

    _bind("/usr", place("/usr"), readonly=True)
    _etc(place, cfg["etc"])
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # as on the host: links into /usr, or binds
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), root + host)
        elif os.path.isdir(host):
            _bind(host, place(host), readonly=True)
    # A minimal /dev: no block devices (root could read a disk raw), a private devpts.
    dev = place("/dev")
    _mount("webbench-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        _bind_device("/dev/" + node, place("/dev/" + node, directory=False))
    _mount("devpts", place("/dev/pts"), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
    os.symlink("pts/ptmx", dev + "/ptmx")
    _mount("webbench-shm", place("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    _mount("proc", place("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,  # only this namespace's processes
           "hidepid=ptraceable" if lasting else None)  # not "invisible": it spares gid 0, the agent's
    # The agent may be uid 0 without capabilities, and uid 0 may write some of /proc with none
    # (core_pattern runs a program as host root; sysrq reboots): those parts read-only, as
    # container runtimes make them; the kernel's memory and keyring masked.
    for path in PROC_READ_ONLY:
        if os.path.exists(root + path):
            _bind(root + path, root + path, readonly=True)
    for path in PROC_MASKED:
        if os.path.exists(root + path):
            _bind_device("/dev/null", root + path)
    for src, dst in cfg["rw"]:
        _bind(src, place(dst), readonly=False)
    for src, dst in cfg["ro"]:
        _bind(src, place(dst), readonly=True)
    owner = f",uid={cfg['nproc_uid']},gid={cfg['nproc_uid']}" if cfg.get("nproc_uid") is not None else ""
    for dst, size in cfg["tmpfs"]:  # the commands' own (process_limits.py: they may run as another uid)
        _mount("webbench-tmp", place(dst), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size}{owner}")
    os.chdir(root)
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")  # nothing left to unmount back into view
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if lasting:  # ptys are still handed out from a read-only devpts; its modes can no longer be changed
        for path in ("/dev", "/dev/pts"):
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, request))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS |= IFF_UP


def _listen(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(512)
    return s


def _hand_over(ctl: socket.socket, ports: list[int], door: bool) -> None:
    """The listening sockets go to the harness (it accepts on them from its own network); the agent
    starts only once the harness says it is serving them."""
    listeners = [_listen(port) for port in ports]
    fds = struct.pack(f"{len(listeners)}i", *(s.fileno() for s in listeners))
    message = b"P" + ",".join(map(str, ports)).encode()  # never empty: an empty read means PID 1 failed
    # socket.send_fds would import `array` lazily, after the old root is gone
    ctl.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)] if listeners else [])
    for s in listeners:
        s.close()
    go = ctl.recv(1)
    if go != GO:
        os._exit(125)
    if door and os.fork() == 0:
        _serve_door(ctl)


def _serve_door(ctl: socket.socket) -> None:
    """The door's child: one unconnected socket of this namespace per byte asked, until the harness
    closes its end (or the namespace ends with PID 1)."""
    try:
        while ctl.recv(1):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ctl.sendmsg([b"S"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", s.fileno()))])
            s.close()
    finally:
        os._exit(0)


def init_main(cfg: dict, command: list[str]) -> None:
    _prctl(PR_SET_DUMPABLE, 0)  # the agent cannot read our /proc/1/{environ,mem,fd}
    ctl = socket.socket(fileno=cfg["ctl_fd"])
    join_cgroup(cfg.get("cgroup"))
    _build_root(cfg)
    limits = _command_limits(cfg)
    _loopback_up()
    _hand_over(ctl, cfg["ports"], cfg.get("door", False))
    ctl.close()  # before the agent's fork: it must not inherit it
    env = dict(os.environ)
    agent = os.fork()
    if agent == 0:
        _exec_command(command, env, cfg["workdir"], lambda: os.setpgid(0, 0), limits)

    def relay(sig: int, _frame) -> None:
        try:
            os.killpg(agent, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay)
    while True:  # reap every orphan; the agent's end is ours, and the kernel then ends the rest
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(125)
        if pid == agent:
            os._exit(_exit_code(status))


def _command_limits(cfg: dict) -> tuple[int, int, int | None]:
    """What `limit_command` gives each command: its open files, and, where no cgroup holds the seal,
    its processes and the user namespace it runs them in (after the pivot: /proc is the seal's)."""
    uid = cfg.get("nproc_uid")
    return cfg.get("max_files", 0), cfg.get("nproc", 0), limited_user_namespace(uid) if uid is not None else None


def _exec_command(argv: list[str], env: dict, workdir: str, prepare, limits: tuple[int, int, int | None]) -> None:
    """In the command's child: `prepare()` (its own process group, its stdio, its namespaces), its
    limits, default signal dispositions, then exec without a capability. Never returns: a failure
    is reported on stderr and exits 127, as a shell would."""
    try:
        prepare()
        limit_command(*limits)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.chdir(workdir)
        drop_all_capabilities()
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"webbench seal: cannot start {argv[0]!r}: {exc}\n".encode())
    os._exit(127)


def _exit_code(status: int) -> int:
    """A child's wait status as a shell says it: 128 + N when signal N killed it."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def serve_main(cfg: dict) -> None:
    """PID 1 of a seal kept for a trial's many commands (`--serve`): the world is built once, then
    each request on the control socket is one command, forked as `init_main` forks its one. When
    no command is left running, whatever they left is killed before the next may start, as if each
    command's namespace had ended; each gets its own SysV IPC and `/dev/shm`, so nothing one leaves
    there reaches the next. The harness closing its end ends the seal."""
    _prctl(PR_SET_DUMPABLE, 0)
    ctl = socket.socket(fileno=cfg["ctl_fd"])
    ctl.set_inheritable(False)  # no command may hold the harness's control socket
    join_cgroup(cfg.get("cgroup"))
    _build_root(cfg, lasting=True)
    command_limits = _command_limits(cfg)
    _loopback_up()
    _hand_over(ctl, cfg["ports"], False)
    # A command can signal PID 1 only where it has a handler: Python's own for SIGINT would end it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)  # a flood of SIGCHLD needs one wake, not a warning
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to wake_w
    limits = _rlimits()  # a command can lower PID 1's (prlimit needs no capability), and so every later command's
    running: dict[int, int] = {}  # pid -> request number
    while True:
        readable = select.select([ctl, wake_r], [], [])[0]
        if wake_r in readable:
            os.read(wake_r, 4096)
        ended = _reap(running)
        if ended and not running:
            _end_leftovers()
        spent = bool(ended) and _rlimits() != limits  # then the seal ends, and the next command gets a fresh one
        for number, code in ended:
            ctl.sendall(struct.pack("=IiB", number, code, spent))
        if spent:
            os._exit(0)
        if ctl in readable:
            message, ancillary, _, _ = ctl.recvmsg(1, socket.CMSG_SPACE(4 * struct.calcsize("i")))
            if not message:  # the harness is done with the seal
                os._exit(0)
            fds = [fd for level, kind, data in ancillary if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
                   for fd in struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4])]
            if len(fds) != 4:
                for fd in fds:
                    os.close(fd)
                os._exit(125)
            number, pid = _start(*fds, limits=command_limits)
            running[pid] = number


def _rlimits() -> list[tuple[int, int]]:
    return [resource.getrlimit(getattr(resource, name)) for name in RLIMITS]


def _reap(running: dict[int, int]) -> list[tuple[int, int]]:
    """Every child that ended (commands and orphans alike); the commands' numbers and exit codes."""
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        if pid in running:
            ended.append((running.pop(pid), _exit_code(status)))


def _end_leftovers() -> None:
    """Kills every process of the namespace but PID 1 (kill(-1) spares the caller) and reaps them,
    until none is left: a fork racing the kill is killed on the next round."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def _start(request_fd: int, stdin: int, stdout: int, stderr: int, limits: tuple[int, int, int | None]) -> tuple[int, int]:
    """Forks one command of a request (a marshalled dict in a memfd: number, argv, env, workdir)."""
    try:
        os.lseek(request_fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(request_fd, 1 << 20):
            chunks.append(chunk)
        request = marshal.loads(b"".join(chunks))
    finally:
        os.close(request_fd)
    def own_world() -> None:
        os.setsid()  # its own process group, and its own scheduling autogroup
        signal.set_wakeup_fd(-1)
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        for fd in {stdin, stdout, stderr} - {0, 1, 2}:
            os.close(fd)
        os.unshare(os.CLONE_NEWIPC | os.CLONE_NEWNS)
        _mount("webbench-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")

    pid = os.fork()
    if pid == 0:
        _exec_command(request["argv"], request["env"], request["workdir"], own_world, limits)
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    return request["number"], pid


def main(argv: list[str]) -> None:
    serve = argv == ["--serve"]
    if not serve and (argv[:2] != ["--init", "--"] or len(argv) < 3):
        sys.exit("usage: seal_init --init -- COMMAND... | seal_init --serve")
    try:
        cfg = marshal.loads(bytes.fromhex(os.environ.pop(CONFIG_VAR)))
        serve_main(cfg) if serve else init_main(cfg, argv[2:])
    except OSError as exc:  # a namespace the host does not grant: said on stderr, exit 126
        os.write(2, f"webbench seal: {exc}\n".encode())
        os._exit(126)
