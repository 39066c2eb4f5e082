"""What PID 1 of a seal (seal_init.py) does to hold its commands' processes and open files: join the
seal's pids cgroup, or, where there is none, run each command under RLIMIT_NPROC as a user the
limit holds (process_limits.py says which). Standard library only: imported by PID 1 before its
pivot, like seal_init."""

from __future__ import annotations

import os
import resource


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
