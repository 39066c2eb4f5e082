"""Write tasks graded ClawBench's way (grading "request"): the browser blocks the request that would
complete the task, on the harness's own connection, and the trial is graded on what it carried.
Nothing intercepted reaches the site; the agent's code can neither see the interceptor nor lift it;
a wrong submission, two, or none are graded as ClawBench grades them (the first counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.design.suite import RequestCheck, WebbenchMeta
from pytest_webbench.grading.grade import grade_trial
from pytest_webbench.service_loop import ServiceLoop

LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
FORM = """<html><body><form method=post action='/order?ref=7'><input name=item value='BOT-GRE-L'>
<input name=qty value='2'><button id=send>Send</button></form></body></html>"""
# A service worker that sends the submission itself, from outside any page, when a page asks it to.
SERVICE_WORKER = """
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('message', (e) => e.waitUntil(
  fetch('/order?ref=7', { method: 'POST', body: new URLSearchParams({ item: 'SW', qty: '1' }) })
    .then((r) => e.source.postMessage('status ' + r.status), (err) => e.source.postMessage('failed ' + err))));
"""
CHECK = {"url_pattern": r"site\.localhost(:\d+)?/order", "method": "POST", "body": None, "params": {"ref": "7"}}


@pytest.fixture(scope="module")
def shop():
    received: list[dict] = []

    async def order(request: Request):
        received.append({"path": request.url.path, "body": (await request.body()).decode()})
        return HTMLResponse("<h1>ordered</h1>")

    loop = ServiceLoop()
    app = Starlette(routes=[Route("/order", order, methods=["POST"]),
                            Route("/sw.js", lambda r: Response(SERVICE_WORKER, media_type="text/javascript")),
                            Route("/{p:path}", lambda r: HTMLResponse(FORM))])
    site = "http://site.localhost:" + loop.serve(app, "site").rsplit(":", 1)[1]
    backend = LocalBackend()
    yield loop, backend, site, received
    loop.run(backend.close())
    loop.close()


def _session(shop, name: str):
    loop, backend, site, _ = shop
    loop.run(backend.create_session(name, site_urls=[site]))
    loop.run(backend.intercept_requests(name, CHECK))
    loop.run(backend.goto(name, site + "/form"))


def _agent(shop, name: str, code: str) -> dict:
    loop, backend, *_ = shop
    return loop.run(backend.execute_playwright(name, code, timeout_sec=20), timeout=60)


SUBMIT = """
const blocked = page.waitForEvent('requestfailed', (r) => r.method() === 'POST');
await page.click('#send', { noWaitAfter: true });
return (await blocked).failure().errorText;
"""


@pytest.mark.chromium
@pytest.mark.seal
def test_a_submission_is_blocked_kept_and_never_reaches_the_site(shop):
    loop, backend, site, received = shop
    _session(shop, "one")
    out = _agent(shop, "one", SUBMIT)
    assert out["success"] and "BLOCKED_BY_CLIENT" in out["result"], out
    seen = loop.run(backend.intercepted_requests("one"))
    [first] = seen["intercepted"]
    assert first["method"] == "POST" and first["body"] == {"item": "BOT-GRE-L", "qty": "2"} and first["query"] == {"ref": "7"}
    # every request of the trial is kept (the browser's own favicon fetch aside)
    assert [r["method"] for r in seen["requests"] if not r["url"].endswith("/favicon.ico")] == ["GET", "POST"]
    assert received == []  # nothing the interceptor took reached the site


@pytest.mark.chromium
@pytest.mark.seal
def test_the_agent_s_code_cannot_lift_the_interceptor(shop):
    """Routes and Fetch on the agent's own connection are its own: unrouting, a Fetch.disable over
    raw CDP, or a route of its own that continues the request leave the harness's in place."""
    loop, backend, site, received = shop
    _session(shop, "two")
    out = _agent(shop, "two", """
    await page.context().unrouteAll().catch(() => {});
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Fetch.disable').catch(() => {});
    await page.route('**/order**', (route) => route.continue());
    """ + SUBMIT)
    assert out["success"], out
    assert len(loop.run(backend.intercepted_requests("two"))["intercepted"]) == 1 and received == []
    # a second submission is blocked too; ClawBench grades the first
    back = f"await page.waitForURL(/^chrome-error:/); await page.goto({site + '/form'!r});"  # off the blocked page's error page
    assert _agent(shop, "two", back + SUBMIT)["success"]
    assert len(loop.run(backend.intercepted_requests("two"))["intercepted"]) == 2 and received == []


@pytest.mark.chromium
@pytest.mark.seal
def test_a_submission_from_a_context_the_agent_opens_itself_is_blocked_too(shop):
    """A context the agent's code opens itself, on its own connection, is routed through the
    harness's connection too (Playwright attaches to every target of the browser it is given)."""
    loop, backend, site, received = shop
    _session(shop, "four")
    out = _agent(shop, "four", f"""
    const fresh = await browser.newContext();
    const page = await fresh.newPage();
    await page.goto({site + '/form'!r});
    """ + SUBMIT)
    assert out["success"] and "BLOCKED_BY_CLIENT" in out["result"], out
    assert len(loop.run(backend.intercepted_requests("four"))["intercepted"]) == 1 and received == []


@pytest.mark.chromium
@pytest.mark.seal
def test_a_submission_a_service_worker_sends_is_blocked_too(shop):
    """A service worker's fetch belongs to no page: the context's route sees it all the same."""
    loop, backend, site, received = shop
    _session(shop, "five")
    out = _agent(shop, "five", """
    return await page.evaluate(async () => {
      const reg = await navigator.serviceWorker.register('/sw.js');
      await navigator.serviceWorker.ready;
      return await new Promise((done) => {
        navigator.serviceWorker.addEventListener('message', (e) => done(e.data));
        reg.active.postMessage('go');
      });
    });""")
    assert out["success"] and out["result"].startswith("failed"), out
    [sent] = loop.run(backend.intercepted_requests("five"))["intercepted"]
    assert sent["body"] == {"item": "SW", "qty": "1"} and received == []


@pytest.mark.chromium
@pytest.mark.seal
def test_a_submission_sent_by_a_beacon_or_from_a_worker_is_blocked_too(shop):
    loop, backend, site, received = shop
    _session(shop, "three")
    beacon = _agent(shop, "three", "return await page.evaluate(() => navigator.sendBeacon('/order?ref=7', "
                                   "new URLSearchParams({item: 'BEACON', qty: '1'})));")
    assert beacon["success"], beacon
    worker_js = (f"fetch('{site}/order?ref=7', {{method: 'POST', body: new URLSearchParams({{item: 'WORKER', qty: '1'}})}})"
                 ".then((r) => postMessage('status ' + r.status), (e) => postMessage('failed ' + e))")
    worker = _agent(shop, "three", "return await page.evaluate((src) => new Promise((done) => { const w = new Worker("
                                   "URL.createObjectURL(new Blob([src], {type: 'text/javascript'}))); w.onmessage = (e) => done(e.data); }), "
                                   f"{worker_js!r});")
    assert worker["success"] and worker["result"].startswith("failed"), worker
    kept = [r["body"]["item"] for r in loop.run(backend.intercepted_requests("three"))["intercepted"]]
    assert kept == ["BEACON", "WORKER"] and received == []


def _meta(**expect) -> WebbenchMeta:
    return WebbenchMeta(site="shop", grading="request", answer={}, turn_cap=10, spend_limit_usd=1.0, tool_batch="shop",
                        request=RequestCheck(url_pattern="/checkout", method="POST", expect=expect))


def _value(*bodies: dict) -> dict:
    return {"submissions": len(bodies),
            "submitted": {"method": "POST", "url": "http://shop.localhost/checkout", "body": bodies[0], "query": {}} if bodies else None}


def test_the_grade_of_a_submission_as_clawbench_grades_it():
    meta = _meta(items="BOT-GRE-L:2", name="Webbench")
    right = {"items": "BOT-GRE-L:2", "name": "Webbench", "postcode": "QX417"}
    assert grade_trial(meta, b"{}", 3, page_value=_value(right)).passed
    wrong = grade_trial(meta, b"{}", 3, page_value=_value({**right, "items": "BOT-GRE-L:3"}))
    assert (wrong.passed, wrong.stop_reason) == (False, "wrong_submission") and "BOT-GRE-L:3" in wrong.detail
    none = grade_trial(meta, b'{"done": true}', 3, page_value=_value())  # its claim of having ordered counts for nothing
    assert (none.passed, none.stop_reason) == (False, "no_submission")
    # submitted twice, wrongly first: the first is graded
    twice = grade_trial(meta, b"{}", 3, page_value={**_value({**right, "name": "Someone"}), "submissions": 2})
    assert twice.stop_reason == "wrong_submission"
    unread = grade_trial(meta, b"{}", 3, page_value=None, page_error="the browser went away")
    assert unread.stop_reason == "unreadable_page"
    assert grade_trial(meta, b"{}", 0, page_value=_value(right)).stop_reason == "no_browser_call"


@pytest.mark.parametrize("body", [[1], "items=BOT-GRE-L:2", 7, True])
def test_a_submission_whose_body_holds_no_fields_is_graded_not_an_error(body):
    """The body is the agent's: a list, a string, a number. Merging it as fields raised, and the trial was errored."""
    graded = grade_trial(_meta(items="BOT-GRE-L:2"), b"{}", 3, page_value=_value(body))
    assert (graded.passed, graded.stop_reason) == (False, "wrong_submission")


def test_a_request_check_is_validated_with_the_task():
    with pytest.raises(ValueError, match="grading 'request' goes with"):
        WebbenchMeta(site="shop", grading="request", answer={}, turn_cap=10, spend_limit_usd=1.0, tool_batch="shop")
    with pytest.raises(ValueError, match="not a regular expression"):
        RequestCheck(url_pattern="shop\\.(com", method="POST")


@pytest.mark.chromium
@pytest.mark.seal
def test_the_local_write_task_passes_in_every_arm_and_no_order_reaches_the_shop(pytester, tmp_path, monkeypatch):
    orders = tmp_path / "orders.jsonl"
    monkeypatch.setenv("SHOP_ORDERS_LOG", str(orders))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                           "--suite", str(LOCAL_WEB), "--runner", "reference", "--experiment-id", "write",
                                           "-k", "shop-checkout")
    result.assert_outcomes(passed=3)
    assert not orders.exists()  # every order was blocked in the browser
    exp = pytester.path / "results" / "write"
    for arm in ("control", "treatment", "playwright"):
        record = json.loads((exp / "trials" / f"shop-checkout-a1-{arm}.json").read_text())
        assert record["page_value"]["submitted"]["body"] == {"items": "BOT-GRE-L:2", "name": "Webbench", "postcode": "QX417"}
        kept = json.loads((exp / "jobs" / arm / f"shop-checkout-a1-{arm}" / "requests.json").read_text())
        assert len(kept["intercepted"]) == 1 and any(r["url"].endswith("/checkout") for r in kept["requests"])
    # the same site without the interceptor does receive an order: the log above could have caught one
    import importlib.util
    import sys

    sys.path.insert(0, str(LOCAL_WEB / "sites"))
    spec = importlib.util.spec_from_file_location("shop_site", LOCAL_WEB / "sites" / "shop.py")
    site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(site)
    from starlette.testclient import TestClient

    client = TestClient(site.create_app())
    client.post("/cart/add", data={"sku": "BOT-GRE-L", "qty": "2"})
    client.post("/checkout", data={"items": "BOT-GRE-L:2", "name": "Webbench", "postcode": "QX417"})
    assert json.loads(orders.read_text())["items"] == "BOT-GRE-L:2"



@pytest.mark.chromium
@pytest.mark.seal
def test_claw_eval_s_submit_page_is_clawbench_s_own_and_its_answer_is_intercepted(shop):
    """claw-eval's cases send the agent to ClawBench's runtime submit page (127.0.0.1:7878): the
    interceptor serves the package's own page, and the answer's POST is the submission."""
    from pytest_webbench.design.clawbench import SUBMIT_PAGE_URLS, runtime_submit_page

    loop, backend, site, received = shop
    page = runtime_submit_page()
    assert "Submit Final Answer" in page and "/api/task-submit" in page
    loop.run(backend.create_session("ce", site_urls=[site]))
    loop.run(backend.intercept_requests("ce", {"url_pattern": "/api/task-submit", "method": "POST"},
                                        served=dict.fromkeys(SUBMIT_PAGE_URLS, page)))
    out = _agent(shop, "ce", """
    await page.goto('http://127.0.0.1:7878/submit');
    await page.fill('#answer', 'Log4Shell is CVE-2021-44228, CVSS 10.0');
    const blocked = page.waitForEvent('requestfailed', (r) => r.method() === 'POST');
    await page.click('button[type=submit]');
    await blocked;
    return await page.textContent('#status');""")
    assert out["success"] and out["result"] == "Submitted.", out
    [sent] = loop.run(backend.intercepted_requests("ce"))["intercepted"]
    assert sent["url"] == "http://127.0.0.1:7878/api/task-submit" and sent["body"] == {"answer": "Log4Shell is CVE-2021-44228, CVSS 10.0"}
    assert sent["clawbench"] and received == []


def test_claw_eval_s_cases_are_planned_with_the_submit_page():
    from pytest_webbench.design.suite import load_suite

    tasks = load_suite(Path(__file__).resolve().parents[1] / "suites" / "clawbench", case_set="claw-eval").tasks
    assert len(tasks) == 19 and all(t.meta.submit_page and t.meta.start_blank for t in tasks)


@pytest.mark.chromium
@pytest.mark.seal
def test_the_agent_s_code_uploads_a_file_it_was_given_and_the_upload_is_intercepted(shop, tmp_path):
    """ClawBench's cases give a resume to upload: the agent's browser code finds the task's given files
    at its own my-info path, read-only, in the page API's setInputFiles (the playwright arm's too)."""
    loop, backend, site, received = shop
    given = tmp_path / "given"
    given.mkdir()
    (given / "alex_green_resume.pdf").write_bytes(b"%PDF-1.4 resume of Alex Green")
    loop.run(backend.create_session("up", page_api_only=True, site_urls=[site]))
    loop.run(backend.give_files("up", given))
    loop.run(backend.intercept_requests("up", {"url_pattern": r"/order", "method": "POST"}))
    loop.run(backend.goto("up", site + "/form"))
    out = _agent(shop, "up", """
    await page.evaluate(() => { const f = document.forms[0]; f.enctype = 'multipart/form-data';
      const i = document.createElement('input'); i.type = 'file'; i.name = 'resume'; f.append(i); });
    await page.setInputFiles('input[type=file]', '/app/my-info/alex_green_resume.pdf');
    const blocked = page.waitForEvent('requestfailed', (r) => r.method() === 'POST');
    await page.click('#send', { noWaitAfter: true });
    await blocked;
    return 'sent';""")
    assert out["success"], out
    [sent] = loop.run(backend.intercepted_requests("up"))["intercepted"]
    assert "%PDF-1.4 resume of Alex Green" in sent["raw_body"] and received == []
    written = _agent(shop, "up", "const fs = await import('fs'); try { fs.writeFileSync('/app/my-info/x', 'y'); return 'wrote' }"
                                 " catch (e) { return e.code }")
    assert written.get("result") != "wrote"  # read-only (or out of the page API's reach altogether)
