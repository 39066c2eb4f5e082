"""The local backend's walls around an agent's browser code (browsers/pod.py), tried as a hostile
agent would: every way out of Node's `vm` that it knows lands in a process sealed like its shell
(no key, no harness file, no other trial), the browser refuses local schemes and reaches only the
task's site, and the harness's own reads of the page are made over its own connection after the
agent's code and hooks are gone."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.browsers.pod import PLAYWRIGHT_SWITCHES
from pytest_webbench.service_loop import ServiceLoop

pytestmark = [pytest.mark.chromium, pytest.mark.seal]
CHECKOUT = Path(__file__).resolve().parents[1]
SENTINEL = "sentinel-in-the-harness-env-7c1"
TASK_TOML = CHECKOUT / "suites" / "local-web" / "tasks" / "shop-price" / "task.toml"
# Ways from a value in the code's scope to the host realm's Function, and so to `process`.
ESCAPES = {
    "setTimeout": "setTimeout.constructor('return process')()",
    "Buffer": "Buffer.constructor('return process')()",
    "URL": "URL.constructor('return process')()",
    "page": "page.constructor.constructor('return process')()",
    "an error Playwright threw": "(await page.evaluate('throw new Error(1)').catch((e) => e)).constructor.constructor('return process')()",
    "console": "console.log.constructor('return process')()",
}
CART = """<html><body><div class=cart-item data-sku='MUG' data-qty='1'></div><b id=total>$4.99</b>
<script>if (location.pathname === '/sw-page') navigator.serviceWorker.register('/sw.js');</script></body></html>"""
# A service worker the agent's page registers: it would answer the check's page with a forged cart.
FAKE_WORKER = """self.addEventListener('install', (e) => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => { if (new URL(e.request.url).pathname === '/cart')
  e.respondWith(new Response("<b id=total>$0.00</b>", {headers: {'content-type': 'text/html'}})); });"""


@pytest.fixture(scope="module")
def browsers():
    loop = ServiceLoop()
    app = Starlette(routes=[
        Route("/sw.js", lambda r: Response(FAKE_WORKER, media_type="application/javascript")),
        Route("/{p:path}", lambda r: HTMLResponse(CART)),
    ])
    site = "http://site.localhost:" + loop.serve(app, "site").rsplit(":", 1)[1]
    elsewhere = loop.serve(Starlette(routes=[Route("/", lambda r: HTMLResponse("<title>other</title>"))]), "not the task's site")
    os.environ[SENTINEL.upper().replace("-", "_")] = SENTINEL  # in the harness's environment from here on
    backend = LocalBackend()
    loop.run(backend.create_session("A", site_urls=[site]))
    loop.run(backend.create_session("B", site_urls=[site]))
    loop.run(backend.goto("A", site + "/a"))
    loop.run(backend.goto("B", site + "/b-secret-page"))
    yield loop, backend, site, elsewhere
    loop.run(backend.close())
    loop.close()
    os.environ.pop(SENTINEL.upper().replace("-", "_"), None)


def _run(loop, backend, code: str, session: str = "A") -> dict:
    return loop.run(backend.execute_playwright(session, code, timeout_sec=20), timeout=60)


@pytest.mark.parametrize("via", ESCAPES)
def test_a_way_out_of_vm_finds_a_process_with_nothing_of_the_harness(browsers, via):
    loop, backend, *_ = browsers
    probe = f"""
    const p = {ESCAPES[via]};
    const fs = p.getBuiltinModule('fs');
    const child = p.getBuiltinModule('child_process');
    const tryIt = (f) => {{ try {{ return f(); }} catch (e) {{ return 'refused: ' + e.code; }} }};
    return {{
      env: p.env,
      root: fs.readdirSync('/'),
      checkout: tryIt(() => fs.readdirSync({json.dumps(str(CHECKOUT))})),
      task: tryIt(() => fs.readFileSync({json.dumps(str(TASK_TOML))}, 'utf8')),
      processes: child.execSync('ls /proc | grep -c "^[0-9]"').toString().trim(),
      environs: child.execSync('cat /proc/[0-9]*/environ 2>/dev/null | tr "\\\\0" "\\\\n"').toString(),
      uid: p.getuid(),
    }};"""
    out = _run(loop, backend, probe)
    assert out["success"], out
    found = out["result"]
    assert SENTINEL not in json.dumps(found)  # no harness process's environment, its own empty of keys
    assert set(found["env"]) <= {"PATH", "HOME", "PWD", "SHLVL", "LC_CTYPE", "_"}, found["env"]  # what a shell sets
    assert found["checkout"] == "refused: ENOENT" and found["task"] == "refused: ENOENT"  # absent, not hidden
    assert "work" not in found["root"] and "root" not in found["root"]
    assert int(found["processes"]) <= 6  # its own seal's: PID 1, the runner, the shell it started


def test_the_code_sees_its_own_trial_s_browser_only(browsers):
    loop, backend, site, _ = browsers
    out = _run(loop, backend, "return [browser.contexts().length, context.pages().map((p) => p.url())]")
    assert out["result"] == [1, [site + "/a"]]  # session B's page is in another browser altogether
    found = _run(loop, backend, "const cdp = await browser.newBrowserCDPSession();"
                                "return (await cdp.send('Target.getTargets')).targetInfos.map((t) => t.url)")
    assert not any("b-secret-page" in url for url in found["result"]), found


@pytest.mark.parametrize("url", ["file:///etc/passwd", f"file://{TASK_TOML}", "file:///", "view-source:file:///etc/hostname",
                                 "chrome://version", "chrome://net-export", "devtools://devtools/bundled/inspector.html"])
def test_local_schemes_are_refused(browsers, url):
    loop, backend, *_ = browsers
    fresh = _run(loop, backend, f"const p = await context.newPage(); try {{ await p.goto({url!r}); return 'opened: ' + "
                                "(await p.content()).slice(0, 200) } catch (e) { return e.message } finally { await p.close() }")
    assert "ERR_BLOCKED_BY_ADMINISTRATOR" in fresh["result"], fresh


def test_only_the_task_s_site_is_reachable(browsers):
    loop, backend, site, elsewhere = browsers
    pod = backend.pods["A"]
    for url in (elsewhere + "/", "http://127.0.0.1:" + site.rsplit(":", 1)[1] + "/",
                "http://example.com/", "http://1.1.1.1/"):
        out = _run(loop, backend, f"const p = await context.newPage(); try {{ await p.goto({url!r}); return 'opened' }} "
                                  "catch (e) { return e.message } finally { await p.close() }")
        if url.startswith("http://127.0.0.1:") and url.endswith(site.rsplit(":", 1)[1] + "/"):
            assert out["result"] == "opened"  # the site's port, by any name of the loopback
        else:
            assert out["result"] != "opened" and "net::ERR_" in out["result"], (url, out)
    assert pod.site_connections()[int(site.rsplit(":", 1)[1])] >= 1  # counted by the harness, per trial


def test_the_page_check_reads_the_site_past_the_agent_s_hooks(browsers):
    """The agent's page registers a service worker forging the cart, and its code routes the cart to
    a forgery too: once the agent stops, its runner and routes are gone and the check bypasses the
    worker, so the harness reads what the site serves."""
    loop, backend, site, _ = browsers
    loop.run(backend.create_session("C", site_urls=[site]))
    try:
        code = (f"await page.goto({(site + '/sw-page')!r}); await page.evaluate(() => navigator.serviceWorker.ready);"
                "await context.route('**/cart', (r) => r.fulfill({body: '<b id=total>$0.00</b>', contentType: 'text/html'}));"
                f"const p = await context.newPage(); await p.goto({(site + '/cart')!r});"
                "const t = await p.textContent('#total'); await p.close(); return t")
        assert _run(loop, backend, code, "C")["result"] == "$0.00"  # the forgery works while the agent runs
        loop.run(backend.end_agent_code("C"))
        checked = loop.run(backend.check_page("C", site + "/cart", "return document.querySelector('#total').textContent"))
        assert checked["value"] == "$4.99"
        with pytest.raises(Exception, match="has ended"):
            _run(loop, backend, "return 1", "C")  # no code runs for the agent after it stopped
    finally:
        loop.run(backend.delete_session("C"))


def test_kernel_s_page_check_code_reads_the_site_past_the_agent_s_service_worker(browsers):
    """On Kernel the check is Playwright code run in the trial's context, as the agent's code is:
    it goes past a service worker the agent's page registered, as the local check does."""
    from pytest_webbench.browsers.kernel import page_check_code

    loop, backend, site, _ = browsers
    loop.run(backend.create_session("K", site_urls=[site]))
    try:
        code = (f"await page.goto({(site + '/sw-page')!r}); await page.evaluate(() => navigator.serviceWorker.ready);"
                f"const p = await context.newPage(); await p.goto({(site + '/cart')!r});"
                "const t = await p.textContent('#total'); await p.close(); return t")
        assert _run(loop, backend, code, "K")["result"] == "$0.00"  # the worker answers for the site
        checked = _run(loop, backend, page_check_code(site + "/cart", "return document.querySelector('#total').textContent"), "K")
        assert checked["result"]["value"] == "$4.99", checked
    finally:
        loop.run(backend.delete_session("K"))


def test_a_browser_the_agent_closes_is_lost_not_replaced(browsers):
    loop, backend, site, _ = browsers
    loop.run(backend.create_session("D", site_urls=[site]))
    try:
        _run(loop, backend, "const cdp = await browser.newBrowserCDPSession(); await cdp.send('Browser.close').catch(() => {})", "D")
        loop.run(backend.end_agent_code("D"))
        loop.run(asyncio.wait_for(backend.pods["D"].proc.wait(), 30))  # Chromium exits (the event, not a guessed while)
        assert loop.run(backend.session_lost("D")) is not None  # an errored trial, never a page the agent stood up
    finally:
        loop.run(backend.delete_session("D"))


def _chromium_proc(pod) -> Path:
    """/proc of the pod's Chromium itself (read from the host, as root or its user)."""
    import subprocess

    found = subprocess.run(["pgrep", "-x", "-s", str(pod.proc.pid), "chromium"], capture_output=True, text=True).stdout.split()
    assert found, "no chromium process in the pod's session"
    return Path(f"/proc/{found[0]}")


def _chromium_mounts(pod) -> str:
    """The mount table Chromium's own process sees."""
    return (_chromium_proc(pod) / "mounts").read_text()


def test_what_the_agent_s_code_and_pages_write_fills_a_capped_tmpfs_not_the_host_s_disk(browsers):
    """The runner's /tmp and Chromium's profile are memory of their seal's own, capped: code out of
    `vm` that writes without end gets ENOSPC instead of filling the host's disk, and Chromium's
    /tmp, its profile (where the pages' storage goes too), is a tmpfs of the cap."""
    from pytest_webbench.browsers.pod import CHROMIUM_TMP_BYTES, RUNNER_TMP_BYTES

    loop, backend, *_ = browsers
    out = _run(loop, backend, f"""
    const p = {ESCAPES["setTimeout"]};
    const fs = p.getBuiltinModule('fs');
    const mib = Buffer.alloc(1024 * 1024, 1);
    let written = 0, refused = null;
    const fd = fs.openSync('/tmp/fill', 'w');
    try {{ for (let i = 0; i < 2 * {RUNNER_TMP_BYTES >> 20}; i++) {{ fs.writeSync(fd, mib); written++; }} }}
    catch (e) {{ refused = e.code; }} finally {{ fs.closeSync(fd); fs.unlinkSync('/tmp/fill'); }}
    const cp = p.getBuiltinModule('child_process');
    const sh = (c) => {{ try {{ cp.execSync(c, {{stdio: 'ignore'}}); return 'done'; }} catch (e) {{ return 'refused'; }} }};
    // ways to lift the cap: a bigger tmpfs in its place, none at all, space claimed without writing
    const lift = {{ remount: sh('mount -o remount,size=4g /tmp'), unmount: sh('umount -l /tmp'),
                   fallocate: sh('fallocate -l 1G /tmp/big'), newns: sh('unshare -Urm mount -t tmpfs none /tmp') }};
    fs.rmSync('/tmp/big', {{ force: true }});
    return {{ written, refused, lift }};""")
    assert out["success"], out
    found = out["result"]
    assert found["refused"] == "ENOSPC" and found["written"] <= RUNNER_TMP_BYTES >> 20, found
    assert set(found["lift"].values()) == {"refused"}, found["lift"]
    tmp = [line.split() for line in _chromium_mounts(backend.pods["A"]).splitlines() if line.split()[1] == "/tmp"]
    assert [(fields[2], f"size={CHROMIUM_TMP_BYTES >> 10}k" in fields[3]) for fields in tmp] == [("tmpfs", True)], tmp


def test_the_sealed_chromium_gets_playwright_s_own_switches(tmp_path):
    """The pod starts Chromium itself (in its seal), so it must pass what Playwright's own launch
    passes: a stand-in executable records the arguments Playwright gives it."""
    import subprocess

    from pytest_webbench.browsers.pod import playwright_driver

    node, package = playwright_driver()
    seen = tmp_path / "argv"
    fake = tmp_path / "chromium"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {seen}\nexit 1\n")
    fake.chmod(0o755)
    script = (f"const {{ chromium }} = require({json.dumps(str(package))});"
              f"chromium.launch({{ executablePath: {json.dumps(str(fake))}, headless: true, timeout: 5000 }}).catch(() => {{}});")
    subprocess.run([str(node), "-e", script], timeout=60, capture_output=True)
    given = [a for a in seen.read_text().splitlines() if a.startswith("--")]
    own = {a for a in given if a.split("=")[0] in ("--user-data-dir", "--remote-debugging-pipe", "--no-startup-window")}
    assert sorted(set(given) - own) == sorted(PLAYWRIGHT_SWITCHES + ["--enable-features=CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies"])


def _chromium_cmdline(pod) -> list[str]:
    return (_chromium_proc(pod) / "cmdline").read_text().split("\0")


async def _made_ahead(backend):
    return await asyncio.shield(backend._ahead[1])  # started; still the backend's to hand out


def test_a_browser_made_ahead_serves_its_one_session_and_keeps_nothing_of_the_trial_it_waited_beside(browsers):
    """The next trial's pod starts while this trial's agent runs (LocalBackend.make_ready). Tried as
    that agent would: what its pages leave on the site (a cookie, storage) is not in the next
    session's browser, no door into the pod is open until the session takes it, a pod made for
    other sites is not taken, the arm's page-only scope holds in a pod made before its arm was
    known, and it is the same Chromium, started the same way, as one started for the session."""
    loop, backend, site, elsewhere = browsers
    loop.run(backend.create_session("E", site_urls=[site]))
    try:
        loop.run(backend.goto("E", site + "/a"))
        loop.run(backend.make_ready([site]))
        left = _run(loop, backend, "await page.evaluate(() => { document.cookie = 'planted=1; max-age=9999'; "
                                   "localStorage.setItem('planted', '1'); }); return await page.evaluate(() => document.cookie)", "E")
        assert left["result"] == "planted=1", left
        ahead = loop.run(_made_ahead(backend), timeout=60)
        assert ahead.alive() and ahead._harness_door is None and ahead._spawned is not None  # started, no way in yet
        loop.run(backend.create_session("F", page_api_only=True, site_urls=[site]))
        assert backend.pods["F"] is ahead and backend._ahead is None  # taken, and by one session only
        loop.run(backend.goto("F", site + "/a"))
        seen = loop.run(backend.evaluate("F", "return [document.cookie, localStorage.getItem('planted')]"))
        assert seen == ["", None]  # nothing of the trial it waited beside
        scoped = _run(loop, backend, "return typeof browser[['newBrowser', 'CDPSession'].join('')]", "F")
        assert "not available in this arm" in scoped["error"], scoped  # the playwright arm's scope, set when the session took it
        loop.run(backend.create_session("G", site_urls=[site]))
        assert backend.pods["G"] is not ahead
        assert _chromium_cmdline(backend.pods["G"]) == _chromium_cmdline(ahead)  # the same browser either way
        loop.run(backend.make_ready([elsewhere]))
        other = loop.run(_made_ahead(backend), timeout=60)
        loop.run(backend.create_session("H", site_urls=[site]))
        assert backend.pods["H"] is not other and backend._ahead[1].result() is other  # made for other sites: kept for them
    finally:
        for session in ("E", "F", "G", "H"):
            if session in backend.pods:
                loop.run(backend.delete_session(session))
        loop.run(backend._drop_ahead())


def test_a_fault_in_making_the_next_browser_is_the_next_trial_s_not_this_one_s(monkeypatch, tmp_path):
    """make_ready runs inside the trial at hand: a Chromium that cannot be found must not error it.
    The next session, which needs that Chromium, is the one that fails, and says why."""
    from pytest_webbench.browsers.base import BackendError

    monkeypatch.setenv("WEBBENCH_CHROMIUM", str(tmp_path / "no-chromium"))
    loop, backend = ServiceLoop(), LocalBackend()
    try:
        loop.run(backend.make_ready(["http://site.localhost:1"]))  # no error here
        loop.run(backend.make_ready(["http://site.localhost:99999"]))  # nor for a port no URL can have
        assert backend._ahead is None
        with pytest.raises(BackendError, match="no Chromium at .*no-chromium"):
            loop.run(backend.create_session("N", site_urls=["http://site.localhost:1"]))
    finally:
        loop.run(backend.close())
        loop.close()


def test_a_pod_made_ahead_that_died_while_it_waited_is_made_again(browsers):
    """Its Chromium gone (killed, or out of memory) before a session took it, the next make_ready
    for the same sites starts another, and the dead one is closed, not handed out."""
    import signal

    loop, backend, site, _ = browsers
    loop.run(backend.make_ready([site]))
    dead = loop.run(_made_ahead(backend), timeout=60)
    os.killpg(dead.proc.pid, signal.SIGKILL)
    loop.run(asyncio.wait_for(dead.proc.wait(), 30))
    try:
        loop.run(backend.make_ready([site]))
        again = loop.run(_made_ahead(backend), timeout=60)
        assert again is not dead and again.alive() and dead._spawned is None  # the dead pod's runner went too
    finally:
        loop.run(backend._drop_ahead())


def test_the_final_screenshot_is_a_lossless_webp_of_the_page(browsers, tmp_path):
    """The final screenshot is stored as WebP (a third of a PNG's size for a page of text), and
    lossless: the same pixels as Playwright's PNG of the same page. Bytes that are no image are kept
    as they came, named for what they are."""
    import base64
    import io

    from PIL import Image, ImageChops

    from pytest_webbench.results.records import final_screenshot
    from pytest_webbench.trial.browser_session import BrowserSessionHandle, lossless_webp

    loop, backend, _, _ = browsers
    handle = BrowserSessionHandle("B", "", SimpleNamespace(backend=backend, loop=loop))
    handle.save_screenshot(tmp_path)
    saved = final_screenshot(tmp_path)
    assert saved is not None and saved.name == "final-screenshot.webp"
    png = base64.b64decode(loop.run(backend.computer_action("B", [{"type": "screenshot"}]))["results"][0]["image"])
    with Image.open(saved) as webp, Image.open(io.BytesIO(png)) as reference:
        assert webp.format == "WEBP" and reference.format == "PNG"
        assert webp.size == reference.size == tuple(loop.run(backend.evaluate("B", "return [innerWidth, innerHeight]")))
        assert ImageChops.difference(webp.convert("RGB"), reference.convert("RGB")).getbbox() is None  # not one pixel differs
    assert saved.stat().st_size < len(png) / 2
    assert lossless_webp(b"not an image") == b"not an image"


def _bytes_below(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_what_the_agent_s_traffic_puts_into_the_trace_on_this_host_is_cut_at_its_bound(monkeypatch, tmp_path):
    """Playwright writes every body the page sends or gets into the session's artifacts folder as it
    records: 160 MB of incompressible replies would have put 160 MB there. The recording stops once
    the folder passes its bound (8 MB here), what it held is saved and bounded, the trial is
    flagged, and the folder goes with the session."""
    monkeypatch.setenv("WEBBENCH_MAX_ARTIFACT_BYTES", str(8 << 20))
    size = 4 << 20
    loop = ServiceLoop()  # each reply its own bytes: Playwright stores a body seen twice once
    app = Starlette(routes=[Route("/big/{i}", lambda r: Response(os.urandom(size), media_type="application/octet-stream")),
                            Route("/{p:path}", lambda r: HTMLResponse("<title>big</title>"))])
    site = "http://site.localhost:" + loop.serve(app, "site").rsplit(":", 1)[1]
    backend = LocalBackend()
    try:
        loop.run(backend.create_session("T", site_urls=[site], trace=True))
        loop.run(backend.goto("T", site + "/"))
        out = loop.run(backend.execute_playwright("T", """
            let got = 0;
            for (let i = 0; i < 40; i++) got += await page.evaluate(async (i) => (await (await fetch('/big/' + i)).arrayBuffer()).byteLength, i);
            return got;""", timeout_sec=120), timeout=180)
        assert out["success"] and out["result"] == 40 * size, out
        artifacts = Path(backend.driver._artifacts)
        held = _bytes_below(artifacts)
        assert held < 20 * size, held  # cut near 8 MB: not the 160 MB the replies carried
        saved = loop.run(backend.save_trace("T", tmp_path))
        assert saved["file"] == "trace.zip" and "stopped recording" in saved["bounded"], saved
        assert (tmp_path / "trace.zip").stat().st_size < 20 * size
        loop.run(backend.delete_session("T"))
        assert _bytes_below(artifacts) == 0 and not list(artifacts.iterdir())
    finally:
        loop.run(backend.close())
        loop.close()


@pytest.mark.skipif(not os.path.isdir("/etc/chromium"), reason="no /etc/chromium to stand in for")
def test_the_policy_folder_a_process_makes_for_its_chromiums_goes_when_the_process_ends():
    import subprocess
    import sys

    # every process of a run (each xdist worker, each resumed run) makes one; they once piled up in /tmp
    made = subprocess.run([sys.executable, "-c", "from pytest_webbench.browsers.pod import chromium_etc\n"
                           "import os, sys; path = chromium_etc(); assert os.path.isfile(path + "
                           "'/policies/managed/webbench.json'); print(path)"],
                          capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1])
    folder = made.stdout.strip()
    assert folder.startswith("/") and "chromium-etc" in folder
    assert not os.path.exists(folder)
