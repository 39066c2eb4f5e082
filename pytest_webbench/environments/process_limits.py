"""A seal's process limit: a pids cgroup of its own in the host's cgroup v1 pids hierarchy, which
its PID 1 joins before it forks anything (seal_init), so every process and thread of the seal
counts against MAX_PROCESSES; how often the limit refused a fork is read as the seal ends, for
the trial's flags. Where there is no such hierarchy this process may write, there is no limit."""

from __future__ import annotations

import atexit
import contextlib
import os
from pathlib import Path

MAX_PROCESSES = 1024  # processes and threads (a sealed Chromium runs ~40 threads, Codex and Node a few dozen)
PIDS_CGROUP_V1 = "/sys/fs/cgroup/pids"


def _cgroup_parent() -> Path | None:
    """This process's folder of seal cgroups in the host's pids hierarchy (cgroup v1's pids
    controller; None where there is none this process may write, and then no process limit)."""
    parent = Path(PIDS_CGROUP_V1) / f"webbench-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
    except OSError:
        return None
    return parent


def new_cgroup() -> str | None:
    """A pids cgroup for one seal, limited to MAX_PROCESSES; its PID 1 joins it (seal_init) and every
    process of the seal is counted. Removed once the seal has ended (`remove_cgroup`)."""
    parent = _cgroup_parent()
    if parent is None:
        return None
    import uuid

    path = parent / uuid.uuid4().hex[:16]
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(MAX_PROCESSES))
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
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
