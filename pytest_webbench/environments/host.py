"""A Harbor environment on this host: a private folder per trial, no container.

Harbor's built-in environments all need a container runtime, a VM or a cloud account; a browser
agent needs none of that, since its only tool is the browser behind the proxy. Paths inside the
environment (`/app`, `/logs/...`) map into a workspace of the trial's own, outside the results: as
root a tmpfs of `WORKSPACE_BYTES` (an agent that fills it fills no disk), removed when the trial
ends. Files go in and out through `files.py`, which follows no link the agent planted and bounds
every size; what it refused is named in `files-refused.json` beside the trial's results.

Where the host allows namespaces (root, or unprivileged user namespaces), every command is sealed
(`seal.py`; one seal serves a trial's commands, `sealed_shell.py`): its own network, mount and PID
namespaces; a filesystem built from an allowlist (the system read-only, the trial's folders at
`/app`, `/logs`, `/installed-agent`, `/tmp` and `/home/agent`, the pinned CLIs read-only), so the
checkout, the suite, the results and the harness's home are simply absent; no process of the
harness visible; and one way out, the proxy's listener (which also serves the model gateway) at its
usual `127.0.0.1` port. Without that right a
run that needs it (a real agent CLI) stops with a clear error unless unsealed runs were allowed
explicitly (`--allow-unsealed`); then commands run with the trial folder as their directory and
nothing hidden, and the manifest and report say so (`isolation`).

The agent's environment is built from an allowlist (`AGENT_ENV_ALLOWLIST`), never from the harness's
own: the variables a CLI needs to run, plus what Harbor's agent passes explicitly (its config and
the model key it resolved). Nothing else of the harness (the Kernel or Braintrust key, another
provider's key) reaches an agent's command.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode, NetworkPolicy

from .files import CopyResult, FileRefused, Refusal, copy_in, copy_in_dirs, copy_out, kind_below
from .seal import Seal, can_seal, hosts_beyond_the_seal, unshare_command
from .sealed_shell import Finished, SealedShell, read_bounded
from .process_limits import own_below
from .seal_init import mount_tmpfs, unmount

WORKDIR = "/app"
AGENT_HOME = "/home/agent"
# Absolute paths the agents use, each a private folder of the trial's inside the seal.
PRIVATE_PATHS = ("/app", "/logs", "/installed-agent", "/tmp", AGENT_HOME, "/tests")  # /tests: a task's own verifier
# What an agent's command inherits from the harness's environment; everything else it gets is
# passed explicitly by Harbor's agent (its config, the model key) or the runner preset.
AGENT_ENV_ALLOWLIST = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TERM", "TZ", "USER", "LOGNAME")
WORKSPACE_BYTES = 1024 * 1024 * 1024  # the trial's folders, all told (as root: a tmpfs of this size)
MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # of a command's stdout, and of its stderr, kept for Harbor
REFUSALS = "files-refused.json"  # in the trial's results: what files.py would not copy, and why
# A task's verifier runs in a workspace of its own (`verify_apart`): these stay writable there; /app,
# holding only the files it grades, is read-only. No folder of the agent's exists in it at all.
VERIFIER_WRITABLE = ("/logs", "/tmp", AGENT_HOME, "/tests", "/installed-agent")
# The verifier's commands search only the system's folders, none of which a seal lets a command write.
VERIFIER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def agent_environment(explicit: dict[str, str] | None) -> dict[str, str]:
    """The allowlisted part of this process's environment, then what was passed explicitly."""
    return {**{k: os.environ[k] for k in AGENT_ENV_ALLOWLIST if k in os.environ}, **(explicit or {})}


class UnsealedRefused(RuntimeError):
    """An agent would run without its seal, and that was not allowed."""


def _unsealed_message() -> str:
    return (f"this machine cannot seal an agent's command ({unshare_command()} --net --mount --pid failed: root or "
            "unprivileged user namespaces are needed), so the agent would see the suite and the results; pass "
            "--allow-unsealed to run unsealed anyway")


class SubmissionIntercepted(RuntimeError):
    """The agent's run ended at its first intercepted submission, as ClawBench ends a run there:
    its commands were ended by the harness (harbor_run.py scores the trial as it stands)."""


class HostEnvironment(BaseEnvironment):
    def __init__(self, *args, exit_ports: list[int] | None = None, visible_paths: list[str] | None = None,
                 allow_unsealed: bool = False, **kwargs):
        self.allow_unsealed = allow_unsealed  # read by `capabilities`, which Harbor's __init__ consults
        super().__init__(*args, **kwargs)
        self.exit_ports = sorted(set(exit_ports or []))  # host 127.0.0.1 ports the agent may reach
        # Host folders the agent's commands need where they are (the pinned CLIs), read-only.
        self.visible_paths = [str(Path(p).resolve()) for p in visible_paths or [] if Path(p).is_dir()]
        self._workspace: Path | None = None
        self._mounted = False
        self._shells: list[SealedShell] = []  # the trial's seals, kept for its next commands
        self.refused: list[Refusal] = []
        self.verifying = False  # `verify_apart` was called: commands are the task verifier's, not the agent's
        self.verifier_signalled: list[str] = []  # verifier commands that a signal ended (the verifier's error)
        self.forks_refused = 0  # forks the seals' process limit refused (a fork bomb's): flagged on the trial
        self.submitted = False  # `end_at_submission` ended the agent's commands
        self._running: set[asyncio.Task] = set()  # the agent's commands under way
        self._ending: set[asyncio.Future] = set()  # seals end_at_submission is ending

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        """Harbor's network policies are kept by the seal; `validate_network_policy_support` says
        which it can keep (and refuses, clearly, where there is no seal)."""
        return EnvironmentCapabilities(
            disable_internet=True, network_allowlist=True, network_allowlist_hostnames=True,
            network_allowlist_ipv4_addresses=True, dynamic_network_policy=True)

    def validate_network_policy_support(self, network_policy: NetworkPolicy | None = None) -> None:
        """The seal is never wider than the harness's listener: `no-network` gives a command no exit,
        an allowlist of the listener's host (127.0.0.1, as each run adds it) that one exit, and
        `public` the same one exit (narrower than asked, never wider). An allowlist naming any
        other host cannot be kept, so it is refused, as Harbor asks of an environment. Unsealed
        (only with --allow-unsealed, the report saying so) nothing is enforced, as the user accepted."""
        policy = network_policy or self._network_policy
        if policy.network_mode == NetworkMode.PUBLIC or self.allow_unsealed:
            return
        if not can_seal():
            raise UnsealedRefused(_unsealed_message())
        if policy.network_mode == NetworkMode.ALLOWLIST and (others := hosts_beyond_the_seal(policy.allowed_hosts)):
            raise ValueError(f"network_mode='allowlist' names {', '.join(others)}: on this machine an agent's commands "
                             "can reach only the harness's listener (127.0.0.1), so that allowlist cannot be kept")

    async def _apply_network_policy(self, network_policy: NetworkPolicy) -> None:
        pass  # read by each command's seal as it starts (`_exits`)

    def _exits(self) -> list[int]:
        """The harness ports a command may reach under the policy in force."""
        return [] if self._network_policy.network_mode == NetworkMode.NO_NETWORK else self.exit_ports

    @property
    def isolated(self) -> bool:
        return can_seal()

    @staticmethod
    def type() -> str:
        return "webbench-host"

    def _validate_definition(self) -> None:
        pass  # nothing to build

    @property
    def root(self) -> Path:
        if self._workspace is None:
            raise RuntimeError("the environment has not started: it has no folders yet")
        return self._workspace

    @staticmethod
    def inside(env_path: str) -> str:
        """An environment path as a path below the workspace (`/app/x` -> `app/x`)."""
        pure = PurePosixPath(env_path)
        if not pure.is_absolute():
            pure = PurePosixPath(WORKDIR) / pure
        parts = [p for p in pure.parts[1:] if p not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"path {env_path!r} leaves the environment")
        return "/".join(parts)

    def host_path(self, env_path: str) -> Path:
        """Where an environment path is on this host. Only for folders the harness made (the
        private paths): below them, names are the agent's, and `files.py` walks them."""
        return self.root / self.inside(env_path)

    async def start(self, force_build: bool) -> None:
        if not self.isolated and not self.allow_unsealed:
            raise UnsealedRefused(_unsealed_message())
        self._make_workspace()

    def _make_workspace(self) -> None:
        self._workspace = Path(tempfile.mkdtemp(prefix=f"webbench-{self.session_id[:60]}-"))
        if os.geteuid() == 0:  # a cap on what the agent can write; without root, the disk's own
            mount_tmpfs(str(self._workspace), WORKSPACE_BYTES)
            self._mounted = True
            _LIVE_WORKSPACES.add(str(self._workspace))
        for path in (*PRIVATE_PATHS, "/logs/verifier"):  # Harbor's verifier writes into /logs/verifier, as its images have it
            self.host_path(path).mkdir(parents=True, exist_ok=True)
            self._give(path, tree=False)

    async def _drop_workspace(self) -> None:
        """Every seal of the trial's ends (and with each, every process in it), then its folders go."""
        for shell in list(self._shells):
            await self._end_shell(shell)
        workspace, self._workspace = self._workspace, None
        if workspace is None:
            return
        if self._mounted:
            unmount(str(workspace))
            _LIVE_WORKSPACES.discard(str(workspace))
            self._mounted = False
        shutil.rmtree(workspace, ignore_errors=True)

    async def verify_apart(self, graded: dict[str, bytes]) -> None:
        """From here on the trial's commands are its task verifier's, run where nothing the agent
        wrote can run or shadow anything: every process the agent left ends with its seals, its
        folders go (what the harness keeps of them was copied out, bounded, before this), and a
        fresh workspace takes their place holding only `graded` (file name -> bytes: the answer as
        the harness copied it, the page the harness read), read-only at /app. Its HOME, /tmp and
        /tests are new and empty, its PATH the system's, and no folder of the agent's CLIs is
        bound. Called once the agent has stopped, before Harbor's verifier runs."""
        await self._drop_workspace()
        self.verifying = True
        self._make_workspace()
        app = self.host_path(WORKDIR)
        for name, data in graded.items():
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"{name!r} is not a file name")
            (app / name).write_bytes(data)

    def _seal(self, workdir: str) -> Seal:
        if self.verifying:  # the verifier's own folders: the graded files read-only, nothing of the agent's CLIs
            return Seal(workdir=workdir, ports=self._exits(),
                        rw=[(str(self.host_path(p)), p) for p in VERIFIER_WRITABLE],
                        ro=[(str(self.host_path(WORKDIR)), WORKDIR)])
        return Seal(workdir=workdir, ports=self._exits(),
                    rw=[(str(self.host_path(p)), p) for p in PRIVATE_PATHS],
                    ro=[(p, p) for p in self.visible_paths])

    async def _sealed_shell(self) -> SealedShell | Finished:
        """An idle seal of the trial's with the exits the policy allows now, or a new one (commands
        run at once get a seal each; a seal that ended, or whose exits are no longer the policy's,
        goes)."""
        ports = self._exits()
        for shell in list(self._shells):
            if shell.busy:
                continue
            if shell.alive() and shell.ports == ports:
                shell.busy = True  # taken before any await, so no other command takes it too
                return shell
            await self._end_shell(shell)
        shell = SealedShell(self._seal(WORKDIR), self.root, MAX_OUTPUT_BYTES)
        shell.busy = True
        if (failed := await shell.start()) is not None:
            return failed
        self._shells.append(shell)
        _LIVE_GROUPS.add(shell.proc.pid)
        return shell

    def end_at_submission(self) -> None:
        """The browser blocked the task's submission: the agent's commands under way end now (their
        seals with them), and each raises SubmissionIntercepted to Harbor's agent. Called on the
        harness's loop by the interceptor; a verifier's commands are never the agent's."""
        if self.verifying or self.submitted:
            return
        self.submitted = True
        for shell in list(self._shells):  # held until done: the loop keeps only a weak reference to a task
            ending = asyncio.ensure_future(self._end_shell(shell))
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)
        for task in list(self._running):
            task.cancel()

    async def _end_shell(self, shell: SealedShell) -> None:
        if shell in self._shells:
            self._shells.remove(shell)
        await shell.close()
        self.forks_refused += shell.forks_refused
        _LIVE_GROUPS.discard(shell.proc.pid)

    async def stop(self, delete: bool) -> None:
        """The workspace goes: what the harness keeps was copied out (bounded) before this."""
        await self._drop_workspace()

    async def upload_file(self, source_path, target_path: str) -> None:
        copy_in(Path(source_path), self.root, self.inside(target_path))
        self._give(target_path)

    async def upload_dir(self, source_dir, target_dir: str) -> None:
        copy_in(Path(source_dir), self.root, self.inside(target_dir))
        self._give(target_dir)

    def _give(self, env_path: str, tree: bool = True) -> None:
        """What the harness put in the workspace becomes the seal's commands', with the folders made
        for it, where they run as another uid (process_limits.own_below; else nothing)."""
        own_below(self.root, self.inside(env_path), tree)

    async def download_file(self, source_path: str, target_path) -> None:
        self._copied(copy_out(self.root, self.inside(source_path), Path(target_path)), source_path)
        if not Path(target_path).is_file():
            raise FileRefused(f"{source_path}: not copied ({self._why(source_path)})")

    async def download_dir(self, source_dir: str, target_dir) -> None:
        try:
            self._copied(copy_out(self.root, self.inside(source_dir), Path(target_dir)), source_dir)
        except FileNotFoundError:
            return

    # Harbor asks before each file it copies out (`test -d`: a shell command each, 25 ms unsealed);
    # the folders are on this host, so the answer is read here, as copy_out reads them: no link
    # followed, so a planted link is neither a folder nor a file, and copy_out refuses it. Like
    # the downloads, it sees the trial's folders only: a path elsewhere (/usr) is neither.
    async def is_dir(self, path: str, user: str | int | None = None) -> bool:
        return kind_below(self.root, self.inside(path)) == stat.S_IFDIR

    async def is_file(self, path: str, user: str | int | None = None) -> bool:
        return kind_below(self.root, self.inside(path)) == stat.S_IFREG

    def _copied(self, result: CopyResult, source: str) -> None:
        """Refusals, named by environment path, in the trial's results (rewritten whole each time)."""
        if not result.refused:
            return
        base = PurePosixPath(source)
        self.refused += [Refusal(str(base if r.path == base.name else base / r.path), r.why) for r in result.refused]
        path = Path(self.trial_paths.trial_dir) / REFUSALS
        path.write_text(json.dumps([{"path": r.path, "why": r.why} for r in self.refused], indent=1))

    def _why(self, source: str) -> str:
        return next((r.why for r in reversed(self.refused) if r.path == source), "missing")

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        if self.submitted and not self.verifying:
            raise SubmissionIntercepted("the agent's run ended at its submission: no command of its runs after it")
        task = asyncio.current_task()
        self._running.add(task)
        try:
            return await self._exec(command, cwd, env, timeout_sec)
        except asyncio.CancelledError:
            if self.submitted and task.cancelling() <= 1 and not self.verifying:
                task.uncancel()  # ended for the submission, not by Harbor: Harbor's agent is told why
                raise SubmissionIntercepted("the agent's run ended at its first intercepted submission, as ClawBench "
                                            "ends a run") from None
            raise
        finally:
            self._running.discard(task)

    async def _exec(self, command: str, cwd: str | None, env: dict[str, str] | None, timeout_sec: int | None) -> ExecResult:
        # Harbor's own working folders (never the agent's names): made through files.py all the same.
        copy_in_dirs(self.root, self.inside(cwd or WORKDIR))
        self._give(cwd or WORKDIR, tree=False)
        workdir = self.host_path(cwd or WORKDIR)
        env = self._merge_env(env)  # the agent's AgentConfig.env and Harbor's scoped variables
        full_env = agent_environment(env)
        if self.verifying:
            full_env["PATH"] = VERIFIER_PATH
        if self.isolated:
            full_env.setdefault("HOME", AGENT_HOME)  # the trial's private home, not the host user's
            shell = await self._sealed_shell()
            if isinstance(shell, Finished):  # the seal could not be built: PID 1's own error
                finished = shell
            else:
                try:
                    finished = await shell.run(command, full_env, str(PurePosixPath(cwd or WORKDIR)), timeout_sec)
                finally:
                    shell.busy = False
            return self._result(command, ExecResult(stdout=finished.stdout.decode(errors="replace"),
                                                    stderr=finished.stderr.decode(errors="replace"),
                                                    return_code=finished.return_code))
        else:
            full_env.setdefault("HOME", str(self.host_path(AGENT_HOME)))
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", command, cwd=workdir, env=full_env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
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
        return self._result(command, result)

    def _result(self, command: str, result: ExecResult) -> ExecResult:
        """A verifier command a signal ended (a shell's 128 + N; 124 a timeout, 125 its seal killed
        under it) did not finish its work: whatever reward it left is not one (harbor_run.py)."""
        code = result.return_code or 0
        if self.verifying and (code in (124, 125) or code > 128):
            self.verifier_signalled.append(f"{command[:200]!r} ended with {result.return_code}")
        return result

    async def _finish(self, proc, timeout_sec: int | None) -> ExecResult:
        try:
            out, err = await asyncio.wait_for(_bounded_output(proc), timeout_sec)
        except TimeoutError:
            _kill_group(proc.pid)
            out, err = await _bounded_output(proc)
            return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace") + "\n(timed out)", return_code=124)
        except asyncio.CancelledError:  # Harbor's agent timeout, or the run interrupted: no orphans
            _kill_group(proc.pid)
            raise
        # Killed by a signal: 128 + its number, as a shell and Harbor's container environments report it.
        code = proc.returncode or 0
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"),
                          return_code=128 - code if code < 0 else code)


async def _bounded_output(proc) -> tuple[bytes, bytes]:
    """The command's stdout and stderr, each up to MAX_OUTPUT_BYTES (`read_bounded`)."""
    out, err = await asyncio.gather(read_bounded(proc.stdout, MAX_OUTPUT_BYTES), read_bounded(proc.stderr, MAX_OUTPUT_BYTES))
    await proc.wait()
    return out, err


# Workspaces still mounted (a tmpfs holds memory until unmounted): unmounted at exit.
_LIVE_WORKSPACES: set[str] = set()


@atexit.register
def _unmount_live_workspaces() -> None:
    for path in list(_LIVE_WORKSPACES):
        unmount(path)


# Process groups of agent commands still running. If this process exits without cancelling them (a
# Ctrl-C that ends the interpreter before the trial is cancelled), they are killed at exit: `unshare`
# alone may die (the event loop's transport kills its direct child) while the namespace's PID 1,
# forked a moment before, lives on in the group (--kill-child is set only after that fork).
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
