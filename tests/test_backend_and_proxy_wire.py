"""The local backend behind its Kernel-shaped MCP server, reached through the proxy's HTTP
endpoint by the real `mcp` SDK client, under both handshakes."""

import json

import pytest
from mcp import Client

from pytest_webbench.design.arms import arm_policy
from pytest_webbench.browsers.local import LocalBackend
from pytest_webbench.browsers.mcp_server import build_server
from pytest_webbench.proxy.http_endpoint import ProxyRoutes
from pytest_webbench.proxy.log import CallLog, read_call_log
from pytest_webbench.proxy.relay import ProxySession
from pytest_webbench.proxy.upstream import HttpUpstream
from pytest_webbench.service_loop import ServiceLoop

pytestmark = pytest.mark.chromium

PAGE = """<html><head><title>T</title></head><body><h1 id=h>Hello</h1><script>
document.modelContext.registerTool({name: 'native_echo', description: 'echo', inputSchema: {type: 'object'},
  execute: async (i) => ({echo: i})});
</script></body></html>"""
BATCH = """[{kind: 'page', match: {url_patterns: ['http://site.localhost/*']},
  tool: {name: 'injected_title', description: 'title', inputSchema: {type: 'object'}},
  execute: async () => ({title: document.title})}]"""


@pytest.fixture(scope="module")
def stack():
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    loop = ServiceLoop()
    backend = LocalBackend()
    site = loop.serve(Starlette(routes=[Route("/{p:path}", lambda r: HTMLResponse(PAGE))]), "site")
    mcp_url = loop.serve(build_server(backend).streamable_http_app(json_response=True, stateless_http=True), "mcp") + "/mcp"
    routes = ProxyRoutes()
    proxy = loop.serve(routes.app, "proxy")
    url = "http://site.localhost:" + site.rsplit(":", 1)[1] + "/x"
    loop.run(backend.create_session("S1", site_urls=[url]))
    loop.run(backend.execute_playwright("S1", f"await page.goto({url!r})"))
    loop.run(backend.add_custom_tools("S1", "site", BATCH, True))
    yield loop, backend, routes, proxy, mcp_url
    loop.run(backend.close())
    loop.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_through_proxy(stack, tmp_path, mode):
    loop, backend, routes, proxy, mcp_url = stack
    session = ProxySession(arm_policy("control"), "S1", HttpUpstream(mcp_url), CallLog(tmp_path / "log.jsonl"), trial=f"t-{mode}")
    path = routes.add(f"t-{mode}", session)

    async def go():
        async with Client(proxy + path, mode=mode) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"execute_playwright_code", "browser_repl", "computer_action", "webmcp"}
            out = await client.call_tool("execute_playwright_code", {"session_id": "S1", "code": "return await page.title()"})
            assert json.loads(out.content[0].text)["result"] == "T"
            listed = json.loads((await client.call_tool("webmcp", {"session_id": "S1", "action": "list"})).content[0].text)
            by_name = {t["tool"]["name"]: t for t in listed["tools"]}
            assert by_name["injected_title"]["source"]["custom"]["namespace"] == "site"
            assert "custom" not in by_name["native_echo"]["source"]
            for name in ("injected_title", "native_echo"):
                out = await client.call_tool("webmcp", {"session_id": "S1", "action": "invoke", "tool_ref": by_name[name]["tool_ref"], "input": {}})
                assert json.loads(out.content[0].text)["status"] == "completed"
            from mcp import MCPError

            with pytest.raises(MCPError, match="Unknown tool"):  # not offered to the arm: an unknown tool, -32602
                await client.call_tool("manage_browsers", {"session_id": "S1", "action": "create"})

    loop.run(go(), timeout=60)
    assert session.stats.webmcp_invokes == {"injected:completed": 1, "native:completed": 1}
    records = read_call_log(tmp_path / "log.jsonl").records
    assert [r.rule for r in records if r.decision == "rejected"] == ["tool_not_in_arm"]


def test_backend_repl_persists_and_stale_refs_are_refused(stack):
    loop, backend, *_ = stack
    loop.run(backend.repl("S1", "const answer = 41", reset=True))
    out = loop.run(backend.repl("S1", "repl.write(answer + 1)"))
    assert out["success"] and out["content"][0]["text"] == "42"
    ref = loop.run(backend.webmcp_list("S1"))["tools"][0]["tool_ref"]
    loop.run(backend.execute_playwright("S1", "await page.reload()"))
    with pytest.raises(Exception, match="stale"):
        loop.run(backend.webmcp_invoke("S1", ref, {}))


def test_backend_bounds_runaway_code(stack):
    loop, backend, *_ = stack
    out = loop.run(backend.execute_playwright("S1", "while (true) {}", timeout_sec=1))
    assert not out["success"] and "timed out" in out["error"]
    out = loop.run(backend.execute_playwright("S1", "await new Promise(r => setTimeout(r, 5000))", timeout_sec=1))
    assert not out["success"] and "timed out" in out["error"]


def test_malformed_tool_batch_is_a_clear_error(stack):
    loop, backend, *_ = stack
    with pytest.raises(Exception, match="url_patterns must be a non-empty array"):
        loop.run(backend.add_custom_tools("S1", "bad", "[{kind: 'page', match: {}, tool: {name: 'x', description: ''}, execute() {}}]"))
    with pytest.raises(Exception, match="did not evaluate"):
        loop.run(backend.add_custom_tools("S1", "bad", "[{ nope"))


def test_the_playwright_arm_s_session_lacks_the_members_that_go_around_the_page(stack):
    """Spellings the proxy's static rule cannot see (names built at run time) still find nothing:
    the members are missing from the code's objects, and from objects reached through them."""
    loop, backend, *_ = stack
    from pytest_webbench.proxy.rules import goes_around_the_page

    answers = "http://site.localhost:" + stack[3].rsplit(":", 1)[1]  # any page that answers: the proxy's 404 will do
    loop.run(backend.create_session("PW", page_api_only=True, site_urls=[answers]))
    loop.run(backend.create_session("FREE", site_urls=[answers]))
    try:
        hidden = {
            "page": "return typeof page[['req', 'uest'].join('')]",
            "browser": "return typeof browser[['newBrowser', 'CDPSession'].join('')]",
            "context via browser": "return typeof browser.contexts()[0][['newCDP', 'Session'].join('')]",
            "context via page": "return typeof page.context()[['newCDP', 'Session'].join('')]",
            "page via locator": "return typeof page.locator('h1').page()[['ro', 'ute'].join('')]",
            "context": "return typeof context[['route', 'FromHAR'].join('')]",
            "a private member": "return typeof page['_browser' + 'Context']",
            "a descriptor": "return typeof Object.getOwnPropertyDescriptor(page, ['req', 'uest'].join(''))",
        }
        for where, code in hidden.items():
            assert goes_around_the_page(code) is None  # beyond the static rule
            restricted = loop.run(backend.execute_playwright("PW", code))
            assert not restricted["success"] and "not available in this arm" in restricted["error"], (where, restricted)
            free = loop.run(backend.execute_playwright("FREE", code))
            assert free["success"] and free["result"] in ("object", "function"), (where, free)
        page_api = ("await page.setContent('<h1 id=h>Hello</h1>'); "
                    "return [await page.locator('#h').textContent(), page.context().pages().length, typeof browser.version, "
                    "await page.evaluate((el) => el.id, await page.$('#h'))]")
        assert loop.run(backend.execute_playwright("PW", page_api))["result"] == ["Hello", 1, "function", "h"]
        # a response's own request() is part of the page API
        asked = loop.run(backend.execute_playwright("PW", f"return (await page.goto({answers!r})).request().method()"))
        assert asked["success"] and asked["result"] == "GET", asked
    finally:
        loop.run(backend.delete_session("PW"))
        loop.run(backend.delete_session("FREE"))


# The walk: from page, context and browser, and from everything events hand their listeners, every
# getter and every method that takes no argument and changes nothing (the pattern names what would
# change the page or wait on it), three steps deep. Whatever class it reaches, today's or a later
# Playwright's, must be wrapped: a private member read from it is refused.
WALK = r"""
const reached = new Set(), unwrapped = [], payloads = [];
const events = ['console', 'dialog', 'request', 'response', 'requestfinished', 'requestfailed', 'frameattached',
  'framenavigated', 'load', 'domcontentloaded', 'worker', 'popup', 'websocket', 'pageerror'];
for (const e of events) page.on(e, (x) => { payloads.push(x); if (e === 'dialog') x.dismiss().catch(() => {}); });
for (const e of ['page', 'request', 'response', 'console']) context.on(e, (x) => payloads.push(x));
page.on('console', function () { payloads.push(this); });  // the emitter, as `this`
await page.goto(SITE);
await page.setContent(`<iframe srcdoc="<p>f</p>"></iframe><script>console.log('hi', {a: 1});
  new Worker(URL.createObjectURL(new Blob(['postMessage(1)'])));</script>`);
await page.evaluate(() => { setTimeout(() => { alert('x'); throw new Error('boom'); }, 0); });
await page.waitForTimeout(500);
const skip = /^(close|delete|clear|reload|go[A-Z]|goto|back|forward|pause|click|dblclick|tap|press|type|fill|check|uncheck|select|focus|blur|hover|dispatch|scroll|set|add|remove|route|unroute|wait|start|stop|expose|emulate|bring|grant|dismiss|accept|cancel|save|screenshot|pdf|evaluate|drag|highlight|abort|continue|fulfill|fallback|new|storageState|body|text|json|finished|all|innerHTML|innerText|inputValue|content|ariaSnapshot|is[A-Z]|count|boundingBox|selectText|title|arrayBuffer|createReadStream|path|failure|launch|connect|off|on|once|prepend|listener|emit|request|response$)/;
let frontier = [page, context, browser, ...payloads];
for (let depth = 0; depth < 3 && frontier.length; depth++) {
  const next = [];
  for (const o of frontier) {
    if (!o || typeof o !== 'object' || reached.has(o) || Array.isArray(o)) continue;
    const proto = Object.getPrototypeOf(o);  // (the runner's realm: not this scope's Object or Error)
    if (proto === null || Object.getPrototypeOf(proto) === null || ArrayBuffer.isView(o)) continue;  // plain data
    if (/^\[object (Error|Map|Set|Date|RegExp|WeakMap|WeakSet)\]$/.test(Object.prototype.toString.call(o))) continue;
    reached.add(o);
    let ok = false;
    try { void o['_' + 'x']; } catch (e) { ok = /not available in this arm/.test(String(e)); }
    if (!ok) unwrapped.push(o.constructor && o.constructor.name);
    const names = new Set();
    for (let p = Object.getPrototypeOf(o); p && p !== Object.prototype; p = Object.getPrototypeOf(p))
      for (const n of Object.getOwnPropertyNames(p)) if (n !== 'constructor' && !n.startsWith('_')) names.add(n);
    for (const n of names) {
      if (skip.test(n)) continue;
      let v;
      try { v = o[n]; if (typeof v === 'function') v = v.length === 0 ? v.call(o) : undefined; } catch (e) { continue; }
      try { v = await Promise.race([Promise.resolve(v), new Promise((r) => setTimeout(() => r(undefined), 200))]); } catch (e) { continue; }
      for (const x of Array.isArray(v) ? v : [v]) next.push(x);
    }
  }
  frontier = next;
}
let viaEvent = 'not tried';
const message = payloads.find((x) => x && x.constructor && /Console/.test(x.constructor.name));
try { viaEvent = typeof message.page().context()[['newCDP', 'Session'].join('')]; } catch (e) { viaEvent = String(e.message); }
// what the code itself gives Playwright: a predicate in an options object, a getter or method it
// adds (called with the object as `this`), a method patched on the class
const handed = [];
const predicate = page.waitForEvent('console', {predicate: (m) => { handed.push(m); return true; }});
await page.evaluate(() => console.log('again'));
await predicate;
const refusals = [];
for (const f of [() => Object.defineProperty(page, 'leak', {get() { handed.push(this); return 1; }}),
                 () => { page.grab = function () { handed.push(this); }; },
                 () => { Object.getPrototypeOf(page).title = function () { handed.push(this); }; }]) {
  try { f(); } catch (e) { refusals.push(String(e.message)); }
}
for (const o of handed) { try { void o['_' + 'x']; unwrapped.push('handed ' + o.constructor.name); } catch (e) {} }
return {reached: reached.size, unwrapped, classes: [...new Set([...reached].map((o) => o.constructor.name))], viaEvent, refusals};
"""


def test_every_object_the_playwright_arm_s_code_can_reach_is_wrapped(stack):
    """Walked, not listed: from the scope's objects, what events hand listeners (a console message,
    a dialog, a request, a worker, the emitter as `this`), and what their getters and relations
    return; and what the code hands Playwright (a predicate inside an options object) or puts on
    its objects and classes. A console message's page() once gave the real page, whose context
    opened a CDP session; a predicate's argument, or a getter the code added, the real objects."""
    loop, backend, *_ = stack
    site = "http://site.localhost:" + stack[3].rsplit(":", 1)[1]
    loop.run(backend.create_session("WALK", page_api_only=True, site_urls=[site]))
    try:
        walked = loop.run(backend.execute_playwright("WALK", f"const SITE = {site!r};\n" + WALK, timeout_sec=60), timeout=90)
    finally:
        loop.run(backend.delete_session("WALK"))
    assert walked["success"], walked
    found = walked["result"]
    assert found["unwrapped"] == [], found
    assert "not available in this arm" in found["viaEvent"], found
    assert len(found["refusals"]) == 3 and all("not available in this arm" in r for r in found["refusals"]), found
    # the walk went where the route went, and further
    classes = {c.lstrip("_").rstrip("0123456789") for c in found["classes"]}
    assert found["reached"] >= 15 and {"ConsoleMessage", "Request", "Frame", "Worker", "Dialog"} <= classes, found
