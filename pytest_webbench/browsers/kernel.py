"""Kernel's cloud browsers, through the `kernel` SDK: the harness's side of `--browser kernel`.

Agents reach a Kernel browser through Kernel's hosted MCP server (the proxy's upstream); the
harness itself only opens and deletes browsers, registers the treatment's tool batch, reads the
page for grading and takes the final screenshot, which is what this backend does. For a write task
it also attaches its own CDP connection to the browser (Kernel's `cdp_ws_url`, through the same
Node driver the local backend uses), where it blocks and keeps the task's submission: a connection
the agent's code, run by Kernel's server, never holds. Browsers are
created stealth, one per trial, and named with the trial's session id, so every Kernel call and
every agent call can use the name ("Browser session ID or name").

Retries: the SDK's own (connection errors, 408/409/429/5xx) apply to idempotent harness calls,
but never to a WebMCP invoke, whose HTTP 504 `outcome_unknown` means the tool may have run.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

from .base import BROWSER_POLICY, BackendError

DEFAULT_MCP_URL = "https://mcp.onkernel.com/mcp"
SOCKET_GUARD = Path(__file__).parent / "socket_guard"  # the extension a write task's browser is made with
# The local seal's policy but its one allowance: that hidden WebUI page can be opened at any path, and
# there, with the page's CSP turned off over CDP, a socket is out of the guard's reach (a review found).
KERNEL_POLICY = {name: value for name, value in BROWSER_POLICY.items() if name != "URLAllowlist"}
GIVEN_IN_VM = "/app/my-info"  # the agent's own my-info path (design/arms.py GIVEN_PATH), in the browser's VM


def socket_guard_zip() -> bytes:
    """The socket guard (socket_guard/: a declarativeNetRequest rule blocking every WebSocket and
    WebTransport of pages, frames and dedicated workers, and a page script taking SharedWorker away)
    as the zip Kernel's upload takes; the same bytes for the same files, so its name can be its hash."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in sorted(SOCKET_GUARD.iterdir()):
            if entry.is_file():
                info = zipfile.ZipInfo(entry.name, date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
                archive.writestr(info, entry.read_bytes())
    return buffer.getvalue()


def page_check_code(url: str, script: str) -> str:
    """The Playwright code (JavaScript, run by Kernel's runtime) that opens `url` in a new tab of the
    trial's context, runs the task's page script there and returns its value, the URL it ended on
    and the page's HTML; the agent's own tab is left where the agent left it. Past any service
    worker, as the local driver's check goes: one the agent registered could answer for the site."""
    body = "(async () => {\n" + script + "\n})()"
    return ("const p = await context.newPage();\ntry {\n  const cdp = await context.newCDPSession(p);\n"
            "  await cdp.send('Network.enable');\n  await cdp.send('Network.setBypassServiceWorker', { bypass: true });\n"
            f"  await p.goto({json.dumps(url)}, {{ waitUntil: 'load' }});\n"
            f"  const value = await p.evaluate({json.dumps(body)});\n"
            "  return { value, url: p.url(), html: await p.content() };\n"
            "} finally { await p.close(); }")


class KernelBackend:
    name = "kernel"
    billed = True  # a browser left running costs money: a failed delete is recorded and swept

    def __init__(self, api_key: str | None = None, base_url: str | None = None, headless: bool = True):
        from kernel import AsyncKernel

        api_key = api_key or os.environ.get("KERNEL_API_KEY")
        if not api_key:
            raise BackendError("KERNEL_API_KEY is not set", code="missing_key")
        self._client = AsyncKernel(api_key=api_key, base_url=base_url or os.environ.get("KERNEL_BASE_URL") or None)
        # For WebMCP invokes: after a 504 outcome_unknown the tool may have run, so never retried.
        self._no_retry = self._client.with_options(max_retries=0)
        self.headless = headless
        self.session_ids: dict[str, str] = {}  # our name -> Kernel's session id
        self.cdp_urls: dict[str, str] = {}  # our name -> the browser's CDP endpoint, for the harness's own connection
        self._driver = None  # the Node driver, started for the first write task only
        self._attached: dict[str, Any] = {}  # session -> its Interception (browsers/interception.py)
        self.traces: dict[str, dict[str, Any]] = {}  # our name -> live view URL, replay id and view URL
        self._guard_name: str | None = None  # the socket guard's name in Kernel, once uploaded

    async def _call(self, what: str, coro) -> Any:
        import kernel

        try:
            return await coro
        except kernel.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {"message": str(exc.body)}
            code = body.get("code") if isinstance(body, dict) else None
            raise BackendError(f"Kernel {what}: HTTP {exc.status_code}: {json.dumps(body)[:500]}",
                               code=code or f"http_{exc.status_code}", body=body) from None
        except kernel.APIConnectionError as exc:
            raise BackendError(f"Kernel {what}: cannot reach the API: {exc}", code="unreachable") from None

    async def check_access(self) -> None:
        """One cheap authenticated call, so a missing or bad key or no network is one clear error
        before any trial starts."""
        await self._call("access check", self._client.browsers.list(limit=1))

    async def create_session(self, session_id: str, page_api_only: bool = False, trace: bool = False,
                             site_urls: list[str] = (), write_task: bool = False) -> dict[str, Any]:
        # Kernel's hosted server runs the code as it is: there the proxy's static rule is the ban.
        # A write task's browser is made with the socket guard: no door here reads a WebSocket's frames.
        guard = {"extensions": [{"name": await self._socket_guard()}]} if write_task else {}
        # The local backend's managed policy too: a chrome:// page, out of the guard's reach, opens no socket.
        created = await self._call("browser create", self._client.browsers.create(
            name=session_id, stealth=True, headless=self.headless, chrome_policy=KERNEL_POLICY, **guard))
        self.session_ids[session_id] = created.session_id
        if getattr(created, "cdp_ws_url", None):
            self.cdp_urls[session_id] = created.cdp_ws_url
        self.traces[session_id] = {"live_view_url": getattr(created, "browser_live_view_url", None)}
        if trace:  # Kernel's replay (a video of the session) is its trace; a failed start costs the trial nothing
            try:
                replay = await self._call("replay start", self._client.browsers.replays.start(created.session_id))
                self.traces[session_id].update(replay_id=replay.replay_id, replay_url=replay.replay_view_url)
            except BackendError as exc:
                self.traces[session_id]["error"] = str(exc)
        return {"session_id": session_id, "kernel_session_id": created.session_id, "backend": self.name}

    async def _socket_guard(self) -> str:
        """The socket guard's name in Kernel, uploaded once and named by its archive's hash; one of
        that name already there (another worker's upload, an earlier run's) is used only where
        Kernel's checksum of it is this archive's."""
        if self._guard_name is None:
            archive = socket_guard_zip()
            digest = hashlib.sha256(archive).hexdigest()
            name = "webbench-socket-guard-" + digest[:16]
            if (checksum := await self._extension_checksum(name)) is None:
                try:
                    await self._call("extension upload", self._client.extensions.upload(
                        file=("socket_guard.zip", archive, "application/zip"), name=name))
                except BackendError:  # another worker's upload of the same name, or none: asked again below
                    if await self._extension_checksum(name) is None:
                        raise
                checksum = await self._extension_checksum(name)
            if checksum != digest:
                raise BackendError(f"Kernel extension {name}: its checksum is {checksum!r}, not the socket guard's "
                                   f"{digest}: a write task's browser cannot be made with it", code="guard_mismatch")
            self._guard_name = name
        return self._guard_name

    async def _extension_checksum(self, name: str) -> str | None:
        """An uploaded extension's archive checksum ("" where Kernel gives none); None if there is none of that name."""
        try:
            found = await self._call("extension get", self._client.extensions.get(name))
        except BackendError as exc:
            if exc.code in ("not_found", "http_404"):
                return None
            raise
        return getattr(found, "checksum", None) or ""

    async def save_trace(self, session_id: str, folder: Path) -> dict[str, Any]:
        """Stops the session's replay; the record keeps its view URL and the live view's."""
        trace = dict(self.traces.get(session_id) or {})
        if (replay_id := trace.pop("replay_id", None)) is not None:
            try:
                await self._call("replay stop", self._client.browsers.replays.stop(
                    replay_id, id_or_name=self.session_ids.get(session_id, session_id)))
            except BackendError as exc:
                trace["error"] = str(exc)
        return trace

    async def give_files(self, session_id: str, folder: Path) -> list[str]:
        """The task's given files, into the browser's VM at the agent's own my-info path (Kernel's
        Playwright code runs in that VM, so `setInputFiles` finds them there), through Kernel's
        file API; regular files only, no link followed, read-only (0444)."""
        kernel_id = self.session_ids.get(session_id, session_id)
        given = []
        await self._call("fs create_directory", self._client.browsers.fs.create_directory(
            kernel_id, path=GIVEN_IN_VM, mode="755"))
        for entry in sorted(folder.iterdir()):
            if entry.is_file() and not entry.is_symlink():
                try:
                    write = self._client.browsers.fs.write_file(
                        kernel_id, entry.read_bytes(), path=f"{GIVEN_IN_VM}/{entry.name}", mode="444")
                    await self._call("fs write_file", write)
                except (UnicodeError, OSError) as exc:  # a name no URL can carry, a file gone: the harness's side
                    raise BackendError(f"Kernel fs write_file {entry.name!r}: {type(exc).__name__}: {exc}"[:500]) from None
                given.append(entry.name)
        return given

    async def make_ready(self, site_urls: list[str]) -> None:
        """Nothing ahead: a Kernel browser is billed from its creation, and one made before its
        trial would bill for the wait (and stand unnamed by any trial if the run stopped)."""

    async def delete_session(self, session_id: str) -> None:
        """Deletes the browser (a billed one keeps running otherwise): the SDK retries transient
        failures, and this tries once more after them; one already gone counts as deleted."""
        if (interception := self._attached.pop(session_id, None)) is not None:  # the harness's own connection goes first
            await interception.stop()
            try:
                await self._driver.call("close", session=session_id, timeout=30)
            except BackendError:
                pass  # the browser is deleted next either way
        self.cdp_urls.pop(session_id, None)
        for attempt in (1, 2):
            try:
                await self._call("browser delete", self._client.browsers.delete_by_id(session_id))
                break
            except BackendError as exc:
                if exc.code in ("not_found", "http_404"):
                    break
                if attempt == 2:
                    raise
        self.session_ids.pop(session_id, None)

    async def delete_leftovers(self, prefix: str) -> dict[str, str]:
        import kernel

        left: dict[str, str] = {}
        names = []
        try:
            async for browser in self._client.browsers.list(query=prefix, status="active", limit=100):
                name = getattr(browser, "name", None) or ""
                if name.startswith(prefix) and getattr(browser, "deleted_at", None) is None:
                    names.append(name)
        except (kernel.APIStatusError, kernel.APIConnectionError) as exc:
            raise BackendError(f"Kernel browser list: could not list the run's browsers to delete them: {exc}") from None
        for name in names:
            try:
                await self.delete_session(name)
            except BackendError as exc:
                left[name] = str(exc)
        return left

    async def execute_playwright(self, session_id: str, code: str, timeout_sec: float = 60) -> dict:
        out = await self._call("playwright execute", self._client.browsers.playwright.execute(
            session_id, code=code, timeout_sec=int(timeout_sec)))
        return {k: getattr(out, k, None) for k in ("success", "result", "error", "stdout", "stderr")}

    async def webmcp_list(self, session_id: str, exclude_custom: bool = False) -> dict:
        out = await self._call("webmcp list", self._client.browsers.webmcp.list_tools(session_id, exclude_custom=exclude_custom))
        return out.model_dump(mode="json", warnings=False)

    async def webmcp_invoke(self, session_id: str, tool_ref: str, input: dict, timeout_sec: float = 60) -> dict:
        out = await self._call("webmcp invoke", self._no_retry.browsers.webmcp.invoke_tool(
            session_id, tool_ref=tool_ref, input=input, timeout_sec=int(timeout_sec)))
        return out.model_dump(mode="json", exclude_none=True, warnings=False)

    async def add_custom_tools(self, session_id: str, namespace: str, source: str, force_overwrite_namespace: bool = False) -> dict:
        out = await self._call("custom tools add", self._client.browsers.webmcp.custom_tools.add(
            session_id, namespace=namespace, source=source, force_overwrite_namespace=force_overwrite_namespace))
        return out.model_dump(mode="json", warnings=False)

    async def list_custom_tools(self, session_id: str) -> dict:
        out = await self._call("custom tools list", self._client.browsers.webmcp.custom_tools.list(session_id))
        return out.model_dump(mode="json", warnings=False)

    async def remove_custom_tool(self, session_id: str, tool_id: str) -> None:
        await self._call("custom tool remove", self._client.browsers.webmcp.custom_tools.remove(tool_id, id_or_name=session_id))

    async def screenshot(self, session_id: str) -> bytes:
        response = await self._call("screenshot", self._client.browsers.computer.capture_screenshot(session_id))
        return await response.read()

    async def goto(self, session_id: str, url: str) -> str:
        out = await self.execute_playwright(
            session_id, f"await page.goto({json.dumps(url)}, {{waitUntil: 'load'}}); return page.url();", timeout_sec=30)
        if not out.get("success"):
            raise BackendError(f"could not open {url}: {out.get('error')}")
        return str(out.get("result"))

    async def evaluate(self, session_id: str, script: str) -> Any:
        body = "(async () => {\n" + script + "\n})()"
        out = await self.execute_playwright(session_id, f"return await page.evaluate({json.dumps(body)});", timeout_sec=15)
        if not out.get("success"):
            raise BackendError(f"Kernel page read: {out.get('error')}", code="unreadable_page")
        return out.get("result")

    async def end_agent_code(self, session_id: str) -> None:
        # Kernel's server runs each call's code and ends it; its REPL stays Kernel's (README). What the
        # agent's pages still send is no submission from here on.
        if (interception := self._attached.get(session_id)) is not None:
            interception.end_agent()

    async def site_connections(self, session_id: str) -> dict[int, int] | None:
        return None  # Kernel's browser reaches the web from Kernel's network: nothing here sees it

    async def intercept_requests(self, session_id: str, check: dict, served: dict[str, str] | None = None) -> None:
        """Attaches the harness's own CDP connection to the browser: every request of every target
        that is not read-only waits there for the task's matcher (browsers/interception.py)."""
        from .interception import Interception
        from .node_driver import NodeDriver

        url = self.cdp_urls.get(session_id)
        if not url:
            raise BackendError(f"Kernel gave no CDP endpoint for browser {session_id}: its submission cannot be "
                               "intercepted", code="unsupported")
        self._driver = self._driver or NodeDriver()
        await self._driver.call("open", session=session_id, cdp_url=url, trace=False, timeout=60)
        interception = Interception(session_id, check, {}, self._driver.call)
        await interception.start(served, guard_sockets=True)
        self._attached[session_id] = interception

    def on_submission(self, session_id: str, callback) -> None:
        if (interception := self._attached.get(session_id)) is None:
            raise BackendError(f"browser {session_id}: no interceptor was attached", code="unsupported")
        interception.on_match = callback

    async def intercepted_requests(self, session_id: str) -> dict:
        if session_id not in self._attached:
            raise BackendError(f"browser {session_id}: no interceptor was attached", code="unsupported")
        seen = await self._driver.call("intercepted", session=session_id)
        return self._attached[session_id].account(seen["requests"], seen.get("workers"))

    async def read_page(self, session_id: str, url: str, script: str) -> Any:
        return (await self.check_page(session_id, url, script))["value"]

    async def check_page(self, session_id: str, url: str, script: str) -> dict:
        out = await self.execute_playwright(session_id, page_check_code(url, script), timeout_sec=60)
        if not out.get("success"):
            raise BackendError(f"Kernel page check at {url}: {out.get('error')}", code="unreadable_page")
        result = out.get("result")
        if not isinstance(result, dict) or "value" not in result:
            raise BackendError(f"Kernel page check at {url}: the check returned {str(result)[:200]}", code="unreadable_page")
        return result

    async def session_lost(self, session_id: str) -> str | None:
        try:
            browser = await self._call("browser status", self._client.browsers.retrieve(session_id, include_deleted=True))
        except BackendError as exc:
            if exc.code in ("not_found", "http_404"):
                return "Kernel has no such browser session any more"
            return None  # the API did not answer: no evidence the browser is gone
        if browser.deleted_at is not None:
            return f"Kernel ended the browser session at {browser.deleted_at} (timeout_seconds {browser.timeout_seconds})"
        if session_id in self._attached and self._driver is not None:  # a write task's: its socket guard held throughout?
            try:
                guard = await self._driver.call("guard", session=session_id, timeout=30)
            except BackendError as exc:
                return f"the harness's connection to the browser failed: {exc}"
            if guard.get("lost"):
                return f"the harness's socket guard on the browser ended mid-trial ({guard['lost']}): its walls did not hold"
        return None

    async def computer_action(self, session_id: str, actions: list[dict]) -> dict:
        raise BackendError("computer actions go through Kernel's hosted MCP server, not the harness", code="unsupported")

    async def repl(self, session_id: str, code: str, reset: bool = False, timeout_sec: float = 60) -> dict:
        raise BackendError("the browser REPL goes through Kernel's hosted MCP server, not the harness", code="unsupported")

    async def close(self) -> None:
        if self._driver is not None:
            await self._driver.close()
        await self._client.close()


async def sweep_run_browsers(experiment_dir, experiment_id: str) -> dict[str, str]:
    """At the end of a run: deletes every browser of the run still alive (a delete that failed, a
    worker that died mid-trial), and leaves on disk only those that could not be deleted, for the
    report. Returns them."""
    from ..results.run_notes import clear_undeleted_browser, read_undeleted_browsers, record_undeleted_browser

    backend = KernelBackend()
    try:
        left = await backend.delete_leftovers(f"{experiment_id}-")
    finally:
        await backend.close()
    for name in read_undeleted_browsers(experiment_dir):
        if name not in left:
            clear_undeleted_browser(experiment_dir, name)  # deleted now, or gone already
    for name, why in left.items():
        record_undeleted_browser(experiment_dir, name, why)
    return left
