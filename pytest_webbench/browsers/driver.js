// The local browser backend's Node side, the harness's own: one process per pytest worker, holding
// the harness's connection to each trial's Chromium (one Chromium per trial, each in its own seal:
// browsers/pod.py). Setup, the treatment's tool batch, WebMCP calls, computer actions, the trace,
// screenshots and the page check all go through it. Agents' code never runs here: it runs in the
// trial's code runner (sealed/runner.js), in a seal of its own, over another connection.
//
// Protocol: one JSON object per line on stdin, {id, op, ...args}; one reply per line on stdout,
// {id, ok: true, result} or {id, ok: false, error}. Nothing else is ever written to stdout.
'use strict';
const vm = require('vm');
const W = require('./sealed/webmcp.js');
const { guardWorkers, serviceWorkerScript } = require('./worker_guard.js');

const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.WEBBENCH_PLAYWRIGHT_PACKAGE);

const sessions = new Map();

// What a session's trace may put on this host while it records: Playwright writes the agent's
// request and response bodies and every frame into the session's artifacts folder as they happen
// (three minutes of large POSTs made 961 MB), so past MAX_ARTIFACT_BYTES the recording stops, what
// it holds is saved, and the trial is flagged (local.py). Checked every ARTIFACT_CHECK_MS: a trace
// grows at most what the agent's traffic carries in that while past the bound.
const ARTIFACTS_ROOT = process.env.WEBBENCH_ARTIFACTS; // the driver's own folder (node_driver.py)
const MAX_ARTIFACT_BYTES = Number(process.env.WEBBENCH_MAX_ARTIFACT_BYTES || 256 * 1024 * 1024);
const ARTIFACT_CHECK_MS = 200;

async function folderBytes(dir) {
  let total = 0;
  const todo = [dir];
  while (todo.length) {
    const folder = todo.pop();
    const entries = await fs.promises.readdir(folder, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const full = path.join(folder, e.name);
      if (e.isDirectory()) todo.push(full);
      else {  // what it takes on disk: 20,000 tiny resources take a block each, five times their bytes
        const st = await fs.promises.lstat(full).catch(() => ({ size: 0, blocks: 0 }));
        total += Math.max(st.size, (st.blocks || 0) * 512);
      }
    }
  }
  return total;
}

async function cutTrace(id, s, bytes) {
  s.tracing = false;
  s.traceCut = { bytes, path: path.join(ARTIFACTS_ROOT, `cut-${s.artifactsName}.zip`) };
  s.traceCut.saved = s.context.tracing.stop({ path: s.traceCut.path }).then(() => true, () => false);
}

let checking = false;
setInterval(async () => {
  if (checking) return;
  checking = true;
  try {
    for (const [id, s] of sessions) {
      if (!s.tracing || !s.artifactsDir) continue;
      const bytes = await folderBytes(s.artifactsDir);
      if (s.tracing && bytes > MAX_ARTIFACT_BYTES) await cutTrace(id, s, bytes);
    }
  } finally {
    checking = false;
  }
}, ARTIFACT_CHECK_MS).unref();

function session(id) {
  const s = sessions.get(id);
  if (!s) throw new Error(`unknown browser session ${JSON.stringify(id)}`);
  if (s.crashed) throw Object.assign(new Error(`browser session ${id} lost its browser (Chromium exited)`), { code: 'browser_crashed' });
  return s;
}

// Kernel's url_patterns are globs `scheme://host/path` (not URLPattern): scheme http|https|*,
// host exact, *.example.com or *, path compared with path + query, fragments ignored. Local sites
// listen on ports chosen at run time, so a pattern host without a port matches any port of a
// loopback host (localhost, *.localhost, 127.0.0.1); elsewhere the port must match.
function urlGlobMatches(pattern, href) {
  const m = /^(\*|https?):\/\/([^/]+)(\/.*)$/.exec(pattern);
  if (!m) return false;
  const url = new URL(href);
  const [, scheme, hostPattern, pathPattern] = m;
  if (scheme === '*' ? !/^https?:$/.test(url.protocol) : url.protocol !== scheme + ':') return false;
  const [patternHost, patternPort] = hostPattern.split(':');
  const host = url.hostname;
  const loopback = host === 'localhost' || host.endsWith('.localhost') || host === '127.0.0.1';
  if (patternPort !== undefined ? url.port !== patternPort : !(loopback || url.port === '')) return false;
  const hostOk = patternHost === '*' || host === patternHost
    || (patternHost.startsWith('*.') && (host === patternHost.slice(2) || host.endsWith(patternHost.slice(1))));
  if (!hostOk) return false;
  const escaped = pathPattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp('^' + escaped.join('.*') + '$').test(url.pathname + url.search);
}

// Kernel's custom tools: `source` evaluates to an array of {kind, match: {url_patterns}, tool:
// {name, description, inputSchema}, execute}. Every matching document registers the page tools
// through WebMCP, so they are listed and invoked exactly like the site's own tools.
function customToolScript(namespace, source) {
  return `(() => {
  const namespace = ${JSON.stringify(namespace)};
  const urlGlobMatches = ${urlGlobMatches.toString()};
  const register = () => {
    if (!document.modelContext || (window.__webbenchCustom ||= {})[namespace]) return;
    window.__webbenchCustom[namespace] = true;
    const tools = (${source});
    for (const entry of tools) {
      if (!entry.match.url_patterns.some((p) => urlGlobMatches(p, location.href))) continue;
      document.modelContext.registerTool({
        name: entry.tool.name,
        description: entry.tool.description,
        inputSchema: entry.tool.inputSchema,
        execute: (input) => entry.execute(input, { matches: [{ url: location.href }] }),
      });
    }
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', register);
  else register();
})();`;
}

// Validates a batch the way Kernel's API does (400 on a malformed definition) without running it.
function customDefinitions(namespace, source) {
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(namespace || '')) throw new Error('namespace must be 1-128 of [A-Za-z0-9_.-]');
  let tools;
  try {
    tools = vm.runInNewContext(`(${source})`, {}, { timeout: 1000 });
  } catch (e) {
    throw new Error(`source did not evaluate: ${e.message}`);
  }
  if (!Array.isArray(tools) || tools.length === 0) throw new Error('source must evaluate to a non-empty array of custom tool definitions');
  const seen = new Set();
  return tools.map((entry, i) => {
    const where = `definition ${i}`;
    if (!entry || typeof entry !== 'object') throw new Error(`${where} is not an object`);
    if ((entry.kind || 'page') !== 'page') throw new Error(`${where}: kind ${JSON.stringify(entry.kind)} is not supported by the local backend (page tools only)`);
    if (!entry.match || !Array.isArray(entry.match.url_patterns) || entry.match.url_patterns.length === 0) {
      throw new Error(`${where}: definition.match.url_patterns must be a non-empty array`);
    }
    if (!entry.tool || typeof entry.tool.name !== 'string' || !entry.tool.name) throw new Error(`${where}: tool.name is required`);
    if (typeof entry.tool.description !== 'string') throw new Error(`${where}: tool.description is required`);
    if (typeof entry.execute !== 'function') throw new Error(`${where}: execute must be a function`);
    if (seen.has(entry.tool.name)) throw new Error(`${where}: duplicate tool name ${entry.tool.name}`);
    seen.add(entry.tool.name);
    const id = 'ct_' + 'a' + require('crypto').createHash('sha256').update(namespace + '/' + entry.tool.name).digest('hex').replace(/[^a-z0-9]/g, '').slice(0, 22);
    return {
      id, namespace, kind: 'page', match: { url_patterns: entry.match.url_patterns },
      tool: { name: entry.tool.name, description: entry.tool.description, inputSchema: entry.tool.inputSchema || { type: 'object' } },
    };
  });
}

async function clickOrMove(page, a, click) {
  await page.mouse.move(a.x, a.y);
  if (click) await page.mouse.click(a.x, a.y, { button: a.button || 'left', clickCount: a.num_clicks || 1 });
}

const ACTIONS = {
  click_mouse: (page, a) => clickOrMove(page, a, true),
  sleep: (page, a) => new Promise((r) => setTimeout(r, a.duration_ms || 0)),
  move_mouse: (page, a) => clickOrMove(page, a, false),
  type_text: (page, a) => page.keyboard.type(a.text, { delay: a.delay || 0 }),
  press_key: async (page, a) => {
    for (const key of a.keys || [a.key]) await page.keyboard.press(key);
  },
  scroll: async (page, a) => {
    if (a.x !== undefined) await page.mouse.move(a.x, a.y);
    await page.mouse.wheel(a.delta_x || 0, a.delta_y || 0);
  },
  drag_mouse: async (page, a) => {
    const [first, ...rest] = a.path;
    await page.mouse.move(first[0], first[1]);
    await page.mouse.down();
    for (const [x, y] of rest) await page.mouse.move(x, y);
    await page.mouse.up();
  },
  screenshot: async (page, a) => ({
    image: (await page.screenshot({ type: 'png', clip: a.region })).toString('base64'), mime_type: 'image/png',
  }),
};

// A held request's body is carried to the matcher up to its bound (grading/write_match.py MAX_READ_BODY);
// what one session holds, and one reply carries, stays far under the reply line's limit (node_driver.py).
const MAX_HELD_BODY = 8 * 1024 * 1024;
const MAX_HELD_BYTES = 64 * 1024 * 1024;
const MAX_HELD = 2000;
const MAX_REPLY_BODY = 12 * 1024 * 1024;

const OPS = {
  async ping() {
    return { pong: true };
  },

  // The trial's Chromium, started in its seal by the harness (pod.py): this connection is made
  // before the agent starts and held to the end, so it is the browser the harness started.
  async open({ session: id, cdp_url, trace }) {
    if (sessions.has(id)) throw new Error(`browser session ${id} already exists`);
    // the session's own artifacts folder, so what its trace writes is measured apart and goes with it
    const artifactsDir = ARTIFACTS_ROOT ? await fs.promises.mkdtemp(path.join(ARTIFACTS_ROOT, 'session-')) : undefined;
    const browser = await chromium.connectOverCDP(cdp_url, { artifactsDir });
    const context = browser.contexts()[0];
    const s = W.newSession(id, browser, context);
    s.artifactsDir = artifactsDir;
    s.cdpUrl = cdp_url;
    s.artifactsName = artifactsDir ? path.basename(artifactsDir) : id.replace(/[^A-Za-z0-9_-]/g, '_');
    s.customSources = new Map(); // namespace -> source
    sessions.set(id, s);
    if (trace) {
      await context.tracing.start({ screenshots: true, snapshots: true, title: id });
      s.tracing = true;
    }
    if (context.pages().length === 0) await context.newPage();
    return { session_id: id };
  },

  // Is the session still there, and its Chromium alive? (Asked after the agent stops.)
  async status({ session: id }) {
    const s = sessions.get(id);
    return { open: Boolean(s), crashed: Boolean(s && (s.crashed || !s.browser.isConnected())) };
  },

  // Playwright's trace.zip of the session so far; tracing ends with it.
  async trace_save({ session: id, path: target }) {
    const s = session(id);
    if (s.traceCut) { // stopped at its bound: what it held then
      const cut = s.traceCut;
      s.traceCut = null;
      if (!(await cut.saved)) return { saved: false, cut_bytes: cut.bytes };
      await fs.promises.rename(cut.path, target).catch(async () => {
        await fs.promises.copyFile(cut.path, target);
        await fs.promises.rm(cut.path, { force: true });
      });
      return { saved: true, cut_bytes: cut.bytes };
    }
    if (!s.tracing) return { saved: false };
    s.tracing = false;
    await s.context.tracing.stop({ path: target });
    return { saved: true };
  },

  async close({ session: id }) {
    const s = sessions.get(id);
    if (!s) return { closed: false };
    sessions.delete(id);
    if (s.workerGuard) s.workerGuard.close();
    await s.browser.close().catch(() => {});
    if (s.traceCut) await s.traceCut.saved;
    for (const left of [s.artifactsDir, s.traceCut && s.traceCut.path]) {
      if (left) await fs.promises.rm(left, { recursive: true, force: true }).catch(() => {});
    }
    return { closed: true };
  },

  // The harness's own navigation and reads (setup, the page state after the agent): never agent code.
  async goto({ session: id, url }) {
    const page = W.currentPage(session(id));
    await page.goto(url, { waitUntil: 'load' });
    return { url: page.url() };
  },

  async evaluate({ session: id, script }) {
    const page = W.currentPage(session(id));
    return { value: W.toJsonValue(await page.evaluate(`(async () => {\n${script}\n})()`)) };
  },

  async computer({ session: id, actions }) {
    const s = session(id);
    const page = W.currentPage(s);
    const results = [];
    for (const a of actions || []) {
      const act = Object.prototype.hasOwnProperty.call(ACTIONS, a.type) ? ACTIONS[a.type] : null;
      if (!act) throw new Error(`unknown computer action type ${JSON.stringify(a.type)}`);
      const out = await act(page, a[a.type] || {});
      results.push({ type: a.type, ...(out || {}) });
    }
    return { results, viewport: await page.evaluate(() => ({ width: innerWidth, height: innerHeight })).catch(() => null) };
  },

  async webmcp_list({ session: id, exclude_custom }) {
    return { tools: await W.listTools(session(id), exclude_custom) };
  },

  async webmcp_invoke({ session: id, tool_ref, input, timeout_ms }) {
    const s = session(id);
    const { result, tool } = await W.invokeTool(s, tool_ref, input, timeout_ms || 60000);
    return { ...result, tool_name: tool, custom: s.injected.has(tool) };
  },

  async add_custom({ session: id, namespace, source, force_overwrite_namespace }) {
    const s = session(id);
    const definitions = customDefinitions(namespace, source);
    if (s.customSources.has(namespace) && !force_overwrite_namespace) {
      const err = new Error(`namespace ${namespace} already has custom tools; pass force_overwrite_namespace to replace them`);
      err.code = 'conflict';
      throw err;
    }
    for (const [name, d] of s.injected) if (d.namespace === namespace) s.injected.delete(name);
    for (const d of definitions) s.injected.set(d.tool.name, d);
    s.customSources.set(namespace, source);
    const script = customToolScript(namespace, source);
    await s.context.addInitScript({ content: script });
    for (const page of s.context.pages()) await page.evaluate(script).catch(() => {});
    return { tools: definitions };
  },

  async list_custom({ session: id }) {
    return { tools: [...session(id).injected.values()] };
  },

  // The final screenshot, a PNG straight from Chromium (Playwright's own waits add some 15 ms).
  async screenshot({ session: id }) {
    const s = session(id);
    const cdp = await s.cdpFor(W.currentPage(s));
    const shot = await W.withTimeout(cdp.send('Page.captureScreenshot', { format: 'png' }), 25000, 'the final screenshot');
    return { image: shot.data };
  },

  // For grading: read a page in the session's context (its cookies, so its cart) in a new tab,
  // past any service worker the pages registered (the site's own responses are what is checked),
  // retrying a read that a navigation interrupts.
  async read_page({ session: id, url, script, attempts }) {
    const s = session(id);
    const page = await s.context.newPage();
    try {
      const cdp = await s.context.newCDPSession(page);
      await cdp.send('Network.enable');
      await cdp.send('Network.setBypassServiceWorker', { bypass: true });
      let lastError = null;
      for (let i = 0; i < (attempts || 3); i++) {
        try {
          await page.goto(url, { waitUntil: 'load' });
          const value = await page.evaluate(`(async () => {\n${script}\n})()`);
          // the page as the check left it: saved with the trial, so the check can be re-run on it later
          return { value: W.toJsonValue(value), url: page.url(), html: await page.content() };
        } catch (e) {
          lastError = e;
          if (!/context was destroyed|navigat|Target closed/i.test(String(e.message))) break;
        }
      }
      throw lastError;
    } finally {
      await page.close().catch(() => {});
    }
  },

  // Write tasks (grading "request"): the harness's own browser-level CDP session pauses every
  // request of every target (pages, frames, dedicated, shared and service workers, a keepalive sent
  // as a page closes, each hop of a redirect) before it leaves the browser, and runs after any
  // route the agent's code set. A read-only request goes on at once; the rest wait for the
  // harness's matcher (grading/write_match.py), which takes them with `paused` and answers with
  // `release`. Nothing answers, nothing leaves: a request is never let through by default.
  async intercept({ session: id, methods, served, guard_sockets }) {
    const s = session(id);
    if (s.fetch) throw new Error(`browser session ${id} intercepts already`);
    const held = new Set(methods || []);
    const pages = new Map(Object.entries(served || {}));
    s.requests = [];
    s.paused = [];
    s.heldBytes = 0;
    s.waiters = [];
    s.fetch = await s.browser.newBrowserCDPSession();
    s.fetch.on('Fetch.requestPaused', (e) => {
      const r = e.request;
      if (s.requests.length < 5000) s.requests.push({ method: r.method, url: r.url, type: e.resourceType || null, at: Date.now() });
      if (r.method === 'GET' && pages.has(r.url)) {  // a page the harness serves itself (ClawBench's submit page)
        s.fetch.send('Fetch.fulfillRequest', { requestId: e.requestId, responseCode: 200,
          responseHeaders: [{ name: 'Content-Type', value: 'text/html; charset=utf-8' }],
          body: Buffer.from(pages.get(r.url)).toString('base64') }).catch(() => {});
        return;
      }
      if (guard_sockets && serviceWorkerScript(r.headers)) {  // worker_guard.js: no service worker on Kernel
        s.workerGuard.refused_service_workers += 1;
        s.fetch.send('Fetch.failRequest', { requestId: e.requestId, errorReason: 'BlockedByClient' }).catch(() => {});
        return;
      }
      if (!held.has(r.method) && ['GET', 'HEAD', 'OPTIONS'].includes(r.method)) {
        s.fetch.send('Fetch.continueRequest', { requestId: e.requestId }).catch(() => {});
        return;
      }
      const entries = r.postDataEntries || [];
      const complete = entries.every((part) => typeof part.bytes === 'string');
      let body = entries.length && complete ? Buffer.concat(entries.map((part) => Buffer.from(part.bytes, 'base64'))) : null;
      // Past the matcher's bound a body is not carried (the matcher blocks it at the submission's address);
      // past the driver's, a request is blocked here: this process serves every trial of its worker.
      const tooLarge = body !== null && body.length > MAX_HELD_BODY;
      if (tooLarge) body = null;
      const size = body ? body.length : 0;
      if (s.heldBytes + size > MAX_HELD_BYTES || s.paused.length >= MAX_HELD) {
        s.overflowed = (s.overflowed || 0) + 1;
        s.fetch.send('Fetch.failRequest', { requestId: e.requestId, errorReason: 'BlockedByClient' }).catch(() => {});
        return;
      }
      s.heldBytes += size;
      s.paused.push({ id: e.requestId, method: r.method, url: r.url, headers: r.headers || {},
                      post_data: body === null && !tooLarge ? (r.postData ?? null) : null, body_b64: body ? body.toString('base64') : null,
                      body_unknown: tooLarge || !complete || (Boolean(r.hasPostData) && body === null && r.postData == null),
                      size, type: e.resourceType || null, at: Date.now() });
      for (const wake of s.waiters.splice(0)) wake();
    });
    // Where no door of the harness reads the sites' sockets (Kernel): those Fetch does not hold (worker_guard.js)
    if (guard_sockets) s.workerGuard = await guardWorkers(s.cdpUrl);
    await s.fetch.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }] });
    return { intercepting: true };
  },

  // The requests waiting for the harness's decision (at most `wait_ms` spent waiting for one).
  async paused({ session: id, wait_ms }) {
    const s = session(id);
    if (!s.paused.length) await new Promise((resolve) => { s.waiters.push(resolve); setTimeout(resolve, wait_ms || 0); });
    const taken = [];
    let bytes = 0;
    while (s.paused.length && taken.length < 50 && (!taken.length || bytes + s.paused[0].size <= MAX_REPLY_BODY)) {
      const held = s.paused.shift();
      bytes += held.size;
      s.heldBytes -= held.size;
      taken.push(held);
    }
    return { requests: taken, overflowed: s.overflowed || 0 };
  },

  async release({ session: id, decisions }) {
    const s = session(id);
    for (const { id: requestId, block } of decisions) {
      const sent = block ? s.fetch.send('Fetch.failRequest', { requestId, errorReason: 'BlockedByClient' })
        : s.fetch.send('Fetch.continueRequest', { requestId });
      await sent.catch(() => {});  // a request whose page went meanwhile
    }
    return { released: decisions.length };
  },

  // Whether the socket guard still holds (worker_guard.js): its connection lost mid-trial is the harness's fault.
  async guard({ session: id }) {
    const g = session(id).workerGuard;
    return { lost: g ? g.lost : null };
  },

  async intercepted({ session: id }) {
    const s = session(id);
    const g = s.workerGuard;
    return { requests: s.requests || [], workers: g ? { stripped: g.stripped, closed: g.closed, pages_closed: g.pages_closed,
                                                  refused_service_workers: g.refused_service_workers, lost: g.lost } : null };
  },

  async current_url({ session: id }) {
    return { url: W.currentPage(session(id)).url() };
  },
};

W.serveLines(OPS, async () => {
  for (const s of sessions.values()) await s.browser.close().catch(() => {});
  process.exit(0);
});
