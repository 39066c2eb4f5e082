"""The Kernel backend (the real `kernel` SDK) against a local stand-in of the Kernel API."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from pytest_webbench.browsers.base import BackendError
from pytest_webbench.browsers.kernel import KernelBackend
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from kernel_api_standin import PNG_1PX, KernelApiStandin  # noqa: E402

KEY = "kernel-sentinel-key-0b7e"
BATCH = "[{kind: 'page', match: {url_patterns: ['https://github.com/*']}, tool: {name: 'get_pull_request'}, execute() {}}]"


@pytest.fixture
def kernel_api():
    standin = KernelApiStandin(KEY, page_values={"cart": ["MUG-BLU-S"]})
    loop = ServiceLoop()
    url = loop.serve(standin.app, "kernel api stand-in")
    yield standin, url, loop
    loop.close()


def backend(url: str, key: str = KEY) -> KernelBackend:
    return KernelBackend(api_key=key, base_url=url)


def test_a_trial_s_browser_lifecycle_in_kernel_s_shapes(kernel_api):
    standin, url, loop = kernel_api
    kb = backend(url)

    async def go():
        await kb.check_access()
        created = await kb.create_session("exp1-shop-cart-a1-treatment")
        opened = await kb.execute_playwright("exp1-shop-cart-a1-treatment", "await page.goto('https://shop.example/'); return page.url();")
        added = await kb.add_custom_tools("exp1-shop-cart-a1-treatment", "github", BATCH, force_overwrite_namespace=True)
        again = await kb.add_custom_tools("exp1-shop-cart-a1-treatment", "github", BATCH, force_overwrite_namespace=True)
        listed = await kb.webmcp_list("exp1-shop-cart-a1-treatment")
        invoked = await kb.webmcp_invoke("exp1-shop-cart-a1-treatment", listed["tools"][0]["tool_ref"], {"n": 1})
        page = await kb.read_page("exp1-shop-cart-a1-treatment", "https://shop.example/cart", "return {cart: []}")
        png = await kb.screenshot("exp1-shop-cart-a1-treatment")
        await kb.remove_custom_tool("exp1-shop-cart-a1-treatment", again["tools"][0]["id"])
        custom_after = await kb.list_custom_tools("exp1-shop-cart-a1-treatment")
        await kb.delete_session("exp1-shop-cart-a1-treatment")
        await kb.close()
        return created, opened, added, listed, invoked, page, png, custom_after

    created, opened, added, listed, invoked, page, png, custom_after = loop.run(go(), timeout=60)
    assert created["kernel_session_id"] == "kb_0001" and opened["result"] == "https://shop.example/"
    assert added["tools"][0]["namespace"] == "github"
    assert len(listed["tools"]) == 1  # resending the registration replaced the first, not added a second
    assert listed["tools"][0]["source"]["custom"]["namespace"] == "github"
    assert invoked == {"invocation_id": "inv_1", "status": "completed", "output": {"echo": {"n": 1}}}
    assert page == {"cart": ["MUG-BLU-S"]} and png == PNG_1PX and custom_after == {"tools": []}
    assert standin.browsers == {}  # deleted
    create_body = next(json.loads(b) for m, p, b in standin.requests if (m, p) == ("POST", "/browsers"))
    assert create_body["stealth"] is True and create_body["name"] == "exp1-shop-cart-a1-treatment"
    assert not any(KEY.encode() in body for _, _, body in standin.requests)  # the key rides only in the header


def test_an_outcome_unknown_invoke_is_never_retried(kernel_api):
    standin, url, loop = kernel_api
    kb = backend(url)

    async def go():
        await kb.create_session("s")
        with pytest.raises(BackendError) as info:
            await kb.webmcp_invoke("s", "wmcp_slow", {})
        await kb.close()
        return info.value

    error = loop.run(go(), timeout=60)
    assert error.code == "outcome_unknown" and "504" in str(error)
    assert sum(p.endswith("/webmcp/invoke") for _, p, _ in standin.requests) == 1


def test_transient_failures_are_retried_and_a_bad_batch_is_not(kernel_api):
    standin, url, loop = kernel_api
    kb = backend(url)
    standin.fail_next["/webmcp/custom-tools"] = [503]

    async def go():
        await kb.create_session("s")
        added = await kb.add_custom_tools("s", "ns", BATCH, force_overwrite_namespace=True)
        with pytest.raises(BackendError) as info:
            await kb.add_custom_tools("s", "ns", "[{tool: {}}]", force_overwrite_namespace=True)
        await kb.close()
        return added, info.value

    added, error = loop.run(go(), timeout=60)
    assert added["tools"] and sum(p.endswith("/webmcp/custom-tools") for m, p, _ in standin.requests if m == "POST") == 3
    assert error.code == "invalid_source" and "url_patterns" in str(error)


def test_missing_bad_key_and_no_network_are_one_clear_error_each(kernel_api, monkeypatch):
    standin, url, loop = kernel_api
    monkeypatch.delenv("KERNEL_API_KEY", raising=False)
    with pytest.raises(BackendError, match="KERNEL_API_KEY is not set"):
        KernelBackend(base_url=url)
    with pytest.raises(BackendError, match="HTTP 401") as info:
        loop.run(backend(url, "wrong-key").check_access(), timeout=60)
    assert "wrong-key" not in str(info.value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    unreachable = KernelBackend(api_key=KEY, base_url=f"http://127.0.0.1:{closed_port}")
    unreachable._client = unreachable._client.with_options(max_retries=0)
    with pytest.raises(BackendError, match="cannot reach the API") as info:
        loop.run(unreachable.check_access(), timeout=60)
    assert info.value.code == "unreachable"


def run_on_kernel_standins(pytester, monkeypatch, api: KernelApiStandin, mcp_record: Path, exp: str,
                           auth_seen: list[str], solution_body: str):
    """A --browser kernel run of hn-item-1's control/treatment pair, on stand-ins of the Kernel API
    and of its hosted MCP server (which records the bearer token it gets), with the reference
    solution's body given."""
    import shutil

    from kernel_standin import build_standin

    mcp_app = build_standin(mcp_record).streamable_http_app(json_response=True, stateless_http=True)

    async def hosted_mcp(scope, receive, send):  # Kernel's hosted server takes the API key as a bearer token
        if scope["type"] == "http":
            auth_seen.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        await mcp_app(scope, receive, send)

    loop = ServiceLoop()
    try:
        api_url = loop.serve(api.app, "kernel api")
        mcp_url = loop.serve(hosted_mcp, "kernel mcp") + "/mcp"
        suite = pytester.path / "public-web"
        shutil.copytree(Path(__file__).resolve().parents[1] / "suites" / "public-web", suite)
        (suite / "tasks" / "hn-item-1" / "solution" / "reference.py").write_text(
            "async def solve(browser, arm):\n" + solution_body + "    return {'title': 'Y Combinator', 'by': 'pg'}\n")
        monkeypatch.setenv("KERNEL_API_KEY", KEY)
        monkeypatch.setenv("KERNEL_BASE_URL", api_url)
        monkeypatch.setenv("KERNEL_MCP_URL", mcp_url)
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite),
            "--browser", "kernel", "--runner", "reference", "--experiment-id", exp, "-k", "hn-item-1 and not playwright")
    finally:
        loop.close()


def test_a_public_web_pair_runs_end_to_end_on_kernel_stand_ins(pytester, monkeypatch, tmp_path):
    """--browser kernel through everything: the access check, stealth browsers named after the
    trials, the treatment batch through the custom-tools API, the agent's calls through the proxy to
    a stand-in of Kernel's hosted MCP server with the key resolved from the environment, the final
    screenshot, and the browsers deleted."""
    api = KernelApiStandin(KEY)
    mcp_record = tmp_path / "mcp-calls.jsonl"
    auth_seen: list[str] = []
    result = run_on_kernel_standins(pytester, monkeypatch, api, mcp_record, "kern", auth_seen,
                                    "    assert (await browser.playwright('return document.title')) is not None\n")
    result.assert_outcomes(passed=2)
    created = [json.loads(b) for m, p, b in api.requests if (m, p) == ("POST", "/browsers")]
    assert sorted(c["name"] for c in created) == ["kern-hn-item-1-a1-control", "kern-hn-item-1-a1-treatment"]
    assert all(c["stealth"] for c in created) and api.browsers == {}  # both deleted at the end
    registered = [p for m, p, _ in api.requests if m == "POST" and p.endswith("/webmcp/custom-tools")]
    assert registered == ["/browsers/kern-hn-item-1-a1-treatment/webmcp/custom-tools"]  # treatment only
    assert any(p.endswith("/computer/screenshot") for _, p, _ in api.requests)
    calls = [json.loads(line) for line in mcp_record.read_text().splitlines()]
    assert [c["tool"] for c in calls] == ["execute_playwright_code", "execute_playwright_code"]
    assert auth_seen and set(auth_seen) == {f"Bearer {KEY}"}
    # each browser recorded as Kernel's replay (started before the agent, stopped after it) and
    # linked from the record and the trial's page, with the live view
    assert sorted(api.replays.items()) == [("rp_kb_0001", "stopped"), ("rp_kb_0002", "stopped")]
    from pytest_webbench.results.records import read_trial_records

    [exp] = (pytester.path / "results").iterdir()
    for record in read_trial_records(exp)[0]:
        assert record.trace.replay_url.startswith("https://replays.standin/rp_kb_000") and record.trace.file is None
        assert record.trace.live_view_url.startswith("https://live.standin/kb_000") and record.trace.error is None
        assert record.trace.replay_url in (exp / "pages" / f"{record.trial_id}.html").read_text()
    for path in (pytester.path / "results").rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


def test_a_browser_kernel_ended_mid_trial_is_reported_lost(kernel_api):
    """Kernel ends an idle session itself (timeout_seconds): the trial is told why, from the API."""
    standin, url, loop = kernel_api
    kb = backend(url)

    async def go():
        await kb.create_session("exp1-a")
        await kb.create_session("exp1-b")
        alive = await kb.session_lost("exp1-a")
        standin.end("exp1-a")
        ended = await kb.session_lost("exp1-a")
        never = await kb.session_lost("exp1-nope")
        await kb.close()
        return alive, ended, never

    alive, ended, never = loop.run(go(), timeout=60)
    assert alive is None
    assert ended == "Kernel ended the browser session at 2026-12-02 00:01:00+00:00 (timeout_seconds 60)"
    assert never == "Kernel has no such browser session any more"
    retrieves = [p for m, p, _ in standin.requests if m == "GET" and p.startswith("/browsers/exp1-")]
    assert retrieves == ["/browsers/exp1-a", "/browsers/exp1-a", "/browsers/exp1-nope"]


@pytest.mark.chromium
def test_the_page_check_code_kernel_runs_works_in_a_real_browser():
    """The JavaScript the Kernel backend sends for a page check, run for real by the local driver
    (which runs Playwright code as Kernel's runtime does) against a local page: a mistake in it
    fails here, not only on Kernel."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from pytest_webbench.browsers.kernel import page_check_code
    from pytest_webbench.browsers.local import LocalBackend

    cart = "<html><body><div class=cart-item data-sku='MUG-BLU-S' data-qty='2'></div><b id=total>$9.98</b></body></html>"
    app = Starlette(routes=[Route("/cart", lambda r: HTMLResponse(cart)), Route("/", lambda r: HTMLResponse("<title>home</title>"))])
    loop, local = ServiceLoop(), LocalBackend()
    try:
        site = loop.serve(app, "shop")
        script = ("const items = {}; for (const r of document.querySelectorAll('.cart-item')) items[r.dataset.sku] = Number(r.dataset.qty);\n"
                  "return { items, total: document.querySelector('#total').textContent };")

        async def go():
            await local.create_session("s", site_urls=[site])
            await local.execute_playwright("s", f"await page.goto({site + '/'!r})")
            out = await local.execute_playwright("s", page_check_code(site + "/cart", script))
            left_on = await local.execute_playwright("s", "return page.url()")
            await local.delete_session("s")
            return out, left_on

        out, left_on = loop.run(go(), timeout=120)
        loop.run(local.close(), timeout=30)
    finally:
        loop.close()
    assert out["success"], out
    assert out["result"]["value"] == {"items": {"MUG-BLU-S": 2}, "total": "$9.98"}
    assert out["result"]["url"] == site + "/cart" and "data-sku" in out["result"]["html"]
    assert left_on["result"] == site + "/"  # the agent's own tab is untouched


def test_a_failed_delete_is_retried_then_swept_and_one_that_cannot_be_deleted_is_reported(pytester, monkeypatch, tmp_path):
    """A billed browser is never forgotten: a delete that fails after the SDK's retries is tried
    again, recorded, and swept at the run's end; one that still cannot be deleted is in the report."""
    api = KernelApiStandin(KEY)
    # control: fails the trial's delete and its retries (2 attempts x the SDK's 3 tries), then the
    # sweep deletes it; treatment: never deletable
    api.failing_deletes = {"sweep-hn-item-1-a1-control": 6, "sweep-hn-item-1-a1-treatment": 10**6}
    result = run_on_kernel_standins(pytester, monkeypatch, api, tmp_path / "calls.jsonl", "sweep", [],
                                    "    await browser.playwright('return 1')\n")
    result.assert_outcomes(passed=2)  # a delete failing after the trial does not change its grade
    assert [b.name for b in api.browsers.values()] == ["sweep-hn-item-1-a1-treatment"]  # control swept
    deletes = [p for m, p, _ in api.requests if m == "DELETE"]
    assert deletes.count("/browsers/sweep-hn-item-1-a1-control") == 7  # 6 failed (trial), 1 deleted (sweep)
    report = json.loads((pytester.path / "results" / "sweep" / "report.json").read_text())
    [left] = report["browsers_not_deleted"]
    assert left["name"] == "sweep-hn-item-1-a1-treatment" and "HTTP 500" in left["error"]
    result.stdout.fnmatch_lines(["*NOT DELETED (may still be billed): Kernel browser sweep-hn-item-1-a1-treatment*"])
    assert "could not be deleted" in (pytester.path / "results" / "sweep" / "report.md").read_text()


@pytest.mark.chromium
def test_a_write_task_s_submission_is_blocked_on_kernel_s_browser_over_the_harness_s_own_cdp_connection(tmp_path):
    """Kernel's browser is reached over CDP (its `cdp_ws_url`): here a real Chromium stands in for it.
    The harness attaches its own connection and routes the task's submission there; the agent, on a
    connection of its own as Kernel's server would run its code, fills in the form, first removing
    every route it can see. Its submission is blocked and kept, and the site never receives it."""
    import asyncio
    import re
    import subprocess
    import threading

    from playwright.async_api import async_playwright
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    from pytest_webbench.browsers.pod import chromium_path, chromium_switches

    received = []

    async def form(request):
        if request.method == "POST":
            received.append(dict(await request.form()))
            return HTMLResponse("<title>done</title>ordered")
        return HTMLResponse("<form method=post action=/order><input name=item value=mug>"
                            "<input name=qty><button id=go>Order</button></form>")

    chromium = subprocess.Popen(
        [chromium_path(), "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={tmp_path / 'profile'}",
         *chromium_switches(), "about:blank"], stderr=subprocess.PIPE, text=True)
    loop = ServiceLoop()
    try:
        for line in chromium.stderr:  # Chromium says where its CDP endpoint is, and then keeps logging
            if found := re.search(r"DevTools listening on (ws://\S+)", line):
                cdp = found.group(1)
                break
        threading.Thread(target=chromium.stderr.read, daemon=True).start()  # never let its log fill the pipe
        standin = KernelApiStandin(KEY, cdp_ws_url=cdp)
        api = loop.serve(standin.app, "kernel api stand-in")
        site = loop.serve(Starlette(routes=[Route("/order", form, methods=["GET", "POST"])]), "site")
        kb = backend(api)

        async def go():
            await kb.create_session("exp1-write-a1-control")
            await kb.intercept_requests("exp1-write-a1-control", {"url_pattern": r"/order$", "method": "POST",
                                                                  "body": None, "params": None})
            async with async_playwright() as p:  # the agent's own connection
                browser = await p.chromium.connect_over_cdp(cdp)
                context = browser.contexts[0]
                await context.unroute_all()
                page = context.pages[0] if context.pages else await context.new_page()
                await page.goto(site + "/order")
                await page.fill("input[name=qty]", "2")
                failed = page.wait_for_event("requestfailed", lambda r: r.method == "POST")
                await page.click("#go", no_wait_after=True)
                await asyncio.wait_for(failed, 30)
                await browser.close()  # the agent is done
            seen = await kb.intercepted_requests("exp1-write-a1-control")
            await kb.delete_session("exp1-write-a1-control")
            await kb.close()
            return seen

        seen = loop.run(go(), timeout=120)
    finally:
        loop.close()
        chromium.kill()
        chromium.wait()
    assert [(s["method"], s["body"]) for s in seen["intercepted"]] == [("POST", {"item": "mug", "qty": "2"})]
    assert any(r["url"] == site + "/order" and r["method"] == "GET" for r in seen["requests"])
    assert received == []  # nothing of the submission reached the site


def test_the_given_files_reach_the_browser_s_vm_read_only_through_kernel_s_file_api(kernel_api, tmp_path):
    """Kernel runs the agent's Playwright code in the browser's VM: the task's given files are
    written there, at the agent's own my-info path, so `setInputFiles` finds them (ClawBench's
    resume); regular files only, no link followed, each read-only."""
    standin, url, loop = kernel_api
    kb = backend(url)
    given = tmp_path / "given"
    given.mkdir()
    (given / "alex_green_resume.pdf").write_bytes(b"%PDF-1.4 resume \x00\xff")
    (given / "email_credentials.json").write_text('{"email": "cb0@d.example"}')
    (given / "link.json").symlink_to("/etc/hostname")
    (given / "folder").mkdir()

    async def go():
        await kb.create_session("exp1-upload-a1-playwright")
        names = await kb.give_files("exp1-upload-a1-playwright", given)
        await kb.delete_session("exp1-upload-a1-playwright")
        await kb.close()
        return names

    names = loop.run(go(), timeout=60)
    assert names == ["alex_green_resume.pdf", "email_credentials.json"]
    vm = standin.vm_files["kb_0001"]
    assert vm == {"/app/my-info/alex_green_resume.pdf": (b"%PDF-1.4 resume \x00\xff", "444"),
                  "/app/my-info/email_credentials.json": (b'{"email": "cb0@d.example"}', "444")}
    sent = [(method, path) for method, path, _ in standin.requests if "/fs/" in path]
    assert sent == [("PUT", "/browsers/kb_0001/fs/create_directory")] + [("PUT", "/browsers/kb_0001/fs/write_file")] * 2
