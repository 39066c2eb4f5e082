"""Write interception no page can get around (issue 47 §0): the classes of request that reached
Shoply and CodeHub past the old interceptor, sent by the agent's own code through a real sealed
Chromium, with the sites' own write logs as the oracle.

Each class runs four times: with both walls (the browser's, on every CDP target, and the site's
door, where the harness forwards the site's port), with each wall alone, and with none. With
none, every request is a real write (the log has it: the attack is real); with either wall
alone or both, the log stays empty and the harness kept the request as blocked."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from pytest_webbench.browsers.interception import Interception
from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.service_loop import ServiceLoop

SITES = Path(__file__).resolve().parents[1] / "suites" / "local-web" / "sites"
ISSUE_CHECK = {"url_pattern": r"codehub\.localhost(:\d+)?/api/v3/repos/acme/rocket/issues$", "method": "POST",
               "body": {"title": "Telemetry drops on reconnect", "labels": ["bug"]}}
ORDER_CHECK = {"url_pattern": r"shop\.localhost(:\d+)?/checkout", "method": "POST",
               "body": {"items": "BOT-GRE-L:2", "name": "Webbench", "postcode": "QX417"}}

# Each sends CodeHub the issue the check names, its description naming the class; from a CodeHub page.
ISSUE_ATTACKS = r"""
const [CH, port] = [args.codehub, new URL(args.codehub).port];
const path = '/api/v3/repos/acme/rocket/issues';
const issue = (how) => JSON.stringify({ title: 'Telemetry drops on reconnect', labels: ['bug'], body: how });
const send = (url, body, type) => fetch(url, { method: 'POST', mode: 'no-cors', body,
  headers: type ? { 'content-type': type } : {} }).then((r) => r.status, () => 'failed');
const utf16 = (text) => { const units = new Uint16Array(text.length + 1); units[0] = 0xfeff;
  for (let i = 0; i < text.length; i++) units[i + 1] = text.charCodeAt(i); return new Blob([units]); };
const out = {};
out.json = await fetch(CH + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: issue('json') })
  .then((r) => r.status, () => 'failed');
out.text_plain = await send(CH + path, issue('text_plain'), 'text/plain');
out.form_type = await send(CH + path, issue('form_type'), 'application/x-www-form-urlencoded');
out.no_type = await send(CH + path, new Blob([issue('no_type')]));
out.bom = await send(CH + path, new Blob(['\ufeff' + issue('bom')]), 'text/plain');
out.utf16 = await send(CH + path, utf16(issue('utf16')), 'text/plain');
out.nan = await send(CH + path, issue('nan').replace(/}$/, ',"n":NaN}'), 'text/plain');
const utf32 = (text) => { const bytes = new Uint8Array(text.length * 4); const view = new DataView(bytes.buffer);
  for (let i = 0; i < text.length; i++) view.setUint32(i * 4, text.charCodeAt(i)); return new Blob([bytes]); };
out.utf32 = await send(CH + path, utf32(issue('utf32')));
out.labels_object = await send(CH + path, issue('labels_object').replace('["bug"]', '{"bug": 1}'), 'text/plain');
out.ip = await send(`http://127.0.0.1:${port}${path}`, issue('ip'), 'text/plain');
out.localhost = await send(`http://localhost:${port}${path}`, issue('localhost'), 'text/plain');
out.trailing_dot = await send(`http://CodeHub.localhost.:${port}${path}`, issue('trailing_dot'), 'text/plain');
out.encoded_letter = await send(CH + path.replace('rocket', '%72ocket'), issue('encoded_letter'), 'text/plain');
out.encoded_slash = await send(CH + path.replace('/api/v3', '/api%2Fv3'), issue('encoded_slash'), 'text/plain');
out.query = await send(CH + path + '?via=query', issue('query'), 'text/plain');
out.redirect = await send(CH + path + '/', issue('redirect'), 'text/plain');
out.shared_worker = await new Promise((done) => {
  const src = `onconnect = (e) => fetch(${JSON.stringify(CH + path)}, { method: 'POST', body: ${JSON.stringify(issue('shared_worker'))} })
    .then((r) => e.ports[0].postMessage(r.status), () => e.ports[0].postMessage('failed'));`;
  const w = new SharedWorker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
  w.port.onmessage = (e) => done(e.data); w.port.start();
});
addEventListener('pagehide', () => fetch(CH + path, { method: 'POST', keepalive: true, mode: 'no-cors',
  headers: { 'content-type': 'text/plain' }, body: issue('keepalive') }));
return out;
"""
ISSUE_CLASSES = ["json", "text_plain", "form_type", "no_type", "bom", "utf16", "nan", "utf32", "labels_object", "ip", "localhost", "trailing_dot", "encoded_letter",
                 "encoded_slash", "query", "redirect", "shared_worker", "keepalive"]
# Each places the order the check names, from a Shoply page: fields as the shop normalises them,
# multipart, a redirect's next hop, and a form whose enctype the page's code changed.
ORDER_ATTACKS = r"""
const form = (fields) => { const f = new FormData(); for (const [k, v] of Object.entries(fields)) f.append(k, v); return f; };
const order = { items: 'BOT-GRE-L:2', name: 'Webbench', postcode: 'QX417' };
const post = (url, body) => fetch(url, { method: 'POST', body }).then((r) => r.status, () => 'failed');
const out = {};
out.normalised = await post('/checkout', new URLSearchParams({ ...order, name: '  Webbench ', postcode: 'qx417' }));
out.multipart = await post('/checkout', form(order));
out.redirect = await post('/checkout/', new URLSearchParams(order));
return out;
"""
ENCTYPE_SUBMIT = r"""
await page.evaluate(() => {
  const f = document.createElement('form'); f.method = 'post'; f.action = '/checkout'; f.enctype = 'multipart/form-data';
  for (const [k, v] of Object.entries({ items: 'BOT-GRE-L:2', name: 'Webbench', postcode: 'QX417' })) {
    const i = document.createElement('input'); i.name = k; i.value = v; f.append(i); }
  document.body.append(f); f.submit();
});
await page.waitForLoadState('load').catch(() => {});
await page.waitForTimeout(300);
"""
ORDER_CLASSES = 4


async def _lets_through(self, request) -> bool:
    return False


def _load(name: str):
    sys.path.insert(0, str(SITES))
    spec = importlib.util.spec_from_file_location(f"interception_{name}", SITES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    folder = tmp_path_factory.mktemp("writes")
    saved = {k: os.environ.get(k) for k in ("SITE_WRITES_LOG", "SHOP_ORDERS_LOG")}
    os.environ["SITE_WRITES_LOG"], os.environ["SHOP_ORDERS_LOG"] = str(folder / "issues.jsonl"), str(folder / "orders.jsonl")
    loop = ServiceLoop()
    urls = {name: f"http://{name}.localhost:" + loop.serve(_load(name).create_app(), name).rsplit(":", 1)[1]
            for name in ("codehub", "shop")}
    backend = LocalBackend()
    yield loop, backend, urls, folder
    loop.run(backend.close())
    loop.close()
    for key, value in saved.items():
        os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def _written(folder: Path, name: str) -> list[dict]:
    path = folder / name
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    return lines


def _attack(sites, session: str, walls: set[str], page_api_only: bool, monkeypatch) -> dict:
    loop, backend, urls, folder = sites
    loop.run(backend.create_session(session, page_api_only=page_api_only, site_urls=list(urls.values())))
    try:
        if walls:
            if "browser" not in walls:  # the browser's side lets everything go
                monkeypatch.setattr(Interception, "decide_held", _lets_through)
            loop.run(backend.intercept_requests(session, ISSUE_CHECK))
            if "door" not in walls:
                backend.pods[session].exits.guard = None
        run = lambda code, **args: loop.run(backend.execute_playwright(  # noqa: E731
            session, f"const args = {json.dumps(args)};\n" + code, timeout_sec=30), timeout=90)
        assert run(f"await page.goto({urls['codehub'] + '/acme/rocket/issues/new'!r});")["success"]
        sent = run(f"return await page.evaluate(async (args) => {{ {ISSUE_ATTACKS} }}, args);", codehub=urls["codehub"])
        assert sent["success"], sent
        assert run("await page.goto('about:blank'); await page.waitForTimeout(500);")["success"]  # the keepalive goes as the page hides
        issues = _written(folder, "issues.jsonl")
        seen = loop.run(backend.intercepted_requests(session)) if walls else None
        return {"sent": sent["result"], "issues": issues, "seen": seen}
    finally:
        monkeypatch.undo()
        loop.run(backend.delete_session(session))


def _attack_orders(sites, session: str, walls: set[str], monkeypatch) -> tuple[list, dict | None]:
    loop, backend, urls, folder = sites
    loop.run(backend.create_session(session, site_urls=list(urls.values())))
    try:
        if walls:
            if "browser" not in walls:
                monkeypatch.setattr(Interception, "decide_held", _lets_through)
            loop.run(backend.intercept_requests(session, ORDER_CHECK))
            if "door" not in walls:
                backend.pods[session].exits.guard = None
        run = lambda code: loop.run(backend.execute_playwright(session, code, timeout_sec=30), timeout=90)  # noqa: E731
        assert run(f"await page.goto({urls['shop'] + '/cart'!r});")["success"]
        sent = run(f"return await page.evaluate(async () => {{ {ORDER_ATTACKS} }});")
        assert sent["success"], sent
        assert run(ENCTYPE_SUBMIT)["success"]
        orders = _written(folder, "orders.jsonl")
        return orders, loop.run(backend.intercepted_requests(session)) if walls else None
    finally:
        monkeypatch.undo()
        loop.run(backend.delete_session(session))


@pytest.mark.chromium
@pytest.mark.seal
def test_with_no_wall_every_class_is_a_real_write(sites, monkeypatch):
    """The oracle can fail: each class, unblocked, is a write the site logs."""
    got = _attack(sites, "none", set(), False, monkeypatch)
    assert sorted(i["body"] for i in got["issues"]) == sorted(ISSUE_CLASSES), got["sent"]
    orders, _ = _attack_orders(sites, "none-orders", set(), monkeypatch)
    assert [o["name"] for o in orders] == ["Webbench"] * ORDER_CLASSES and {o["postcode"] for o in orders} == {"QX417"}


@pytest.mark.chromium
@pytest.mark.seal
@pytest.mark.parametrize("walls,page_api_only", [({"browser", "door"}, False), ({"browser", "door"}, True),
                                                 ({"browser"}, False), ({"door"}, False)],
                         ids=["both", "both-playwright-arm", "browser-alone", "door-alone"])
def test_no_class_of_write_reaches_a_site(sites, monkeypatch, walls, page_api_only):
    got = _attack(sites, "-".join(sorted(walls)) + str(page_api_only), walls, page_api_only, monkeypatch)
    assert got["issues"] == [], got["sent"]
    seen = got["seen"]
    assert sorted(r["read_as"]["body"] for r in seen["intercepted"]) == sorted(ISSUE_CLASSES)
    where = {r["where"] for r in seen["intercepted"]}
    assert where == ({"browser"} if "browser" in walls else {"site"})
    # ClawBench's own check would have let these through: the spellings its runtime reads otherwise
    missed = {r["read_as"]["body"] for r in seen["intercepted"] if not r["clawbench"]}
    assert {"query", "encoded_letter", "encoded_slash"} <= missed
    if "browser" in walls:  # the door names the site by its port, as the site is reached: these are the site's URL there
        assert {"ip", "localhost"} <= missed


@pytest.mark.chromium
@pytest.mark.seal
@pytest.mark.parametrize("walls", [{"browser", "door"}, {"browser"}, {"door"}], ids=["both", "browser-alone", "door-alone"])
def test_no_order_reaches_the_shop_in_any_spelling(sites, monkeypatch, walls):
    orders, seen = _attack_orders(sites, "orders-" + "-".join(sorted(walls)), walls, monkeypatch)
    assert orders == []
    assert len(seen["intercepted"]) == ORDER_CLASSES
    assert not seen["intercepted"][0]["clawbench"]  # "  Webbench " and "qx417": the shop reads them as the order


@pytest.mark.chromium
@pytest.mark.seal
def test_what_the_door_refuses_elsewhere_is_no_submission_and_after_the_run_nothing_is(sites, monkeypatch):
    """A WebSocket to any path is refused at the door (a channel the matcher cannot read), and kept
    apart: the order sent after it is the submission graded. Once the agent's run has ended, the
    pages' own sends are blocked and never a submission, while the harness's own reads go on."""
    loop, backend, urls, folder = sites
    loop.run(backend.create_session("late", site_urls=list(urls.values())))
    try:
        loop.run(backend.intercept_requests("late", {**ORDER_CHECK, "method": "POST"}))
        run = lambda code: loop.run(backend.execute_playwright("late", code, timeout_sec=30), timeout=90)  # noqa: E731
        assert run(f"await page.goto({urls['shop'] + '/cart'!r});")["success"]
        sent = run("""return await page.evaluate(async () => {
          const ws = await new Promise((done) => { const s = new WebSocket(location.origin.replace('http', 'ws') + '/live');
            s.onerror = () => done('refused'); s.onopen = () => done('open'); });
          const order = await fetch('/checkout', { method: 'POST', body: new URLSearchParams(
            { items: 'BOT-GRE-L:2', name: 'Webbench', postcode: 'QX417' }) }).then((r) => r.status, () => 'blocked');
          setTimeout(() => fetch('/checkout', { method: 'POST', body: new URLSearchParams(
            { items: 'BOT-GRE-L:2', name: 'Webbench', postcode: 'QX417' }) }), 1500);  // after the run has ended
          return [ws, order];
        });""")
        assert sent["success"] and sent["result"] == ["refused", "blocked"], sent
        loop.run(backend.end_agent_code("late"))
        read = loop.run(backend.check_page("late", urls["shop"] + "/cart", "return document.title"))
        assert read["value"]  # the harness's own read went on

        async def after_the_timer():  # the page's timer fires after the run ended: wait for its request
            while not (seen := await backend.intercepted_requests("late"))["after_end"]:
                await asyncio.sleep(0.1)
            return seen

        seen = loop.run(asyncio.wait_for(after_the_timer(), 30), timeout=40)
        [order] = seen["intercepted"]
        assert order["read_as"]["name"] == "Webbench" and order["where"] == "browser"
        assert [r["url"].rsplit("/", 1)[1] for r in seen["refused"]] == ["live"]
        assert [r["url"].rsplit("/", 1)[1] for r in seen["after_end"]] == ["checkout"]
        assert _written(folder, "orders.jsonl") == []
    finally:
        loop.run(backend.delete_session("late"))


SEND_CORPUS = r"""
return await page.evaluate(async (requests) => {  // sent by the page, as a page's own script sends it
  const sent = [];
  for (const [method, url, body] of requests) {
    const href = new URL(url).href.split('#')[0];  // what the browser puts on the wire: no fragment, host lowercased
    try {
      await fetch(url, { method, body: body === null ? undefined : body, mode: 'no-cors', credentials: 'omit' });
    } catch (e) { /* blocked, or no route to the case's live host: either way it was held first */ }
    sent.push(href);
  }
  return sent;
}, args.requests);
"""


@pytest.mark.chromium
@pytest.mark.seal
def test_the_generated_corpus_is_decided_in_a_live_browser_as_clawbench_s_runtime_decides_it():
    """issue 47's differential test, through a real sealed Chromium: for a sample of bundled cases
    (each set, with a body check, a query check and neither), every request of the corpus made from
    its eval_schema (test_write_match.py) is sent by page code; what the browser's interceptor
    decided was the submission (and blocked), and the body it read, equal server.py's decision and
    reading on what the browser put on the wire, request for request. (That a blocked request never
    leaves is test_no_class_of_write_reaches_a_site's, with the sites' own logs as the oracle.) The corpus's POSTs and GETs only: a page's
    PUT or DELETE to another origin goes out as a CORS preflight first (which fails here)."""
    from collections import Counter

    from pytest_webbench.design.clawbench import CASE_SETS, load_cases
    from test_write_match import _corpus, _server

    decides, parse_body, _ = _server()
    def sendable(check: dict) -> list:  # what a page can send: a GET with any body (even "") throws in fetch
        return [(m, u, b) for m, u, b in _corpus(check) if m == "POST" or (m == "GET" and b is None)]

    def matches_some(case) -> bool:  # a case whose corpus has submissions too, not only requests that go on
        check = case.eval_schema.model_dump(include={"url_pattern", "method", "body", "params"}, exclude_none=True)
        return any(decides(check, m, u.split("#")[0], b or None) for m, u, b in sendable(check))

    chosen = []
    for case_set in CASE_SETS:
        usable = [c for c in load_cases(case_set) if c.gradable and c.eval_schema.method in ("POST", "GET") and matches_some(c)]
        for want in ("body", "params", None):
            found = [c for c in usable if (want is None and not c.eval_schema.body and not c.eval_schema.params)
                     or (want is not None and getattr(c.eval_schema, want))]
            chosen += found[:1]
    assert len(chosen) >= 6, [c.name for c in chosen]
    loop, backend = ServiceLoop(), LocalBackend()
    compared = matched = 0
    try:
        for n, case in enumerate(chosen):
            check = case.eval_schema.model_dump(include={"url_pattern", "method", "body", "params"}, exclude_none=True)
            requests = sendable(check)
            session = f"corpus-{n}"
            loop.run(backend.create_session(session, site_urls=[]))
            try:
                loop.run(backend.intercept_requests(session, check))
                # as a ClawBench trial opens (trial/browser_session.py): a document made before the
                # interception began is not held by it, so the start page is opened after it
                loop.run(backend.goto(session, "about:blank"))
                run = lambda code, **args: loop.run(backend.execute_playwright(  # noqa: E731
                    session, f"const args = {json.dumps(args)};\n" + code, timeout_sec=120), timeout=180)
                out = run(SEND_CORPUS, requests=requests)
                assert out["success"], out
                seen = loop.run(backend.intercepted_requests(session))
            finally:
                loop.run(backend.delete_session(session))
            theirs = Counter()
            for (method, _, body), href in zip(requests, out["result"]):
                if decides(check, method, href, body if body else None):
                    theirs[(method, href, json.dumps(parse_body(body if body else None)))] += 1
            ours = Counter((r["method"], r["url"], json.dumps(r["body"])) for r in seen["intercepted"] if r["clawbench"])
            assert ours == theirs, (case.case_set, case.name, ours - theirs, theirs - ours)
            assert seen["blocked"] >= sum(theirs.values()) > 0 and len(seen["intercepted"]) < 100  # none past what is kept
            compared += len(requests)
            matched += sum(theirs.values())
    finally:
        loop.run(backend.close())
        loop.close()
    assert compared > 300 and matched > 30, (compared, matched)
