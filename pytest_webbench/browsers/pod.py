"""One trial's browser on this machine, in walls of its own.

Each trial gets its own Chromium, started in a seal (environments/seal.py): its own network, mount,
PID, UTS and IPC namespaces; a filesystem of the system read-only and a private profile, so the
checkout, the suite, the results and the harness's home are absent; local schemes (`file:`,
`chrome:`, ...) refused by a managed policy; and as its only ways out, the ports of the task's
sites, forwarded by the harness, which counts every connection (the harness's own account of
what the trial's browser reached).

The agent's code (`execute_playwright_code`, the REPL) runs in a second seal beside it, the code
runner (sealed/runner.js): an empty environment, nothing of the harness, and as its only way out
the Chromium's debugging port, reached through the Chromium seal's door. Its process may start
ahead (it then loads Playwright and waits); it connects once told its session, after the harness's
connection, and ends when the agent stops, before the harness reads the page. Node's `vm` in the runner
only scopes the code; the seal is the wall.

The harness's own connection (the driver's, for setup, the tool batch, WebMCP, the trace and the
page check) goes through the same door, from a loopback port that accepts one connection before
the agent starts: the browser it talks to is the one it started, and a browser the agent killed
is a lost browser (an errored trial), never one the agent stood up in its place.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from ..environments.seal import Exits, Seal, can_seal, relay, start_sealed
from .base import BROWSER_POLICY, BackendError
from .code_runner import Runner
from .interception import Interception

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CDP_PORT = 9222  # inside the Chromium's seal
GIVEN_IN_RUNNER = "/app/my-info"  # the agent's own my-info path (design/arms.py GIVEN_PATH), in its code's seal
SEALED_JS = Path(__file__).with_name("sealed")
RUNNER_JS = "runner.js"
START_TIMEOUT_SEC = 30
# The seals' writable /tmp: memory of their own, capped, gone with the namespace. Chromium's profile
# (its caches and the pages' storage) and the agent code's scratch fill no disk of the host's, and
# leave nothing to remove.
CHROMIUM_TMP_BYTES = 512 * 1024 * 1024
RUNNER_TMP_BYTES = 64 * 1024 * 1024
# The switches Playwright 1.65 launches Chromium with (its chromiumSwitches() and headless ones;
# tests/test_browser_walls.py holds them to Playwright's own launch), plus this backend's own.
PLAYWRIGHT_SWITCHES = [
    "--disable-field-trial-config", "--disable-background-networking", "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows", "--disable-back-forward-cache", "--disable-breakpad",
    "--disable-component-extensions-with-background-pages", "--disable-component-update", "--no-default-browser-check",
    "--disable-default-apps", "--disable-dev-shm-usage", "--disable-edgeupdater", "--disable-extensions",
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,HttpsUpgrades,"
    "HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,ThirdPartyStoragePartitioning,"
    "AvoidCorsURLLoaderRestartOnRedirect,TcpPortRandomizationWin,OptimizationHints,NetworkTimeServiceQuerying,"
    "AimEnabled,PreconnectToSearch,msForceBrowserSignIn,msEdgeUpdateLaunchServicesPreferredVersion",
    "--allow-pre-commit-input", "--disable-hang-monitor", "--disable-ipc-flooding-protection", "--disable-popup-blocking",
    "--disable-prompt-on-repost", "--disable-renderer-backgrounding", "--disable-updater-scheduler",
    "--force-color-profile=srgb", "--metrics-recording-only", "--no-first-run", "--password-store=basic",
    "--use-mock-keychain", "--no-service-autorun", "--disable-search-engine-choice-screen",
    "--unsafely-disable-devtools-self-xss-warnings", "--enable-unsafe-swiftshader", "--edge-skip-compat-layer-relaunch",
    "--disable-stack-profiler", "--disable-infobars", "--disable-sync", "--do-not-de-elevate",
    "--headless", "--hide-scrollbars", "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4",
    "--no-sandbox",
]
# Ours: WebMCP, no GPU, no QUIC (Chromium keeps dialling blocked hosts otherwise), the viewport.
OWN_SWITCHES = ["--disable-gpu", "--disable-quic", "--window-size=1280,800",
                "--enable-features=CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies,WebMCPTesting"]
_DEVTOOLS = re.compile(rb"DevTools listening on (ws://\S+)")


def chromium_switches() -> list[str]:
    return PLAYWRIGHT_SWITCHES + OWN_SWITCHES


@cache
def chromium_etc() -> str | None:
    """A folder to stand for /etc/chromium inside the seal: Debian's own files there plus a managed
    policy refusing local schemes and downloads. None where the system has no /etc/chromium to
    cover (the sealed view alone then keeps the harness's files out of reach)."""
    if not os.path.isdir("/etc/chromium"):
        return None
    folder = Path(tempfile.mkdtemp(prefix="webbench-chromium-etc-"))
    # made once a process; every process of a run made one and left it in /tmp
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for entry in Path("/etc/chromium").iterdir():
        if entry.is_file() and not entry.is_symlink():
            shutil.copyfile(entry, folder / entry.name)
    managed = folder / "policies" / "managed"
    managed.mkdir(parents=True)
    (managed / "webbench.json").write_text(json.dumps(BROWSER_POLICY))
    for path in (folder, managed.parent, managed):
        path.chmod(0o755)
    (managed / "webbench.json").chmod(0o644)
    return str(folder)


def playwright_driver() -> tuple[Path, Path]:
    """The Node binary and playwright-core package bundled with Playwright for Python."""
    import playwright

    driver = Path(playwright.__file__).parent / "driver"
    node, package = driver / "node", driver / "package"
    if not node.exists() or not (package / "package.json").exists():
        raise BackendError(f"Playwright for Python's driver is incomplete at {driver}; reinstall playwright")
    return node, package


def chromium_path() -> str:
    path = os.environ.get("WEBBENCH_CHROMIUM") or shutil.which("chromium") or DEFAULT_CHROMIUM
    if not Path(path).exists():
        raise BackendError(
            f"no Chromium at {path}: install Debian's package (apt-get install chromium) "
            "or set WEBBENCH_CHROMIUM"
        )
    return path


def playwright_driver_dir() -> Path:
    node, _ = playwright_driver()
    return node.parent


class BrowserPod:
    """One trial's Chromium and code runner (see the module's docstring). `sealed` False (a machine
    that cannot make namespaces) runs both as plain processes: the manifest says so."""

    def __init__(self, session_id: str, site_ports: list[int], chromium: str, page_api_only: bool,
                 sealed: bool | None = None) -> None:
        self.session_id, self.site_ports, self.chromium = session_id, sorted(set(site_ports)), chromium
        self.page_api_only = page_api_only
        self.sealed = can_seal() if sealed is None else sealed
        # unsealed, the profile and the runner's home are host folders; sealed, each seal has its own tmpfs
        self.folder = None if self.sealed else Path(tempfile.mkdtemp(prefix="webbench-pod-"))
        self.proc: asyncio.subprocess.Process | None = None
        self.exits: Exits | None = None
        self._devtools = ""  # Chromium's own ws:// endpoint (inside its seal, when sealed)
        self.devtools_path = ""  # /devtools/browser/<id>
        self.direct_port: int | None = None  # unsealed: Chromium's own port on this host
        self.runner: Runner | None = None
        self._spawned: Runner | None = None  # a runner process started ahead, not yet told its session
        self.injected: dict[str, dict] = {}  # injected tool name -> {id, namespace}, for the runner's listings
        self._harness_door: asyncio.AbstractServer | None = None
        self._stderr: list[str] = []
        self._start_lock = asyncio.Lock()
        self._drain: asyncio.Task | None = None
        self.agent_ended = False
        self._prestart: asyncio.Future | None = None
        # The files the task gives its agent, for its browser code to upload (setInputFiles): filled when
        # the session is taken, read-only in the runner's seal at the agent's own my-info path.
        self.given_dir = Path(tempfile.mkdtemp(prefix="webbench-given-")) if self.sealed else None
        self.site_hosts: dict[int, str] = {}  # site port -> the host the trial names it by
        self.interception: Interception | None = None  # a write task's (browsers/interception.py)

    # -- the Chromium ------------------------------------------------------------------------
    async def launch(self) -> None:
        """Starts the Chromium, at about:blank, with no connection into it yet: for the trial at
        hand, or ahead of the next one (browsers/local.py), which is the same browser either way."""
        if self.sealed:
            ro = [(p, p) for p in ("/var/cache/fontconfig",) if os.path.isdir(p)]
            if (etc := chromium_etc()) is not None:
                ro.append((etc, "/etc/chromium"))
            seal = Seal(workdir="/tmp", ports=self.site_ports, rw=[], ro=ro, door=True,
                        tmpfs=[("/tmp", CHROMIUM_TMP_BYTES)])
            flags = [*chromium_switches(), f"--remote-debugging-port={CDP_PORT}", "--user-data-dir=/tmp/profile"]
            command = "exec " + " ".join(_quote(a) for a in [self.chromium, *flags, "about:blank"])
            self.proc, self.exits = await start_sealed(seal, command, {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, Path("/"))
        else:
            assert self.folder is not None
            profile = self.folder / "chromium"
            profile.mkdir()
            flags = [*chromium_switches(), "--remote-debugging-port=0", f"--user-data-dir={profile / 'profile'}"]
            self.proc = await asyncio.create_subprocess_exec(
                self.chromium, *flags, "about:blank", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "HOME": str(profile)}, start_new_session=True)
        self._devtools = await self._devtools_url()
        self._drain = asyncio.ensure_future(self._drain_stderr())
        self.devtools_path = "/" + self._devtools.split("/", 3)[3]

    async def start(self) -> str:
        """Starts the Chromium unless it runs already; returns the endpoint the harness's driver
        connects to, once."""
        if self.proc is None:
            await self.launch()
        return await self._open_harness_door() if self.sealed else self._devtools

    async def _devtools_url(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        try:
            async with asyncio.timeout(START_TIMEOUT_SEC):
                while line := await self.proc.stderr.readline():
                    self._stderr = (self._stderr + [line.decode(errors="replace").rstrip()[:300]])[-20:]
                    if found := _DEVTOOLS.search(line):
                        url = found.group(1).decode()
                        self.direct_port = int(url.split(":")[2].split("/")[0])
                        return url
        except TimeoutError:
            pass
        tail = "\n".join(self._stderr[-8:])
        raise BackendError(f"the trial's Chromium did not start (exit code {self.proc.returncode}): {tail}")

    async def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self._stderr = (self._stderr + [line.decode(errors="replace").rstrip()[:300]])[-20:]

    async def _open_harness_door(self) -> str:
        """A loopback port that takes the driver's one connection into the seal: closed once that
        connection is made (`harness_connected`), before the agent can run anything."""
        exits = self.exits
        assert exits is not None and exits.door is not None
        door = exits.door

        async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._close_harness_door()
            try:
                up_reader, up_writer = await door.connect(CDP_PORT)
            except (OSError, ConnectionError, asyncio.CancelledError):
                writer.close()
                return
            await relay(reader, writer, up_reader, up_writer)

        self._harness_door = await asyncio.start_server(forward, "127.0.0.1", 0)
        port = self._harness_door.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}{self.devtools_path}"

    def _close_harness_door(self) -> None:
        if self._harness_door is not None:
            self._harness_door.close()
            self._harness_door = None

    def site_connections(self) -> dict[int, int] | None:
        """Connections the trial's browser opened to each site port (None: not counted, unsealed)."""
        return dict(self.exits.opened) if self.exits is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    # -- the agent's code ----------------------------------------------------------------------
    def prestart_runner(self) -> None:
        """Starts the runner while the rest of the trial is set up (it takes about half a second
        of a trial's time otherwise, on the agent's first call): its seal is the same either way."""
        self._prestart = asyncio.ensure_future(self.call_runner("ping", START_TIMEOUT_SEC))
        self._prestart.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure shows at the first call

    async def set_injected(self, injected: dict[str, dict]) -> None:
        """The treatment's tools, by name, so the runner's WebMCP listings say which are custom."""
        self.injected = injected
        await self.call_runner("injected", START_TIMEOUT_SEC, injected=injected)

    async def call_runner(self, op: str, timeout: float, **args: Any) -> Any:
        async with self._start_lock:
            if self.agent_ended:
                raise BackendError("the agent's run has ended: its code runs no more", code="agent_ended")
            if self.runner is None or self.runner.proc.returncode is not None:
                self.runner = await self._start_runner()
        return await self.runner.call(op, timeout, **args)

    async def spawn_runner(self) -> None:
        """Starts the code runner's process ahead: it loads Playwright and waits, connected to
        nothing, until `init` names its session, which comes after the harness's connection."""
        self._spawned = await self._spawn_runner()

    async def _start_runner(self) -> Runner:
        if not self.alive():
            raise BackendError(f"browser session {self.session_id} lost its browser (Chromium exited)", code="browser_crashed")
        runner, self._spawned = self._spawned, None
        if runner is not None and runner.proc.returncode is not None:
            await runner.end()
            runner = None
        runner = runner or await self._spawn_runner()
        cdp = f"http://127.0.0.1:{CDP_PORT if self.sealed else self.direct_port}"
        try:
            await runner.call("init", START_TIMEOUT_SEC, cdp_url=cdp, session=self.session_id,
                              page_api_only=self.page_api_only, injected=self.injected)
        except BaseException:
            await runner.end()
            raise
        return runner

    async def _spawn_runner(self) -> Runner:
        driver = playwright_driver_dir()
        if self.sealed:
            assert self.exits is not None and self.exits.door is not None
            door = self.exits.door
            assert self.given_dir is not None
            self.given_dir.chmod(0o755)
            seal = Seal(workdir="/tmp", ports=[CDP_PORT], rw=[], tmpfs=[("/tmp", RUNNER_TMP_BYTES)],
                        ro=[(str(driver), "/opt/playwright"), (str(SEALED_JS), "/opt/webbench"),
                            (str(self.given_dir), GIVEN_IN_RUNNER)])
            proc, exits = await start_sealed(
                seal, f"exec /opt/playwright/node /opt/webbench/{RUNNER_JS}", {"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
                Path("/"), stdin=True, connect=door.connect)
        else:
            assert self.folder is not None
            home = self.folder / f"runner-{len(list(self.folder.glob('runner-*')))}"
            home.mkdir()
            proc = await asyncio.create_subprocess_exec(
                str(driver / "node"), str(SEALED_JS / RUNNER_JS), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True, cwd=home,
                env={"PATH": "/usr/bin:/bin", "HOME": str(home), "WEBBENCH_PLAYWRIGHT_PACKAGE": str(driver / "package")},
                limit=64 * 1024 * 1024)
            exits = None
        return Runner(proc, exits)

    async def end_agent_code(self) -> None:
        """The agent has stopped: its runner goes, and with it every connection and hook its code
        held on the browser, before the harness reads the page."""
        async with self._start_lock:
            self.agent_ended = True
            for runner in (self.runner, self._spawned):  # one started ahead and never used goes too
                if runner is not None:
                    await runner.end()
            self.runner = self._spawned = None

    async def close(self) -> None:
        if self.interception is not None:
            await self.interception.stop()
        if self._prestart is not None:
            self._prestart.cancel()
        await self.end_agent_code()
        self._close_harness_door()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()
        if self.exits is not None:
            self.exits.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self.given_dir is not None:
            shutil.rmtree(self.given_dir, ignore_errors=True)

    def give_files(self, folder: Path) -> list[str]:
        """The task's given files (regular files only, no link followed), where the agent's browser
        code finds them: GIVEN_IN_RUNNER in the runner's seal. Unsealed, the runner has no such path."""
        if self.given_dir is None:
            raise BackendError("the agent's browser code runs unsealed here: it has no my-info folder to upload from",
                               code="unsupported")
        given = []
        for entry in sorted(folder.iterdir()):
            if entry.is_file() and not entry.is_symlink():
                shutil.copyfile(entry, self.given_dir / entry.name)
                (self.given_dir / entry.name).chmod(0o644)
                given.append(entry.name)
        return given


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
