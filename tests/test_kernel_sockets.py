"""A write task's sockets on Kernel, where no door of the harness reads the site's traffic and CDP's
Fetch holds no WebSocket. The Kernel stand-in makes each browser as Kernel does, a real Chromium
with the uploaded extensions it was asked for; the agent, on its own connection as Kernel's server
runs its code, opens a socket to the site from every context a page has. The site's own log of
handshakes and frames is the oracle."""

from __future__ import annotations

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
from pytest_webbench.browsers.kernel import KernelBackend, socket_guard_zip
from pytest_webbench.browsers.pod import chromium_path, chromium_switches
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from kernel_api_standin import KernelApiStandin  # noqa: E402

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
        return HTMLResponse("<title>site</title><form method=post action=/order><button>Order</button></form>")

    async def service_worker(request):
        return Response(SERVICE_WORKER, media_type="text/javascript")

    return Starlette(routes=[Route("/", page), Route("/sw.js", service_worker), WebSocketRoute("/ws/{name}", sockets)])


async def probe_all(cdp: str, site: str, names) -> dict[str, str]:
    from playwright.async_api import async_playwright

    prelude = f"const WS = {('ws' + site[4:] + '/ws/')!r}; {WORKER_JS}"
    async with async_playwright() as p:  # the agent's own connection
        browser = await p.chromium.connect_over_cdp(cdp)
        context = browser.contexts[0]
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


def test_a_write_task_s_browser_on_kernel_opens_no_socket_to_the_site_from_any_context(tmp_path):
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
            unguarded = await probe_all(kb.cdp_urls["exp1-read-a1-control"], site, ["page", "shared_worker"])
            await kb.delete_session("exp1-read-a1-control")
            opened = list(log)
            log.clear()
            await kb.create_session("exp1-write-a1-control", write_task=True)
            await kb.intercept_requests("exp1-write-a1-control", CHECK)
            guarded = await probe_all(kb.cdp_urls["exp1-write-a1-control"], site, list(PROBES))
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
    assert unguarded["page"] == "open" and unguarded["shared_worker"] == "open" and unguarded["new_context"] == "open"
    assert ("frame", "page") in opened and ("frame", "shared_worker") in opened
    assert log == [], guarded  # not one handshake, from any context
    assert all(v != "open" for v in guarded.values()), guarded
    assert "ERR_BLOCKED_BY_ADMINISTRATOR" in guarded["chrome_page"] and "ERR_BLOCKED_BY_ADMINISTRATOR" in unguarded["chrome_page"]
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
    assert policies == [BROWSER_POLICY, BROWSER_POLICY]  # every browser, as the local backend's seal


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
