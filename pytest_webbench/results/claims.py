"""Who holds an experiment's folder: claiming its ID (a new run), the one-run-at-a-time lock (a run
or a --resume), giving a refused run's claim back, what to say when its disk cannot be written, and
the command that finishes it."""

from __future__ import annotations

import os
import shlex
from datetime import UTC, datetime
from pathlib import Path


class ExperimentExists(Exception):
    pass


def claim_experiment_dir(results_dir: Path, experiment_id: str) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / experiment_id
    try:
        path.mkdir()  # atomic: exactly one of two concurrent runs succeeds
    except FileExistsError:
        raise ExperimentExists(
            f"experiment {experiment_id!r} already exists at {path}: choose another --experiment-id "
            "(nothing of the earlier run was touched)"
        ) from None
    return path


RUN_LOCK = "run.lock"


class ExperimentBusy(Exception):
    """Another process is running this experiment (a first run or a --resume)."""


def hold_experiment(experiment_dir: Path) -> int:
    """One run of an experiment at a time: an exclusive flock on its run.lock, held by the process
    that plans and reports until it exits. The kernel drops the lock when that process ends, however
    it ends, so a crashed run never leaves it stuck; the file names the holder for the message."""
    import fcntl
    import socket
    import sys

    path = experiment_dir / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 2000, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        raise ExperimentBusy(
            f"experiment {experiment_dir.name!r} is being run by {holder} ({path}): one run of an experiment at a "
            "time. The lock goes when that process ends, however it ends; wait for it, or stop it") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {datetime.now(UTC).isoformat(timespec='seconds')}: "
                  f"{' '.join(sys.argv)[:300]}".encode(), 0)
    return fd


def disk_full_message(exc: OSError, experiment_dir: Path) -> str | None:
    """What to tell the user when the results disk cannot take a write (full, over quota, or gone
    read-only); None for any other error."""
    import errno

    if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        return None
    return (f"webbench: the results disk cannot be written ({exc.filename or experiment_dir}: {exc.strerror}): the run "
            f"stops here, and every record written so far is whole. Free space, then finish it with "
            f"`{resume_command(experiment_dir)}`")


def resume_command(experiment_dir: Path) -> str:
    """The command that finishes the run in `experiment_dir`, which --resume finds by the folder's name
    (the experiment's ID). Its results folder is given with `=`: pytest reads
    the command line for its root directory before plugins load, and takes an existing directory
    given as a separate word for a test path (which a --resume refuses)."""
    return f"pytest {shlex.quote(f'--results-dir={experiment_dir.parent}')} --resume {shlex.quote(experiment_dir.name)}"


def release_claim(experiment_dir: Path) -> None:
    """A new run refused once its trials were collected (-k chose ones it cannot run): its claim on
    the experiment goes, so the ID is free again; a folder holding anything else is left as it is."""
    (experiment_dir / RUN_LOCK).unlink(missing_ok=True)
    try:
        experiment_dir.rmdir()
    except OSError:
        pass


def new_experiment_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()
