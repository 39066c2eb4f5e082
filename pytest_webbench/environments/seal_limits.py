"""What PID 1 of a seal (seal_init.py) does to hold its commands: join the seal's pids cgroup, or,
where there is none, run each command under RLIMIT_NPROC as a user the limit holds
(process_limits.py says which); cap its open files; and take every capability from it, with the
kernel's keyrings refused. Standard library only: imported by PID 1 before its pivot, like
seal_init."""

from __future__ import annotations

import ctypes
import os
import resource
import struct

PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def join_cgroup(path: str | None) -> None:
    """PID 1 moves itself into the seal's pids cgroup (the harness made it, with its limit), so
    every process of the seal counts against it: a fork bomb meets the limit, not the host's."""
    if path:
        with open(path + "/cgroup.procs", "w") as f:
            f.write("0")  # 0: the writer itself, whatever its number in this PID namespace


def limited_user_namespace(uid: int) -> int:
    """A user namespace whose uid and gid 0 are `uid` on the host, made by a child of PID 1 and
    mapped by PID 1 (root of the host's namespace may map any uid); returns a descriptor of it,
    which each command enters (`limit_command`). Called after the pivot: /proc is the seal's, so
    the child's number there is the one fork returned."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.unshare(os.CLONE_NEWUSER)
            os.write(ready_w, b"u")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    try:
        if os.read(ready_r, 1) != b"u":
            raise OSError("the seal's user namespace could not be made")
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{child}/{name}", "w") as f:
                f.write(f"0 {uid} 1\n")
        return os.open(f"/proc/{child}/ns/user", os.O_RDONLY)
    finally:
        os.write(done_w, b"d")
        os.waitpid(child, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)


def limit_command(max_files: int, nproc: int, userns: int | None) -> None:
    """In a command's child, before it drops its capabilities: a cap on its open files, and where no
    cgroup holds the seal, on its processes (RLIMIT_NPROC, counted per user and user namespace and
    never enforced on the host's root: in `userns` the command becomes its uid 0, which is a plain
    user on the host). Lowered in the command only: PID 1 keeps its own, and a command without
    capabilities cannot raise them back."""
    if userns is not None:
        os.setns(userns, os.CLONE_NEWUSER)
        os.close(userns)
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    for limit, cap in ((resource.RLIMIT_NOFILE, max_files), (resource.RLIMIT_NPROC, nproc)):
        if cap:
            soft, hard = resource.getrlimit(limit)
            top = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
            resource.setrlimit(limit, (min(soft, top) if soft != resource.RLIM_INFINITY else top, top))


# The kernel's keyrings are not namespaced: uid 0's user keyring is the host root's, shared by
# every trial. Docker's default seccomp profile refuses these calls for the same reason.
KEYRING_SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219), "riscv64": (217, 218, 219)}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "riscv64": 0xC00000F3}
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO_EPERM = 0x7FFF0000, 0x00050000 | 1


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _refuse_keyrings() -> None:
    """A seccomp filter: add_key, request_key and keyctl fail with EPERM, as does any syscall of
    another ABI (i386's int 0x80, x86_64's x32), whose numbers differ. Needs no_new_privs."""
    machine = os.uname().machine
    add_key, request_key, keyctl = KEYRING_SYSCALLS[machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    program = [(ld, 0, 0, 4), (jeq, 0, 6, AUDIT_ARCH[machine]),  # seccomp_data.arch; not ours: refused
               (ld, 0, 0, 0), (jge, 4, 0, 0x40000000),  # seccomp_data.nr; x32's numbers: refused
               (jeq, 3, 0, add_key), (jeq, 2, 0, request_key), (jeq, 1, 0, keyctl),
               (ret, 0, 0, SECCOMP_RET_ALLOW), (ret, 0, 0, SECCOMP_RET_ERRNO_EPERM)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
    fprog = _SockFprog(len(program), ctypes.addressof(code))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


def drop_all_capabilities() -> None:
    """In the agent's child, just before exec: it can mount, unmount, ptrace or pivot nothing, and
    nothing it runs gets a capability back."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        _prctl(PR_CAPBSET_DROP, cap)
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    header = ctypes.create_string_buffer(struct.pack("Ii", 0x20080522, 0))  # _LINUX_CAPABILITY_VERSION_3, self
    _check(_libc.capset(header, ctypes.create_string_buffer(bytes(24))), "capset")
    _refuse_keyrings()
