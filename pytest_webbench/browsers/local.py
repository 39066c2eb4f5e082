"""The local backend: Kernel's browser operations on Debian's Chromium, on this machine.

Each session is its own Chromium in walls of its own, with the agent's code runner beside it in
others (`pod.py`). One Node process per pytest worker (`driver.js`) holds the harness's connection
to each session's Chromium; agents' Playwright code runs as JavaScript, as Kernel runs it, in the
session's runner. Both use the Node runtime and playwright-core that Playwright for Python ships,
so nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import base64
import functools
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..environments.seal import can_seal
from .base import TRACE_FILE, BackendError
from .interception import Interception
from .node_driver import NodeDriver
from .pod import BrowserPod, chromium_path
from .site_door import guarded_relay
from .trace_zip import rewrite_trace


class LocalBackend:
    """Talks to the Node driver (node_driver.py) and to each session's pod."""

    name = "local"
    billed = False

    def __init__(self) -> None:
        self.pods: dict[str, BrowserPod] = {}
        self.driver = NodeDriver()
        # The next session's pod, started while this one's agent runs: (its site ports, its start).
        self._ahead: tuple[list[int], asyncio.Task[BrowserPod]] | None = None

    async def call(self, op: str, timeout: float = 120, **args: Any) -> Any:
        return await self.driver.call(op, timeout, **args)

    async def create_session(self, session_id: str, page_api_only: bool = False, trace: bool = False,
                             site_urls: list[str] = (), write_task: bool = False) -> dict[str, Any]:
        """The session's own Chromium, whose only ways out are the ports of `site_urls`: the one made
        ready for these ports (`make_ready`) if there is one, else one started now."""
        if session_id in self.pods:
            raise BackendError(f"browser session {session_id} already exists")
        ports = _ports(site_urls)
        pod = await self._take_ahead(ports)
        if session_id in self.pods:  # made while it waited for the pod
            if pod is not None:
                await pod.close()
            raise BackendError(f"browser session {session_id} already exists")
        if pod is None:
            pod = BrowserPod(session_id, ports, chromium_path(), page_api_only)
        pod.session_id, pod.page_api_only = session_id, page_api_only
        pod.site_hosts = _hosts(site_urls)
        self.pods[session_id] = pod
        try:
            endpoint = await pod.start()
            await self.call("open", session=session_id, cdp_url=endpoint, trace=trace)
            pod.prestart_runner()  # after the harness's connection: that one is made before anything of the agent's
        except BaseException:
            self.pods.pop(session_id, None)
            await pod.close()
            raise
        return {"session_id": session_id, "backend": self.name, "sealed": pod.sealed}

    async def make_ready(self, site_urls: list[str]) -> None:
        """Starts the next session's Chromium and code runner now, in seals of their own, while the
        trial at hand runs: the next trial then does not wait half a second or more for them. Nothing
        reaches them until that session takes them (no door is open, the runner has no session),
        and a pod made ahead serves one session only. Sealed pods only: an unsealed Chromium's
        port would be open on this host while another trial's agent runs. Whatever fails here is
        the next trial's to meet, when it starts its own: never the trial at hand's."""
        try:
            ports, chromium = _ports(site_urls), chromium_path()
        except (BackendError, ValueError):
            return
        if self._ahead is not None:
            if self._ahead[0] == ports and not _lost(self._ahead[1]):
                return
            await self._drop_ahead()
        if can_seal():
            pod = BrowserPod("ahead", ports, chromium, page_api_only=False, sealed=True)
            self._ahead = (ports, asyncio.ensure_future(_started_ahead(pod)))

    async def _take_ahead(self, ports: list[int]) -> BrowserPod | None:
        if self._ahead is None or self._ahead[0] != ports:
            return None
        task = self._ahead[1]
        self._ahead = None
        pod = await _when_started(task)
        if pod is not None and pod.alive():
            return pod
        if pod is not None:
            await pod.close()
        return None  # the session starts its own, and fails on its own if it must

    async def _drop_ahead(self) -> None:
        if self._ahead is not None:
            task = self._ahead[1]
            self._ahead = None
            if (pod := await _when_started(task)) is not None:
                await pod.close()

    def _pod(self, session_id: str) -> BrowserPod:
        try:
            return self.pods[session_id]
        except KeyError:
            raise BackendError(f"unknown browser session {session_id!r}") from None

    async def delete_session(self, session_id: str) -> None:
        pod = self.pods.pop(session_id, None)
        try:
            await self.call("close", session=session_id)
        finally:
            if pod is not None:
                await pod.close()

    async def execute_playwright(self, session_id: str, code: str, timeout_sec: float = 60) -> dict:
        return await self._pod(session_id).call_runner("exec", timeout_sec + 30, code=code, timeout_ms=int(timeout_sec * 1000))

    async def repl(self, session_id: str, code: str, reset: bool = False, timeout_sec: float = 60) -> dict:
        return await self._pod(session_id).call_runner(
            "repl", timeout_sec + 30, code=code, reset=reset, timeout_ms=int(timeout_sec * 1000))

    async def end_agent_code(self, session_id: str) -> None:
        if (pod := self.pods.get(session_id)) is not None:
            if pod.interception is not None:
                pod.interception.end_agent()
            await pod.end_agent_code()

    async def site_connections(self, session_id: str) -> dict[int, int] | None:
        pod = self.pods.get(session_id)
        return pod.site_connections() if pod is not None else None

    async def goto(self, session_id: str, url: str) -> str:
        return (await self.call("goto", session=session_id, url=url, timeout=60))["url"]

    async def evaluate(self, session_id: str, script: str) -> Any:
        return (await self.call("evaluate", session=session_id, script=script, timeout=60))["value"]

    async def computer_action(self, session_id: str, actions: list[dict]) -> dict:
        return await self.call("computer", session=session_id, actions=actions)

    async def webmcp_list(self, session_id: str, exclude_custom: bool = False) -> dict:
        return await self.call("webmcp_list", session=session_id, exclude_custom=exclude_custom)

    async def webmcp_invoke(self, session_id: str, tool_ref: str, input: dict, timeout_sec: float = 60) -> dict:
        return await self.call(
            "webmcp_invoke", session=session_id, tool_ref=tool_ref, input=input,
            timeout_ms=int(timeout_sec * 1000), timeout=timeout_sec + 30,
        )

    async def add_custom_tools(
        self, session_id: str, namespace: str, source: str, force_overwrite_namespace: bool = False
    ) -> dict:
        added = await self.call(
            "add_custom", session=session_id, namespace=namespace, source=source,
            force_overwrite_namespace=force_overwrite_namespace,
        )
        listed = await self.call("list_custom", session=session_id)
        await self._pod(session_id).set_injected(
            {d["tool"]["name"]: {"id": d["id"], "namespace": d["namespace"]} for d in listed["tools"]})
        return added

    async def list_custom_tools(self, session_id: str) -> dict:
        return await self.call("list_custom", session=session_id)

    async def save_trace(self, session_id: str, folder: Path) -> dict[str, Any]:
        """Playwright's trace of the session (screenshots, DOM snapshots, every action), for
        `playwright show-trace`; tracing stops here, before the harness reads the page."""
        path = folder / TRACE_FILE
        folder.mkdir(parents=True, exist_ok=True)
        saved = await self.call("trace_save", session=session_id, path=str(path), timeout=120)
        cut = saved.get("cut_bytes")
        said = [f"the browser trace stopped recording at {cut // (1024 * 1024)} MB on this host, past its bound "
                f"(driver.js MAX_ARTIFACT_BYTES)"] if cut else []
        if not saved.get("saved"):
            return {"bounded": said[0]} if said else {}
        rewritten = await asyncio.to_thread(rewrite_trace, path)
        said += [rewritten.flag] if rewritten.flag else []
        return {"file": TRACE_FILE, **({"bounded": "; ".join(said)} if said else {})}

    async def screenshot(self, session_id: str) -> bytes:
        return base64.b64decode((await self.call("screenshot", session=session_id))["image"])

    async def read_page(self, session_id: str, url: str, script: str) -> Any:
        return (await self.check_page(session_id, url, script))["value"]

    async def check_page(self, session_id: str, url: str, script: str) -> dict:
        return await self.call("read_page", session=session_id, url=url, script=script)

    async def intercept_requests(self, session_id: str, check: dict, served: dict[str, str] | None = None) -> None:
        """The browser's side (every target, on the harness's connection) and, sealed, the site's
        door (each request read where the harness forwards the site's ports): one matcher."""
        pod = self._pod(session_id)
        if pod.interception is not None:
            raise BackendError(f"browser session {session_id} intercepts already")
        interception = Interception(session_id, check, pod.site_hosts, self.call)
        await interception.start(served)
        pod.interception = interception
        if pod.exits is not None:
            if pod.exits.opened:  # a connection made before the door would go unread: refused, not weakened
                raise BackendError(f"browser session {session_id} reached its sites before interception began")
            pod.exits.guard = functools.partial(guarded_relay, interception)

    async def give_files(self, session_id: str, folder: Path) -> list[str]:
        """The task's given files, for the agent's browser code to upload (a resume): see BrowserPod.give_files."""
        return self._pod(session_id).give_files(folder)

    def on_submission(self, session_id: str, callback) -> None:
        if (interception := self._pod(session_id).interception) is None:
            raise BackendError(f"browser {session_id}: no interceptor was attached", code="unsupported")
        interception.on_match = callback

    async def intercepted_requests(self, session_id: str) -> dict:
        pod = self._pod(session_id)
        if pod.interception is None:
            raise BackendError(f"browser session {session_id}: no interceptor was attached", code="unsupported")
        seen = await self.call("intercepted", session=session_id)
        return pod.interception.account(seen["requests"], seen.get("workers"))

    async def session_lost(self, session_id: str) -> str | None:
        pod = self.pods.get(session_id)
        if pod is not None and not pod.alive():
            return "the session's Chromium exited during the trial"
        try:
            status = await self.call("status", session=session_id, timeout=30)
        except BackendError as exc:
            return f"the browser driver failed: {exc}"
        if status["crashed"]:
            return "the session's Chromium exited during the trial"
        return None if status["open"] else "the session was closed during the trial"

    async def delete_leftovers(self, prefix: str) -> dict[str, str]:
        return {}  # every context dies with this process's driver: nothing is billed or left behind

    async def current_url(self, session_id: str) -> str:
        return (await self.call("current_url", session=session_id))["url"]

    async def close(self) -> None:
        for pod in list(self.pods.values()):  # the sessions' first: a pod still starting may take its time
            await pod.close()
        self.pods.clear()
        await self._drop_ahead()
        await self.driver.close()


def _hosts(site_urls: list[str]) -> dict[int, str]:
    """Each site port's host name, as the trial's URLs give it (the site door's name for a port)."""
    return {parts.port: (parts.hostname or "").lower() for url in site_urls if (parts := urlsplit(url)).port}


def _ports(site_urls: list[str]) -> list[int]:
    return sorted({port for url in site_urls if (port := urlsplit(url).port)})


def _lost(task: asyncio.Task[BrowserPod]) -> bool:
    """A pod made ahead that failed to start, or whose Chromium has exited since."""
    return task.done() and (task.cancelled() or task.exception() is not None or not task.result().alive())


async def _when_started(task: asyncio.Task[BrowserPod]) -> BrowserPod | None:
    """The pod once started (None if it failed). Called off while it waits, the caller goes and
    the pod is closed once started: a pod made ahead is never left with no one to close it."""
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():  # the start itself was called off: nothing to close
            return None
        task.add_done_callback(_close_started)
        raise
    except Exception:  # noqa: BLE001 - a pod that failed to start closed itself (_started_ahead)
        return None


_closing: set[asyncio.Task] = set()  # closes under way, held so they run to the end


def _close_started(task: asyncio.Task[BrowserPod]) -> None:
    if not task.cancelled() and task.exception() is None:
        closing = asyncio.ensure_future(task.result().close())
        _closing.add(closing)
        closing.add_done_callback(_closing.discard)


async def _started_ahead(pod: BrowserPod) -> BrowserPod:
    try:
        await pod.launch()
        await pod.spawn_runner()
    except BaseException:
        await pod.close()
        raise
    return pod
