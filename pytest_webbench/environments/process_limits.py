"""A seal's process limit: a pids cgroup of its own in the host's cgroup v1 pids hierarchy, which
its PID 1 joins before it forks anything (seal_init), so every process and thread of the seal
counts against MAX_PROCESSES; how often the limit refused a fork is read as the seal ends, for
the trial's flags.

Where there is no such hierarchy this process may write (cgroup v2 without a delegated subtree,
a container), the limit is RLIMIT_NPROC, which the kernel counts per user and user namespace and
never enforces on the host's root: the seal's commands then run as uid 0 of a user namespace of
the seal's own, mapped to LIMITED_UID on the host, so each seal's processes are counted apart
against their own limit (a harness that is not root seals in a user namespace already, as its
own uid). Files the commands must write are made LIMITED_UID's (`own_for_seal`). A fork refused
this way is not counted (the kernel keeps no such count), so `forks_refused` stays 0.
`WEBBENCH_PIDS_CGROUP=0` uses the fallback where a cgroup would do (to try it)."""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path, PurePosixPath

MAX_PROCESSES = 1024  # processes and threads (a sealed Chromium runs ~40 threads, Codex and Node a few dozen)
PIDS_CGROUP_V1 = "/sys/fs/cgroup/pids"
# The host uid a seal's commands run as where RLIMIT_NPROC is the limit and the harness is root: no
# account's (far above any login's and systemd's dynamic range), and never uid 0, whom it spares.
LIMITED_UID = 1_999_900_000


def uses_cgroup() -> bool:
    return os.environ.get("WEBBENCH_PIDS_CGROUP", "1") != "0" and _cgroup_parent() is not None


def limited_uid() -> int | None:
    """The host uid a seal's commands run as to be held by RLIMIT_NPROC, where the harness is root
    and no pids cgroup can be made (None: a cgroup holds them, or the seal's own user namespace
    already maps them to a user the limit holds)."""
    return LIMITED_UID if os.geteuid() == 0 and not uses_cgroup() else None


def own_for_seal(path: Path | str) -> None:
    """A folder of the harness's own making (a seal's writable folder) made its commands', where they
    run as `limited_uid` (else nothing to do); a link is chowned as a link."""
    if (uid := limited_uid()) is not None:
        with contextlib.suppress(FileNotFoundError):
            os.chown(path, uid, uid, follow_symlinks=False)


def own_below(root: Path, relative: str, tree: bool = True) -> None:
    """What the harness put at `relative` below `root` (a trial's workspace), and every folder on the
    way to it, made the commands' where they run as `limited_uid`. The names below `root` may be the
    agent's, and its commands may be running: each step is opened from the folder before it with
    O_NOFOLLOW, so no link, swapped in at any step at any moment, is ever followed out of the
    workspace; `tree` takes everything below the last step too (fwalk checks each folder it enters)."""
    uid = limited_uid()
    if uid is None:
        return
    parts = [p for p in PurePosixPath(relative).parts if p not in ("/", ".", "")]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            try:
                os.chown(part, uid, uid, dir_fd=fd, follow_symlinks=False)
                if i == len(parts) - 1 and not tree:
                    return
                step = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # gone, a file, or a link: nothing to go into
                return
            os.close(fd)
            fd = step
        if tree:
            for _top, dirs, files, at in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                for name in dirs + files:
                    with contextlib.suppress(FileNotFoundError):
                        os.chown(name, uid, uid, dir_fd=at, follow_symlinks=False)
    finally:
        os.close(fd)


def _cgroup_parent() -> Path | None:
    """This process's folder of seal cgroups in the host's pids hierarchy (cgroup v1's pids
    controller; None where there is none this process may write)."""
    parent = Path(PIDS_CGROUP_V1) / f"webbench-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    return parent


def new_cgroup() -> str | None:
    """A pids cgroup for one seal, limited to MAX_PROCESSES; its PID 1 joins it (seal_init) and every
    process of the seal is counted. Removed once the seal has ended (`remove_cgroup`). None: no
    hierarchy takes seals here, RLIMIT_NPROC is the limit (`limited_uid`); one that does and fails
    to make this one raises, never a seal without a limit."""
    parent = _cgroup_parent() if os.environ.get("WEBBENCH_PIDS_CGROUP", "1") != "0" else None
    if parent is None:
        return None
    import uuid

    path = parent / uuid.uuid4().hex[:16]
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(MAX_PROCESSES))
    except OSError as exc:  # a hierarchy that takes seals, and this one could not be made: no seal without its limit
        with contextlib.suppress(OSError):
            path.rmdir()
        raise OSError(exc.errno, f"the seal's pids cgroup {path} could not be made ({exc.strerror}): "
                                 "a seal does not start without its process limit") from None
    return str(path)


def remove_cgroup(path: str | None) -> None:
    """A seal's cgroup, once its processes are gone (one still exiting keeps it: the sweep at exit
    takes it then)."""
    if path:
        with contextlib.suppress(OSError):
            os.rmdir(path)


def forks_refused(path: str) -> int:
    """How often the seal's process limit refused a fork (the pids controller's `max` event count)."""
    try:
        for line in Path(path, "pids.events").read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == "max":
                return int(count)
    except (OSError, ValueError):
        pass
    return 0


def sweep_cgroups(parent_too: bool = False) -> None:
    """Removes this process's seal cgroups that no process holds any more (rmdir fails on the rest),
    and at exit its folder of them."""
    parent = Path(PIDS_CGROUP_V1) / f"webbench-{os.getpid()}"
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            if child.is_dir():
                with contextlib.suppress(OSError):
                    child.rmdir()
        if parent_too:
            parent.rmdir()  # fails while a seal's cgroup is still in it


atexit.register(sweep_cgroups, parent_too=True)
