"""A Harbor environment on this host: a private folder per trial, no container.

Harbor's built-in environments all need a container runtime, a VM or a cloud account; a browser
agent needs none of that, since its only tool is the browser behind the proxy. Paths inside the
environment (`/app`, `/logs/...`) map into `<trial dir>/environment/`.

Where the host allows a private mount namespace (root, or CAP_SYS_ADMIN: `unshare --mount`), every
command runs in one: the trial's own folders are bind-mounted over the absolute paths Harbor's
agents write to (`/app`, `/logs`, `/installed-agent`, `/tmp`, and `$HOME` as `/home/agent`), so two
trials on one machine never share them, and the suite (task files, answer rules, reference
solutions) and the results directory (other trials' answers and grades) are covered by empty
tmpfs mounts, so an agent's shell cannot read them. Without that privilege a run that needs it
(a real agent CLI) stops with a clear error unless unsealed runs were allowed explicitly
(`--allow-unsealed`); then commands run with the trial folder as their directory and nothing
hidden, and the manifest and report say so (`isolation`).

The agent's environment is built from an allowlist (`AGENT_ENV_ALLOWLIST`), never from the harness's
own: the variables a CLI needs to run, plus what Harbor's agent passes explicitly (its config and
the model key it resolved). Nothing else of the harness (the Kernel or Braintrust key, another
provider's key) reaches an agent's command.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult

WORKDIR = "/app"
AGENT_HOME = "/home/agent"
# Absolute paths the agents use, each a private folder of the trial's inside the namespace.
PRIVATE_PATHS = ("/app", "/logs", "/installed-agent", "/tmp", AGENT_HOME)
STAGE = "/run/webbench-env"  # where the trial's folder is bound first (see _namespaced)
KEEP = "/run/webbench-keep"  # where visible host folders wait while /tmp and hidden paths are covered
# What an agent's command inherits from the harness's environment; everything else it gets is
# passed explicitly by Harbor's agent (its config, the model key) or the runner preset.
AGENT_ENV_ALLOWLIST = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "USER", "LOGNAME")


def agent_environment(explicit: dict[str, str] | None) -> dict[str, str]:
    """The allowlisted part of this process's environment, then what was passed explicitly."""
    return {**{k: os.environ[k] for k in AGENT_ENV_ALLOWLIST if k in os.environ}, **(explicit or {})}


class UnsealedRefused(RuntimeError):
    """An agent would run without its mount namespace, and that was not allowed."""


def unshare_command() -> str:
    """`unshare` (WEBBENCH_UNSHARE names another, e.g. to try a machine without namespace rights)."""
    return os.environ.get("WEBBENCH_UNSHARE", "unshare")


# A private mount namespace, and a PID namespace with its own /proc: the agent sees no process of the
# harness (nor any process's environment); --kill-child ends what it left behind with it.
NAMESPACES = ("--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private")


@functools.cache
def can_isolate() -> bool:
    """Whether this host lets us make a private mount namespace (checked once per process)."""
    try:
        probe = subprocess.run([unshare_command(), *NAMESPACES, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


class HostEnvironment(BaseEnvironment):
    def __init__(self, *args, hidden_paths: list[str] | None = None, visible_paths: list[str] | None = None,
                 allow_unsealed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.allow_unsealed = allow_unsealed
        self.hidden_paths = [str(Path(p).resolve()) for p in hidden_paths or []]
        # Host folders the agent's commands need where they are (the pinned CLIs), even when they
        # sit under /tmp or a hidden folder.
        self.visible_paths = [str(Path(p).resolve()) for p in visible_paths or [] if Path(p).is_dir()]

    @property
    def isolated(self) -> bool:
        return can_isolate()

    @staticmethod
    def type() -> str:
        return "webbench-host"

    def _validate_definition(self) -> None:
        pass  # nothing to build

    @property
    def root(self) -> Path:
        return Path(self.trial_paths.trial_dir) / "environment"

    def host_path(self, env_path: str) -> Path:
        pure = PurePosixPath(env_path)
        if not pure.is_absolute():
            pure = PurePosixPath(WORKDIR) / pure
        parts = [p for p in pure.parts[1:] if p not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"path {env_path!r} leaves the environment")
        return self.root.joinpath(*parts)

    @property
    def _keep_points(self) -> list[str]:
        return [f"{KEEP}/{i}" for i in range(len(self.visible_paths))]

    async def start(self, force_build: bool) -> None:
        if not self.isolated and not self.allow_unsealed:
            raise UnsealedRefused(f"this machine does not allow a private mount namespace ({unshare_command()} --mount "
                                  "failed: root or CAP_SYS_ADMIN is needed), so the agent would see the suite and the "
                                  "results; pass --allow-unsealed to run unsealed anyway")
        for path in PRIVATE_PATHS:
            self.host_path(path).mkdir(parents=True, exist_ok=True)
        if self.isolated:  # empty mount points on the host, made once, used by every command
            for point in (*PRIVATE_PATHS, STAGE, *self._keep_points):
                Path(point).mkdir(parents=True, exist_ok=True)

    def _namespaced(self, command: str, workdir: str) -> list[str]:
        """`unshare` a mount namespace, bind the trial's folders over the agents' paths, cover the
        hidden ones, then run the command there.

        The trial's folder is first bound to a staging point, so the later mounts can cover its
        real path (it lives in the hidden results directory, perhaps under /tmp) and still reach
        it; /tmp is bound last for the same reason."""
        keep = self._keep_points  # start() made these and the other mount points
        staged = lambda p: shlex.quote(str(PurePosixPath(STAGE) / p.lstrip("/")))  # noqa: E731
        steps = [f"mount --bind {shlex.quote(str(self.root))} {STAGE}"]
        steps += [f"mount --bind {shlex.quote(src)} {point}" for src, point in zip(self.visible_paths, keep)]
        steps += [f"mount --bind {staged(p)} {p}" for p in PRIVATE_PATHS if p != "/tmp"]
        steps += [f"mount -t tmpfs -o size=64k,mode=0555 webbench-hidden {shlex.quote(p)}"
                  for p in self.hidden_paths if Path(p).is_dir()]
        steps.append(f"mount --bind {staged('/tmp')} /tmp")
        # Visible paths back at their own place, read-only (mkdir lands in the private /tmp if need be).
        steps += [f"mkdir -p {shlex.quote(dst)} && mount --bind -o ro {point} {shlex.quote(dst)}"
                  for dst, point in zip(self.visible_paths, keep)]
        # bash stays PID 1 of the namespace (the trailing `exit` keeps it from exec-ing the command), so
        # the agent is an ordinary process: its orphans are reaped, and a signal it sends itself works
        prologue = " && ".join(steps) + ' && cd "$1" && bash -c "$2"; exit $?'
        return [unshare_command(), *NAMESPACES, "bash", "-c", prologue, "webbench-env", workdir, command]

    async def stop(self, delete: bool) -> None:
        pass  # the folder stays with the trial's results

    async def upload_file(self, source_path, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target)

    async def upload_dir(self, source_dir, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir) -> None:
        source = self.host_path(source_dir)
        if source.is_dir():
            shutil.copytree(source, target_dir, dirs_exist_ok=True)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        workdir = self.host_path(cwd or WORKDIR)
        workdir.mkdir(parents=True, exist_ok=True)
        env = self._merge_env(env)  # the agent's AgentConfig.env and Harbor's scoped variables
        full_env = agent_environment(env)
        if self.isolated:
            full_env.setdefault("HOME", AGENT_HOME)  # the trial's private home, not the host user's
            argv = self._namespaced(command, str(PurePosixPath(cwd or WORKDIR)))
        else:
            full_env.setdefault("HOME", str(self.host_path(AGENT_HOME)))
            argv = ["bash", "-c", command]
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=workdir, env=full_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # so a timeout kills the whole process group, agent CLI included
        )
        _LIVE_GROUPS.add(proc.pid)
        try:
            result = await self._finish(proc, timeout_sec)
        except asyncio.CancelledError:
            _LIVE_GROUPS.discard(proc.pid)  # _finish killed the group
            raise
        # Anything else (the coroutine closed with its loop) leaves the group to the exit hook.
        _LIVE_GROUPS.discard(proc.pid)
        return result

    async def _finish(self, proc, timeout_sec: int | None) -> ExecResult:
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            _kill_group(proc.pid)
            out, err = await proc.communicate()
            return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace") + "\n(timed out)", return_code=124)
        except asyncio.CancelledError:  # Harbor's agent timeout, or the run interrupted: no orphans
            _kill_group(proc.pid)
            raise
        # Killed by a signal: 128 + its number, as a shell and Harbor's container environments report it.
        code = proc.returncode or 0
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"),
                          return_code=128 - code if code < 0 else code)


# Process groups of agent commands still running. If this process exits without cancelling them (a
# Ctrl-C that ends the interpreter before the trial is cancelled), they are killed at exit: `unshare`
# alone may die (the event loop's transport kills its direct child) while the namespace's PID 1,
# forked a moment before, lives on in the group.
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
