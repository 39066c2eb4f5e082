"""A write task's sockets on Kernel, where no door of the harness reads the site's traffic and CDP's
Fetch holds no WebSocket. The Kernel stand-in makes each browser as Kernel does, a real Chromium
with the uploaded extensions it was asked for; the agent, on its own connection as Kernel's server
runs its code, opens a socket to the site from every context a page has. The site's own log of
handshakes and frames is the oracle."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route, WebSocketRoute

from pytest_webbench.browsers.base import BROWSER_POLICY, BackendError
from pytest_webbench.browsers.kernel import KERNEL_POLICY, KernelBackend, socket_guard_zip
from pytest_webbench.browsers.pod import chromium_path, chromium_switches
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from kernel_api_standin import KernelApiStandin  # noqa: E402
from tcp_relay import Relay  # noqa: E402

KEY = "kernel-sentinel-key-50c7"
CHECK = {"url_pattern": r"/order$", "method": "POST", "body": None, "params": None}

# Each opens a socket to the site at /ws/<its name> and says what became of it; every one must be
# refused before the site reads a frame. WebSocketStream is tried where Chromium has it.
PROBES = {
    "page": "new Promise((res) => { const s = new WebSocket(WS + 'page'); s.onopen = () => s.send('x');"
            " s.onmessage = () => res('open'); s.onclose = () => res('closed'); })",
    "blank_iframe": "new Promise((res) => { const f = document.createElement('iframe'); document.body.appendChild(f);"
                    " const s = new f.contentWindow.WebSocket(WS + 'blank_iframe'); s.onopen = () => s.send('x');"
                    " s.onmessage = () => res('open'); s.onclose = () => res('closed'); })",
    "dedicated_worker": "new Promise((res) => { const w = new Worker(URL.createObjectURL(new Blob([WORKER('dedicated_worker')])));"
                        " w.onmessage = (m) => res(m.data); })",
    "shared_worker": "new Promise((res) => { const src = `onconnect = (c) => { const port = c.ports[0]; self.postMessage = (m) => port.postMessage(m); ${WORKER('shared_worker')} };`;"
                     " const w = new SharedWorker(URL.createObjectURL(new Blob([src]))); w.port.onmessage = (m) => res(m.data); })",
    "iframe_shared_worker": "new Promise((res) => { const f = document.createElement('iframe'); document.body.appendChild(f);"
                            " const src = `onconnect = (c) => { const port = c.ports[0]; self.postMessage = (m) => port.postMessage(m); ${WORKER('iframe_shared_worker')} };`;"
                            " const w = new f.contentWindow.SharedWorker(URL.createObjectURL(new Blob([src]))); w.port.onmessage = (m) => res(m.data); })",
    # a Storage Access handle carries a SharedWorker of its own (in a same-origin frame; a top-level document gets none)
    "storage_access_shared_worker": "new Promise((res) => { const f = document.createElement('iframe'); f.src = '/';"
                                    " f.onload = () => f.contentWindow.document.requestStorageAccess({ all: true, SharedWorker: true }).then("
                                    "(h) => { try { h.SharedWorker(URL.createObjectURL(new Blob(['']))); res('made'); } catch (e) { res('threw: ' + e.name); } },"
                                    " (e) => res('refused: ' + e.name));"
                                    " document.body.appendChild(f); })",
    # the constructor kept by an init script of a CDP client attached before the guard (Kernel's own
    # connection may be), which runs before the guard's; and by one attached after it, which does not
    "stashed_shared_worker": "new Promise((res) => { const src = `onconnect = (c) => { const port = c.ports[0]; self.postMessage = (m) => port.postMessage(m); ${WORKER('stashed_shared_worker')} };`;"
                             " const w = new window.__SharedWorker(URL.createObjectURL(new Blob([src]))); w.port.onmessage = (m) => res(m.data); })",
    "late_stashed_shared_worker": "new Promise((res) => { const w = new window.__LateSharedWorker(URL.createObjectURL(new Blob(['']))); res('made'); })",
    "service_worker": "navigator.serviceWorker.register('/sw.js').then(() => navigator.serviceWorker.ready).then((reg) =>"
                      " new Promise((res) => { navigator.serviceWorker.onmessage = (m) => res(m.data); reg.active.postMessage(WS + 'service_worker'); }))",
    "websocket_stream": "typeof WebSocketStream === 'undefined' ? 'absent' : new WebSocketStream(WS + 'websocket_stream').opened"
                        ".then(async ({ writable }) => { await writable.getWriter().write('x'); return 'open'; }, () => 'closed')",
}
# A worker's socket, reporting with postMessage; a constructor taken away throws, which is a refusal.
WORKER_JS = ("const WORKER = (name) => `try { const s = new WebSocket('${WS}' + '${name}'); s.onopen = () => s.send('x');"
             " s.onmessage = () => postMessage('open'); s.onclose = () => postMessage('closed'); }"
             " catch (e) { postMessage('threw: ' + e.message); }`;")
SERVICE_WORKER = ("self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));"
                  "self.addEventListener('message', (e) => { const reply = (m) => e.source.postMessage(m);"
                  " try { const s = new WebSocket(e.data); s.onopen = () => s.send('x'); s.onmessage = () => reply('open');"
                  " s.onclose = () => reply('closed'); } catch (err) { reply('threw: ' + err.message); } });")


def launcher(tmp_path: Path, made: list):
    """Kernel's side: a browser made with the unpacked extensions and the managed policy asked for,
    reached over CDP. The policy is where Chromium reads it, /etc/chromium/policies/managed, in a
    mount namespace of the browser's own."""
    def launch(extensions: list[Path], policy: dict) -> str:
        switches = [s for s in chromium_switches() if s != "--disable-extensions"]
        if extensions:
            joined = ",".join(map(str, extensions))
            switches += [f"--disable-extensions-except={joined}", f"--load-extension={joined}"]
        etc = tmp_path / f"etc{len(made)}"
        (etc / "policies" / "managed").mkdir(parents=True)
        (etc / "policies" / "managed" / "kernel.json").write_text(json.dumps(policy))
        mounted = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'mount --bind "$0" /etc/chromium && exec "$@"', str(etc)]
        chromium = subprocess.Popen([*mounted, chromium_path(), "--headless=new", "--remote-debugging-port=0",
                                     f"--user-data-dir={tmp_path / f'profile{len(made)}'}", *switches, "about:blank"],
                                    stderr=subprocess.PIPE, text=True)
        made.append(chromium)
        for line in chromium.stderr:
            if found := re.search(r"DevTools listening on (ws://\S+)", line):
                threading.Thread(target=chromium.stderr.read, daemon=True).start()
                return found.group(1)
        raise RuntimeError("Chromium gave no CDP endpoint")
    return launch


def socket_site(log: list):
    async def sockets(ws):
        await ws.accept()
        log.append(("handshake", ws.path_params["name"]))
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            log.append(("frame", ws.path_params["name"]))
            await ws.send_text("echo")

    async def page(request):
        return HTMLResponse("<title>site</title><form method=post action=/order><button>Order</button></form>"
                            "<a id=out href=/ target=_blank>the site again</a>")

    async def service_worker(request):
        return Response(SERVICE_WORKER, media_type="text/javascript")

    return Starlette(routes=[Route("/", page), Route("/sw.js", service_worker), WebSocketRoute("/ws/{name}", sockets)])


async def probe_all(cdp: str, site: str, names) -> dict[str, str]:
    from playwright.async_api import async_playwright

    prelude = f"const WS = {('ws' + site[4:] + '/ws/')!r}; {WORKER_JS}"
    async with async_playwright() as p:  # the agent's own connection
        browser = await p.chromium.connect_over_cdp(cdp)
        context = browser.contexts[0]
        await context.add_init_script("window.__LateSharedWorker = window.SharedWorker")
        page = context.pages[0] if context.pages else await context.new_page()
        await page.goto(site + "/")
        seen = {}
        for name in names:
            code = f"(async () => {{ {prelude} return await Promise.race([{PROBES[name]},"\
                   f" new Promise((r) => setTimeout(() => r('no answer'), 4000))]); }})()"
            try:
                seen[name] = str(await page.evaluate(code))
            except Exception as exc:  # noqa: BLE001 - a constructor taken away is a refusal too
                seen[name] = f"threw: {str(exc)[:80]}"
        try:  # an ordinary site's link to a new tab (noopener since Chromium 88): a new renderer, held at its start
            page = await context.new_page()
            await page.goto(site + "/")
            async with context.expect_page(timeout=15000) as opened:
                await page.click("#out")
            await (await opened.value).wait_for_load_state(timeout=15000)
            seen["noopener_link"] = await (await opened.value).title()
        except Exception as exc:  # noqa: BLE001
            seen["noopener_link"] = f"threw: {str(exc)[:80]}"
        try:  # a browser page (chrome://), out of any extension's reach: refused by the managed policy
            await (await context.new_page()).goto("chrome://version")
            seen["chrome_page"] = "open"
        except Exception as exc:  # noqa: BLE001
            seen["chrome_page"] = f"threw: {str(exc)[:80]}"
        try:  # a page of a context of the agent's own making
            page = await (await browser.new_context()).new_page()
            await page.goto(site + "/")
            seen["new_context"] = str(await page.evaluate(
                f"(async () => {{ {prelude} return await Promise.race([{PROBES['page'].replace('page', 'new_context')},"
                f" new Promise((r) => setTimeout(() => r('no answer'), 4000))]); }})()"))
        except Exception as exc:  # noqa: BLE001 - a page closed is a refusal too
            seen["new_context"] = f"threw: {str(exc)[:80]}"
        await browser.close()
    return seen


def unpacked_id(folder: Path) -> str:
    """Chromium's id for an extension loaded from a folder: its path's sha256, 32 hex digits as a-p."""
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:32]
    return "".join(chr(ord("a") + int(c, 16)) for c in digest)


async def open_pages(cdp: str, urls: dict[str, str]) -> dict[str, str]:
    from playwright.async_api import async_playwright

    seen = {}
    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(cdp)
        for name, url in urls.items():
            try:
                await (await browser.contexts[0].new_page()).goto(url)
                seen[name] = "open"
            except Exception as exc:  # noqa: BLE001
                seen[name] = f"threw: {str(exc)[:80]}"
        await browser.close()
    return seen


def test_a_write_task_s_browser_on_kernel_opens_no_socket_to_the_site_from_any_context(tmp_path):
    from playwright.async_api import async_playwright

    log: list = []
    made: list = []
    standin = KernelApiStandin(KEY, launch=launcher(tmp_path, made))
    loop = ServiceLoop()
    try:
        api = loop.serve(standin.app, "kernel api stand-in")
        site = loop.serve(socket_site(log), "site")
        kb = KernelBackend(api_key=KEY, base_url=api)

        async def go():
            # a read task's browser first: no guard, so the site's log shows a socket where one is made
            await kb.create_session("exp1-read-a1-control")
            async with async_playwright() as p:
                early = await p.chromium.connect_over_cdp(kb.cdp_urls["exp1-read-a1-control"])
                await early.contexts[0].add_init_script("window.__SharedWorker = window.SharedWorker")
                unguarded = await probe_all(kb.cdp_urls["exp1-read-a1-control"], site,
                                            ["page", "shared_worker", "stashed_shared_worker", "late_stashed_shared_worker",
                                             "storage_access_shared_worker"])
                await early.close()
            await kb.delete_session("exp1-read-a1-control")
            opened = list(log)
            log.clear()
            await kb.create_session("exp1-write-a1-control", write_task=True)
            async with async_playwright() as p:  # a client attached before the guard, keeping SharedWorker
                early = await p.chromium.connect_over_cdp(kb.cdp_urls["exp1-write-a1-control"])
                await early.contexts[0].add_init_script("window.__SharedWorker = window.SharedWorker")
                await kb.intercept_requests("exp1-write-a1-control", CHECK)
                guarded = await probe_all(kb.cdp_urls["exp1-write-a1-control"], site, list(PROBES))
                await early.close()
            # where an agent would switch the guard off (its page, chrome://extensions): refused by policy
            guarded.update(await open_pages(kb.cdp_urls["exp1-write-a1-control"], {
                "extensions_page": "chrome://extensions", "omnibox_page": "chrome://omnibox-popup.top-chrome/",
                "guard_page": f"chrome-extension://{unpacked_id(standin.unpacked[-1])}/manifest.json"}))
            seen = await kb.intercepted_requests("exp1-write-a1-control")
            await kb.delete_session("exp1-write-a1-control")
            await kb.close()
            return unguarded, opened, guarded, seen

        unguarded, opened, guarded, seen = loop.run(go(), timeout=180)
    finally:
        loop.close()
        for chromium in made:
            chromium.kill()
            chromium.wait()
    assert [unguarded[k] for k in ("page", "shared_worker", "stashed_shared_worker", "new_context")] == ["open"] * 4
    assert {("frame", "page"), ("frame", "shared_worker"), ("frame", "stashed_shared_worker")} <= set(opened)
    # no page makes a shared worker; one made from a kept constructor goes on without sockets
    assert "SharedWorker is not defined" in guarded["shared_worker"], guarded
    assert "SharedWorker is not a constructor" in guarded["iframe_shared_worker"], guarded
    assert guarded["storage_access_shared_worker"] == "threw: SecurityError", guarded  # a handle, without one
    assert "__LateSharedWorker is not a constructor" in guarded["late_stashed_shared_worker"], guarded
    assert unguarded["late_stashed_shared_worker"] == "made" and unguarded["storage_access_shared_worker"] == "made"
    assert guarded["stashed_shared_worker"] == "threw: WebSocket is not defined", guarded
    assert log == [], guarded  # not one handshake, from any context
    assert guarded.pop("noopener_link") == "site" == unguarded["noopener_link"]  # the walls break no ordinary site
    assert all(v != "open" for v in guarded.values()), guarded
    for where in ("chrome_page", "extensions_page", "guard_page", "omnibox_page"):
        assert "ERR_BLOCKED_BY_ADMINISTRATOR" in guarded[where], guarded
    assert "ERR_BLOCKED_BY_ADMINISTRATOR" in unguarded["chrome_page"]
    # the shared worker went on without sockets, the service worker's script was refused, and the
    # other context's page was closed
    workers = seen["workers"]
    assert workers["stripped"] >= 1 and workers["refused_service_workers"] >= 1, workers
    assert not workers["closed"] and workers["lost"] is None and workers["pages_closed"] == 1, workers
    # the guard went up once, under its archive's hash, and only the write task's browser has it
    assert len(standin.extensions) == 1
    [extension] = standin.extensions.values()
    assert extension["archive"] == socket_guard_zip()
    made_with = [json.loads(body).get("extensions") for method, path, body in standin.requests
                 if (method, path) == ("POST", "/browsers")]
    assert made_with == [None, [{"name": extension["name"]}]]
    policies = [json.loads(body).get("chrome_policy") for method, path, body in standin.requests
                if (method, path) == ("POST", "/browsers")]
    assert policies == [KERNEL_POLICY, KERNEL_POLICY]  # every browser, as the local backend's seal
    assert KERNEL_POLICY["URLBlocklist"] == BROWSER_POLICY["URLBlocklist"] and "URLAllowlist" not in KERNEL_POLICY


def test_a_guard_of_the_same_name_but_other_bytes_is_refused(tmp_path):
    """Another extension uploaded under the guard's name (by hand, or an older guard) is not trusted."""
    standin = KernelApiStandin(KEY)
    loop = ServiceLoop()
    try:
        api = loop.serve(standin.app, "kernel api stand-in")
        kb = KernelBackend(api_key=KEY, base_url=api)
        name = "webbench-socket-guard-" + hashlib.sha256(socket_guard_zip()).hexdigest()[:16]
        other = io.BytesIO()
        with zipfile.ZipFile(other, "w") as archive:
            archive.writestr("manifest.json", '{"manifest_version": 3, "name": "other", "version": "1"}')
        standin.extensions["ext_0001"] = {"id": "ext_0001", "name": name, "archive": other.getvalue(),
                                          "checksum": hashlib.sha256(other.getvalue()).hexdigest()}

        async def go():
            try:
                await kb.create_session("exp1-write-a1-control", write_task=True)
            finally:
                await kb.close()

        with pytest.raises(BackendError, match="checksum"):
            loop.run(go(), timeout=60)
    finally:
        loop.close()
    assert not standin.browsers  # no browser was made without its guard


def test_a_socket_guard_that_loses_its_connection_loses_the_trial_s_browser(tmp_path):
    """The guard's own connection cut mid-trial (the driver's stays): the browser is reported lost,
    which errors the trial, by the harness's own evidence."""
    made: list = []
    relays: list[Relay] = []
    launch = launcher(tmp_path, made)

    def behind_a_relay(extensions, policy):
        relays.append(Relay(launch(extensions, policy)))
        return relays[-1].url

    standin = KernelApiStandin(KEY, launch=behind_a_relay)
    loop = ServiceLoop()
    try:
        api = loop.serve(standin.app, "kernel api stand-in")
        kb = KernelBackend(api_key=KEY, base_url=api)

        async def go():
            await kb.create_session("exp1-write-a1-control", write_task=True)
            await kb.intercept_requests("exp1-write-a1-control", CHECK)
            before = await kb.session_lost("exp1-write-a1-control")
            [driver, guard] = relays[0].connections  # the driver's Playwright connection, then the guard's
            relays[0].cut(1)
            for _ in range(100):  # the guard hears of it as its socket closes
                if after := await kb.session_lost("exp1-write-a1-control"):
                    break
                await asyncio.sleep(0.05)
            await kb.delete_session("exp1-write-a1-control")
            await kb.close()
            return before, after

        before, after = loop.run(go(), timeout=120)
    finally:
        loop.close()
        for chromium in made:
            chromium.kill()
            chromium.wait()
    assert before is None
    assert after and "socket guard" in after and "did not hold" in after


def test_the_guard_is_uploaded_once_and_one_already_there_with_its_bytes_is_used():
    standin = KernelApiStandin(KEY)
    loop = ServiceLoop()
    try:
        api = loop.serve(standin.app, "kernel api stand-in")

        async def go(n: int):
            kb = KernelBackend(api_key=KEY, base_url=api)  # a worker of the run: its own client
            for trial in range(2):
                await kb.create_session(f"exp1-write-a{trial}-w{n}", write_task=True)
            await kb.close()

        loop.run(go(1), timeout=60)
        loop.run(go(2), timeout=60)  # the second worker finds the first one's upload
    finally:
        loop.close()
    uploads = [path for method, path, _ in standin.requests if (method, path) == ("POST", "/extensions")]
    assert uploads == ["/extensions"] and len(standin.extensions) == 1
    [extension] = standin.extensions.values()
    assert extension["archive"] == socket_guard_zip() == socket_guard_zip()  # the same bytes each time
    with zipfile.ZipFile(io.BytesIO(extension["archive"])) as archive:
        assert sorted(archive.namelist()) == ["manifest.json", "no_shared_workers.js", "rules.json"]
        assert json.loads(archive.read("rules.json"))[0]["condition"]["resourceTypes"] == ["websocket", "webtransport"]


def test_what_the_socket_guard_did_is_a_flag_on_the_trial():
    from pytest_webbench.trial.browser_session import write_flags

    assert write_flags({"workers": None}) == [] == write_flags({"workers": {"stripped": 0, "closed": 0, "pages_closed": 0}})
    flags = write_flags({"workers": {"stripped": 2, "closed": 1, "pages_closed": 3, "refused_service_workers": 1}})
    assert [f.split(" ")[0] for f in flags] == ["2", "1", "3"]
    assert "no other CDP client" in flags[0] and "closed" in flags[1] and "browser context" in flags[2]
