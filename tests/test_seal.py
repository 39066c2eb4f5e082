"""The seal around an agent's commands (environments/seal.py, seal_init.py), exercised as Harbor's
agents use it: `HostEnvironment.exec` with a shell command. The servers stand for the proxy's
listener (the one allowed exit), the task's site and anything else on this machine."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from pytest_webbench.environments.host import HostEnvironment
from pytest_webbench.environments.seal import can_seal

pytestmark = pytest.mark.seal
CHECKOUT = Path(__file__).resolve().parents[1]


async def _http_server(body: str) -> tuple[asyncio.AbstractServer, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(f"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n{body}\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _environment(tmp_path: Path, exit_ports: list[int], visible: list[str] | None = None) -> HostEnvironment:
    trial_dir = tmp_path / "results" / "jobs" / "control" / "t1"
    trial_dir.mkdir(parents=True)
    return HostEnvironment(environment_dir=tmp_path, environment_name="t1", session_id="t1",
                           trial_paths=TrialPaths(trial_dir), task_env_config=EnvironmentConfig(),
                           exit_ports=exit_ports, visible_paths=visible or [])


def _run(env: HostEnvironment, command: str, **kwargs):
    return _run_all(env, [command], **kwargs)[0]


def _run_all(env: HostEnvironment, commands: list[str], **kwargs):
    """The commands one after another in one started environment, stopped after, as a trial has it."""
    async def go():
        await env.start(force_build=False)
        try:
            return [await env.exec(command, **kwargs) for command in commands]
        finally:
            await env.stop(delete=True)

    return asyncio.run(go())


# Which seal a command ran in: its network namespace, and when the seal's root was built (to the
# nanosecond). The namespace's inode alone is no oracle: the kernel may give a freed one to the next.
SEAL_ID = "echo SEAL=$(readlink /proc/self/ns/net)@$(stat -c %z / | tr ' ' _)"


def seal_of(result) -> str:
    import re

    found = re.findall(r"^SEAL=(\S+)$", result.stdout, re.M)
    assert len(found) == 1, result
    return found[0]


def test_this_machine_can_seal():
    assert can_seal()  # root here; CI needs it for every test below to mean anything


def test_a_sealed_command_reaches_its_exit_and_nothing_else(tmp_path):
    async def scenario():
        proxy, proxy_port = await _http_server("through-the-exit")
        site, site_port = await _http_server("the-site-itself")
        env = _environment(tmp_path, [proxy_port])
        await env.start(force_build=False)
        try:
            return await env.exec(
                f"curl -sS -m 5 http://127.0.0.1:{proxy_port}/; echo rc=$?; "
                f"curl -sS -m 5 http://localhost:{proxy_port}/; echo rc=$?; "
                f"curl -sS -m 5 http://127.0.0.1:{site_port}/; echo rc=$?; "
                "curl -sS -m 5 https://api.onkernel.com/browsers; echo rc=$?; "
                "curl -sS -m 5 http://10.255.255.1/; echo rc=$?; "
                "ip -o link | cut -d: -f2; ip route; echo routes-end")
        finally:
            await env.stop(delete=True)
            proxy.close()
            site.close()

    result = asyncio.run(scenario())
    out = result.stdout
    assert out.count("through-the-exit") == 2, result  # by address and by name
    assert "the-site-itself" not in out  # another port of this machine: the namespace's own loopback
    assert "Failed to connect" in result.stderr and "Could not resolve host: api.onkernel.com" in result.stderr
    assert [line for line in out.splitlines() if line.startswith("rc=")] == ["rc=0", "rc=0", "rc=7", "rc=6", "rc=7"], out
    assert out.split("routes-end")[0].split("rc=7\n")[-1].split() == ["lo"]  # one interface, no route at all


def test_a_sealed_command_sees_its_folders_and_the_pinned_clis_and_nothing_of_the_harness(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBBENCH_SEAL_SENTINEL", "sentinel-in-the-harness-env-3f1a")
    visible = tmp_path / "pinned-cli"
    (visible / "bin").mkdir(parents=True)
    (visible / "bin" / "tool").write_text("pinned\n")
    results = tmp_path / "results"
    (results / "answers.json").parent.mkdir(parents=True, exist_ok=True)
    (results / "answers.json").write_text("secret answers")
    env = _environment(tmp_path, [], visible=[str(visible)])
    result, written = _run_all(env, [(
        f"echo TOP; ls /; echo CLI; cat {visible}/bin/tool; touch {visible}/bin/x 2>&1; "
        f"echo CHECKOUT; ls {CHECKOUT} 2>&1; git -C {CHECKOUT} show HEAD:README.md 2>&1 | head -2; "
        f"cat {results}/answers.json 2>&1; ls ~root 2>&1; "
        "echo PROCS; ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sort -u; "
        "echo CAPS; grep CapEff /proc/self/status; umount /usr 2>&1; "
        # uid 0 without capabilities may still write parts of /proc: they are read-only or masked
        "echo PROC; sh -c 'echo 1 > /proc/sys/vm/drop_caches' 2>&1; sh -c 'echo x > /proc/sys/kernel/core_pattern' 2>&1; "
        "echo MASKED $(cat /proc/timer_list 2>/dev/null | wc -c); "
        "echo WRITE; echo made-inside > /app/out.txt; echo HOME=$HOME; echo END"), "cat /app/out.txt"])
    out = result.stdout + result.stderr
    top = out.split("TOP\n")[1].split("CLI\n")[0].split()
    assert {"app", "home", "logs", "tmp", "usr", "etc", "proc", "dev"} <= set(top), top
    assert not {"root", "work", "var", "opt", "srv", "mnt", "sys"} & set(top) - {CHECKOUT.parts[1], visible.parts[1]}
    assert "pinned" in out and "Read-only file system" in out  # the CLI is there, and read-only
    assert "README" not in out.split("CHECKOUT")[1].split("PROCS")[0]  # no checkout, no git history
    assert "secret answers" not in out  # the results are absent
    assert "sentinel-in-the-harness-env-3f1a" not in out  # no process of the harness visible
    assert int(out.split("PROCS\n")[1].split()[0]) < 8  # PID 1, the shell and its pipeline
    assert "CapEff:\t0000000000000000" in out
    assert "must be superuser" in out or "Operation not permitted" in out  # root without capabilities
    proc = out.split("PROC\n")[1].split("WRITE")[0]
    assert proc.count("Read-only file system") == 2 and "MASKED 0" in proc, proc  # the host's timer_list is not empty
    assert "HOME=/home/agent" in out and "END" in out
    assert written.stdout == "made-inside\n"  # in the trial's folder, which outlives the command


def test_a_sealed_command_that_times_out_leaves_no_process(tmp_path):
    marker = f"webbench-seal-timeout-{os.getpid()}"
    env = _environment(tmp_path, [])
    result = _run(env, f"(setsid sleep 300 &) ; bash -c 'exec -a {marker} sleep 300'", timeout_sec=2)
    assert result.return_code == 124 and "timed out" in result.stderr
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", "a sealed command's process outlived its timeout"


def test_a_trial_s_commands_share_one_seal_and_nothing_one_leaves_reaches_the_next(tmp_path):
    """One seal serves a trial's commands (sealed_shell.py): the same namespaces each time, yet a
    process, a SysV segment or a /dev/shm file one command leaves is gone when the next starts, and
    no command holds a descriptor of the harness's (the control socket)."""
    marker = f"webbench-seal-left-{os.getpid()}"
    env = _environment(tmp_path, [])
    first, second = _run_all(env, [
        f"{SEAL_ID}; (setsid bash -c 'exec -a {marker} sleep 300' &); "
        "echo left > /dev/shm/left; ipcmk -M 4096 >/dev/null; ipcs -m | grep -c '^0x'",
        f"{SEAL_ID}; echo PROCS; ls /proc | grep '^[0-9]' | wc -l; echo SHM; ls /dev/shm; "
        f"ipcs -m | grep -c '^0x'; echo FDS; ls /proc/$$/fd; echo END"])
    assert first.return_code == 0 and second.return_code == 0, (first, second)
    _, shared_before = first.stdout.split()
    assert shared_before == "1"  # the segment was made
    assert seal_of(second) == seal_of(first)  # one seal
    after = second.stdout.split("PROCS\n")[1]
    assert int(after.split()[0]) <= 5, after  # PID 1, this shell, ls, grep, wc: the sleeper was ended
    assert after.split("SHM\n")[1].split()[0] == "0"  # no /dev/shm file, no SysV segment
    assert after.split("FDS\n")[1].split() == ["0", "1", "2", "END"]
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", "a process a command left outlived it"


def test_a_timed_out_command_ends_its_seal_and_the_next_command_gets_a_fresh_one(tmp_path):
    env = _environment(tmp_path, [])
    first, second, third = _run_all(env, [f"{SEAL_ID}; sleep 300", SEAL_ID, SEAL_ID], timeout_sec=3)
    assert first.return_code == 124 and "timed out" in first.stderr
    assert second.return_code == 0 and seal_of(second) != seal_of(first)  # a new seal, built 3 s later
    assert seal_of(third) == seal_of(second)  # which then serves on


def test_commands_run_at_once_each_get_a_seal_of_their_own_and_their_own_output_and_code(tmp_path):
    big = "x" * 100_000  # a long command (a prompt): it travels in a memfd

    async def scenario():
        env = _environment(tmp_path, [])
        await env.start(force_build=False)
        try:
            return await asyncio.gather(*(env.exec(f"{SEAL_ID}; sleep 0.$(( {i} % 3 )); echo {i}-{big}; exit {i}")
                                          for i in range(6)))
        finally:
            await env.stop(delete=True)

    results = asyncio.run(scenario())
    assert [r.return_code for r in results] == list(range(6))
    assert [r.stdout.split("\n", 1)[1] for r in results] == [f"{i}-{big}\n" for i in range(6)]
    # each in a seal of its own while the others ran: none could see, signal or outlive-kill another
    assert len({seal_of(r) for r in results}) == 6


def test_nothing_a_command_does_to_its_seal_s_dev_proc_or_pid_1_reaches_the_next(tmp_path):
    """A kept seal's own parts: `/dev` read-only (a link planted for /dev/fd or /dev/stdout would
    feed the verifier the agent's bytes), PID 1 hidden in `/proc` (its oom_score_adj is writable by
    a capability-less uid 0), and PID 1 deaf to the signals a command can send it."""
    env = _environment(tmp_path, [])
    first, second = _run_all(env, [
        f"{SEAL_ID}; echo x > /dev/note; rm -f /dev/stdout; ln -s /app/x /dev/fd/9; "
        "ls /proc/1 >/dev/null 2>&1 || echo PID1-HIDDEN; echo 1000 > /proc/1/oom_score_adj || echo OOM-REFUSED; "
        "for s in INT TERM HUP QUIT USR1 USR2 ALRM PIPE; do kill -$s 1; done; echo SIGNALLED",
        f"{SEAL_ID}; ls /dev; cat <(echo through-the-real-fd)"])
    assert first.return_code == 0 and second.return_code == 0, (first, second)
    assert "Read-only file system" in first.stderr and "PID1-HIDDEN" in first.stdout and "OOM-REFUSED" in first.stdout
    assert "SIGNALLED" in first.stdout
    assert seal_of(second) == seal_of(first)  # PID 1 lived through the signals
    assert "note" not in second.stdout.split() and "stdout" in second.stdout.split()
    assert second.stdout.rstrip().endswith("through-the-real-fd")


def test_what_the_host_shares_with_every_seal_is_out_of_a_command_s_reach(tmp_path):
    """The host's device nodes (bound into every seal: a chmod of /dev/null would reach the whole
    machine), uid 0's kernel keyring (not namespaced: a key one trial adds, another could read),
    PID 1's resource limits (lowered by a capability-less prlimit, inherited by every later
    command) and the seal's pty modes."""
    host_null = os.stat("/dev/null")
    env = _environment(tmp_path, [])
    read_key = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                "r = libc.syscall({nr}, b'user', b'webbench-probe', b'v', 1, ctypes.c_long(-4)); print('KEY', r, ctypes.get_errno())")
    import platform

    add_key = {"x86_64": 248, "aarch64": 217}[platform.machine()]
    first, second = _run_all(env, [
        # chmod to the mode it has: were the wall down, the host's node would change in nothing but ctime
        f"{SEAL_ID}; chmod 666 /dev/null; touch -c /dev/null /dev/urandom; echo x > /dev/null && echo NULL-WRITES; "
        f"chmod 000 /dev/pts/ptmx /dev/pts; python3 -c \"{read_key.format(nr=add_key)}\"; "
        "prlimit --pid 1 --fsize=1000:1000 --nproc=50:50 && echo LOWERED",
        f"{SEAL_ID}; ulimit -f; script -qc tty /dev/null"])
    # each of five fails: the chmod, two touches, and the pty chmod's two paths
    assert first.stderr.count("Read-only file system") == 5, first.stderr
    assert "NULL-WRITES" in first.stdout  # the device itself works as ever
    assert "KEY -1 1" in first.stdout  # EPERM
    after = os.stat("/dev/null")
    assert (after.st_mode, after.st_mtime_ns, after.st_ctime_ns) == (host_null.st_mode, host_null.st_mtime_ns, host_null.st_ctime_ns)
    assert "LOWERED" in first.stdout  # which spends the seal: the next command has a fresh one
    _, limit, tty = second.stdout.split()
    assert seal_of(second) != seal_of(first) and limit == "unlimited" and tty.startswith("/dev/pts/"), second


def test_a_seal_whose_pid_1_was_killed_between_commands_is_replaced(tmp_path):
    """Killed from outside (the OOM killer) while idle: the next command gets a fresh seal."""
    import signal

    async def scenario():
        env = _environment(tmp_path, [])
        await env.start(force_build=False)
        try:
            first = await env.exec(SEAL_ID)
            (shell,) = env._shells
            os.killpg(shell.proc.pid, signal.SIGKILL)
            await shell.proc.wait()
            return first, await env.exec(SEAL_ID)
        finally:
            await env.stop(delete=True)

    first, second = asyncio.run(scenario())
    assert second.return_code == 0 and seal_of(second) != seal_of(first), (first, second)


def test_a_seal_that_cannot_be_built_is_a_clear_error(tmp_path):
    env = _environment(tmp_path, [])
    env.visible_paths = [str(tmp_path / "gone")]  # vanished after the trial was configured
    result = _run(env, "echo should-not-run")
    assert result.return_code == 126 and "should-not-run" not in result.stdout
    assert "webbench seal:" in result.stderr and "gone" in result.stderr


def test_harbor_s_network_policy_for_the_agent_phase_is_what_the_seal_lets_through(tmp_path):
    """Harbor switches the agent phase's policy (the task's no-network plus the run's one host) with
    `set_network_policy`; the seal gives a command the harness's port where the policy allows it,
    nothing under no-network, and an allowlist it cannot keep (another host) is refused."""
    from harbor.models.task.config import NetworkMode, NetworkPolicy

    async def scenario():
        proxy, proxy_port = await _http_server("through-the-exit")
        env = _environment(tmp_path, [proxy_port])
        await env.start(force_build=False)
        seen = {}
        try:
            for name, policy in [
                ("public", NetworkPolicy(network_mode=NetworkMode.PUBLIC)),
                ("no-network", NetworkPolicy(network_mode=NetworkMode.NO_NETWORK)),
                ("the harness", NetworkPolicy(network_mode=NetworkMode.ALLOWLIST, allowed_hosts=["127.0.0.1"])),
            ]:
                await env.set_network_policy(policy)  # Harbor's own entry point, with its checks
                result = await env.exec(f"curl -sS -m 5 http://127.0.0.1:{proxy_port}/; echo rc=$?")
                seen[name] = result.stdout.strip().splitlines()[-1]
            with pytest.raises(ValueError, match="names example.com: on this machine"):
                await env.set_network_policy(NetworkPolicy(network_mode=NetworkMode.ALLOWLIST,
                                                           allowed_hosts=["127.0.0.1", "example.com"]))
        finally:
            await env.stop(delete=True)
            proxy.close()
        return seen

    assert asyncio.run(scenario()) == {"public": "rc=0", "no-network": "rc=7", "the harness": "rc=0"}


def test_a_seal_dies_with_the_process_that_started_it(tmp_path):
    """A harness process killed with SIGKILL (a worker the OOM killer takes, the fault tests' crashed
    worker) cannot close its seals: the kernel kills them with it, so no sealed Chromium or agent
    outlives its run."""
    import signal
    import sys
    import time

    starter = subprocess.Popen([sys.executable, "-c", (
        "import asyncio, os, sys; from pathlib import Path\n"
        "from pytest_webbench.environments.seal import Seal, start_sealed\n"
        "async def main():\n"
        f"    seal = Seal(workdir='/tmp', ports=[], rw=[({str(tmp_path)!r}, '/tmp')])\n"
        f"    proc, exits = await start_sealed(seal, 'sleep 600', {{'PATH': '/usr/bin:/bin'}}, Path({str(tmp_path)!r}))\n"
        "    print(proc.pid, flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n")], stdout=subprocess.PIPE, text=True)
    sealed = int(starter.stdout.readline())
    assert _alive(sealed)
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 10
    while _alive(sealed) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling, bounded, for the kernel's kill: no race is waited out
    alive = _alive(sealed)
    if alive:
        os.kill(sealed, signal.SIGKILL)
    assert not alive, "the seal outlived the process that started it"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a submount for the test needs root")
def test_every_submount_of_a_read_only_bind_is_read_only_in_the_seal(tmp_path):
    """A recursive bind brings the mounts below it along (in Docker, /etc/hosts, /etc/resolv.conf and
    /etc/hostname are such mounts), and remounting the top read-only leaves them writable: a folder
    bound read-only with a tmpfs mounted below it (and one below that), made for the test."""
    visible = tmp_path / "visible"
    inner, deepest = visible / "sub", visible / "sub" / "deeper dir"
    inner.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(inner)], check=True)
    try:
        deepest.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,noexec", "tmpfs", str(deepest)], check=True)
        try:
            (deepest / "host.txt").write_text("host")
            env = _environment(tmp_path, [], visible=[str(visible)])
            result = _run(env, f"for d in '{visible}' '{inner}' '{deepest}'; do echo x > \"$d/agent.txt\" && echo wrote; done; "
                               f"cat '{deepest}/host.txt'")
        finally:
            subprocess.run(["umount", str(deepest)], check=True)
    finally:
        subprocess.run(["umount", str(inner)], check=True)
    assert "wrote" not in result.stdout, result
    assert result.stdout.strip() == "host" and result.stderr.count("Read-only file system") == 3, result


@pytest.mark.skipif(not Path("/sys/fs/cgroup/pids").is_dir() or os.geteuid() != 0, reason="needs cgroup v1's pids controller")
def test_a_fork_bomb_meets_the_seal_s_process_limit_and_the_harness_runs_on(tmp_path):
    """Processes and threads of one seal count against its own limit (a pids cgroup), not the host's:
    the bomb's forks fail inside its seal, and the next command of the trial runs."""
    from pytest_webbench.environments.seal import MAX_PROCESSES

    env = _environment(tmp_path, [])
    # counted with shell builtins alone: once the limit is reached, no fork is left for `ps`
    # sh (dash) stops at the first fork refused, where bash would sleep 15 s retrying it
    bomb = "sh -c 'for i in $(seq 1 3000); do sleep 60 & done' 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo alive=$n"
    first, after = _run_all(env, [bomb, "echo still-here"], timeout_sec=120)
    assert "alive=" in first.stdout, first
    alive = int(first.stdout.split("alive=")[1].split()[0])
    assert 100 < alive <= MAX_PROCESSES, first  # the seal's limit, not 3,000 or the host's
    assert after.stdout.strip() == "still-here"
    assert env.forks_refused >= 1  # counted for the trial's flags once the seal ended
    calm = _environment(tmp_path / "calm", [])
    _run(calm, "echo fine")
    assert calm.forks_refused == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback as root: the harness maps the seal's commands to another uid")
def test_without_a_pids_cgroup_a_fork_bomb_meets_rlimit_nproc_in_the_seal_s_own_user(tmp_path, monkeypatch):
    """Where no pids cgroup can be made (cgroup v2 undelegated, a container), the seal's commands
    run as uid 0 of a user namespace of the seal's own, a plain user on the host, so RLIMIT_NPROC,
    which the kernel never enforces on the host's root, holds them; they still write their folders,
    and what the harness uploads between commands, in a folder it makes, is theirs too."""
    from pytest_webbench.environments.process_limits import LIMITED_UID
    from pytest_webbench.environments.seal import MAX_PROCESSES

    monkeypatch.setenv("WEBBENCH_PIDS_CGROUP", "0")
    env = _environment(tmp_path, [])
    given = tmp_path / "given.txt"
    given.write_text("from the harness")
    bomb = ("id -u; for d in /app /tmp /logs \"$HOME\"; do echo x > \"$d/mine\" && echo wrote; done; "
            "sh -c 'for i in $(seq 1 3000); do sleep 60 & done' 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo alive=$n")

    async def go():
        await env.start(force_build=False)
        try:
            first = await env.exec(bomb, timeout_sec=120)
            await env.upload_file(given, "/installed-agent/deep/given.txt")
            after = await env.exec("echo more >> /installed-agent/deep/given.txt && touch /installed-agent/deep/new && echo still-here")
            owner = (env.host_path("/app") / "mine").stat().st_uid
            return first, after, owner
        finally:
            await env.stop(delete=True)

    first, after, owner = asyncio.run(go())
    assert first.stdout.split()[0] == "0" and first.stdout.count("wrote") == 4, first  # uid 0 inside
    alive = int(first.stdout.split("alive=")[1].split()[0])
    assert 100 < alive <= MAX_PROCESSES, first  # the limit, not 3,000
    assert after.stdout.strip() == "still-here", after
    assert owner == LIMITED_UID  # a plain user on the host, never its root


def test_what_is_given_to_a_seal_s_user_is_chowned_without_following_a_link(tmp_path, monkeypatch):
    """The agent names what is below its folders: a link it plants, to a host file or as the folder
    itself, is chowned as a link, and what it points at keeps its owner."""
    from pytest_webbench.environments import process_limits

    monkeypatch.setattr(process_limits, "limited_uid", lambda: 4242)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host")
    given = tmp_path / "given"
    (given / "sub").mkdir(parents=True)
    (given / "sub" / "file").write_text("x")
    (given / "link-to-secret").symlink_to(outside / "secret")
    (given / "link-to-folder").symlink_to(outside)
    (tmp_path / "top-link").symlink_to(outside)
    process_limits.own_below(tmp_path, "given")
    process_limits.own_below(tmp_path, "top-link")
    process_limits.own_below(tmp_path, "top-link/secret", tree=False)  # a link on the way: not gone through
    process_limits.own_below(tmp_path, "given/link-to-folder/secret")
    assert {p.lstat().st_uid for p in [given, *given.rglob("*")]} == {4242}
    assert {p.stat().st_uid for p in [outside, *outside.iterdir()]} == {os.geteuid()}


def test_a_command_s_open_files_are_capped(tmp_path):
    from pytest_webbench.environments.seal import MAX_OPEN_FILES

    env = _environment(tmp_path, [])
    result = _run(env, "ulimit -n; ulimit -Hn; ulimit -Hn 1000000 2>/dev/null && echo raised")
    soft, hard = (int(v) for v in result.stdout.split()[:2])
    assert soft <= MAX_OPEN_FILES and hard <= MAX_OPEN_FILES and "raised" not in result.stdout, result


def test_a_seal_s_etc_holds_what_the_tools_need_and_none_of_the_host_s_secrets(tmp_path):
    """The seal's uid 0 could read the host's /etc/shadow through a bind of the whole /etc: now only
    an allowlist of /etc is there, read-only."""
    env = _environment(tmp_path, [])
    result = _run(env, "for f in shadow gshadow ssl/private npmrc pip.conf gitconfig ssh environment profile.d machine-id; do "
                       "[ -e /etc/$f ] && echo PRESENT-$f; done; getent hosts localhost; id -un; "
                       "python3 -c 'import ssl; print(ssl.get_default_verify_paths().capath)'; "
                       "touch /etc/x 2>&1 | grep -c 'Read-only'; ls /etc | wc -l")
    assert "PRESENT" not in result.stdout, result
    lines = result.stdout.split()
    assert "localhost" in lines and "root" in lines and lines[-2] == "1", result  # names resolve, /etc read-only
    assert int(lines[-1]) < 60, result  # an allowlist, not the host's 139 entries


@pytest.mark.seal
def test_the_agent_s_run_ends_at_its_submission_and_no_command_of_its_runs_after(tmp_path):
    """ClawBench ends a run at its first intercepted submission (harbor_run.py wires the browser's
    interceptor to end_at_submission): the command under way ends at once, its seal with it, it
    meets SubmissionIntercepted, and so does any later command; a verifier's commands are not the agent's."""
    from pytest_webbench.environments.host import SubmissionIntercepted

    env = _environment(tmp_path, [])

    async def go():
        await env.start(force_build=False)
        try:
            running = asyncio.ensure_future(env.exec("sleep 60; echo never"))
            await asyncio.sleep(0.5)  # under way (the submission comes while the CLI runs)
            started = asyncio.get_running_loop().time()
            env.end_at_submission()
            with pytest.raises(SubmissionIntercepted):
                await running
            ended_in = asyncio.get_running_loop().time() - started
            with pytest.raises(SubmissionIntercepted):
                await env.exec("echo after")
            env.verifying = True
            verified = await env.exec("echo verifier")
            return ended_in, verified
        finally:
            await env.stop(delete=True)

    ended_in, verified = asyncio.run(go())
    assert ended_in < 10 and verified.stdout.strip() == "verifier"


def test_a_seal_whose_cgroup_cannot_be_made_is_refused_not_run_without_a_limit(tmp_path, monkeypatch):
    """Found by a hostile review: where the pids hierarchy takes seals but one seal's cgroup could not
    be made, that seal ran as the host's root with no process limit at all. It is refused instead."""
    import uuid

    from pytest_webbench.environments import process_limits

    monkeypatch.setattr(process_limits, "PIDS_CGROUP_V1", str(tmp_path))
    fixed = uuid.UUID(int=7)
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    (tmp_path / f"webbench-{os.getpid()}").mkdir()
    (tmp_path / f"webbench-{os.getpid()}" / fixed.hex[:16]).write_text("in the way")
    with pytest.raises(OSError, match="does not start without its process limit"):
        process_limits.new_cgroup()
    assert process_limits.limited_uid() is None  # a hierarchy is there: the fallback is not what holds seals here
