// The local browser backend's Node side: one process per pytest worker, one Chromium, one browser
// context per session. Kernel runs agents' Playwright code as JavaScript against the Node
// Playwright API, so this does the same, with the playwright-core and Node runtime that Playwright
// for Python ships in its driver/ folder (no npm needed).
//
// Protocol: one JSON object per line on stdin, {id, op, ...args}; one reply per line on stdout,
// {id, ok: true, result} or {id, ok: false, error}. Nothing else is ever written to stdout.
'use strict';
const vm = require('vm');
const readline = require('readline');
const { chromium } = require(process.env.WEBBENCH_PLAYWRIGHT_PACKAGE);

const CHROMIUM = process.env.WEBBENCH_CHROMIUM || '/usr/bin/chromium';
// Without the networking flags Chromium keeps dialling hosts this machine cannot reach.
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic', '--enable-features=WebMCPTesting',
];
const MAX_TEXT = 20000;

let browserPromise = null;
const sessions = new Map();

async function getBrowser() {
  if (browserPromise) {
    const browser = await browserPromise.catch(() => null);
    if (browser && browser.isConnected()) return browser;
  }
  browserPromise = chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  const browser = await browserPromise;
  browser.on('disconnected', () => {
    for (const s of sessions.values()) s.crashed = true;
  });
  return browser;
}

function session(id) {
  const s = sessions.get(id);
  if (!s) throw new Error(`unknown browser session ${JSON.stringify(id)}`);
  if (s.crashed) throw Object.assign(new Error(`browser session ${id} lost its browser (Chromium exited)`), { code: 'browser_crashed' });
  return s;
}

// The page the agent is looking at: the last one opened that is still alive.
function currentPage(s) {
  const pages = s.context.pages().filter((p) => !p.isClosed());
  if (pages.length === 0) throw new Error('the session has no open page');
  return pages[pages.length - 1];
}

function captureConsole() {
  const out = [];
  const err = [];
  const fmt = (args) => args.map((a) => (typeof a === 'string' ? a : safeJson(a))).join(' ');
  return {
    console: {
      log: (...a) => out.push(fmt(a)), info: (...a) => out.push(fmt(a)),
      warn: (...a) => err.push(fmt(a)), error: (...a) => err.push(fmt(a)), debug: (...a) => out.push(fmt(a)),
    },
    stdout: () => out.join('\n').slice(0, MAX_TEXT),
    stderr: () => err.join('\n').slice(0, MAX_TEXT),
  };
}

function safeJson(value) {
  try {
    return JSON.stringify(value);
  } catch (e) {
    return String(value);
  }
}

// Results cross a JSON boundary: keep what JSON can carry.
function toJsonValue(value) {
  if (value === undefined) return null;
  try {
    return JSON.parse(JSON.stringify(value));
  } catch (e) {
    return String(value);
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function runCode(s, code, timeoutMs, sandbox) {
  const io = captureConsole();
  sandbox.console = io.console;
  try {
    // The script's synchronous part is bounded by vm's timeout, the rest by the race below.
    const script = new vm.Script(`(async () => {\n${code}\n})()`, { filename: 'agent-code.js' });
    const promise = script.runInContext(sandbox, { timeout: timeoutMs });
    const result = await withTimeout(promise, timeoutMs, 'code');
    return { success: true, result: toJsonValue(result), error: null, stdout: io.stdout(), stderr: io.stderr() };
  } catch (e) {
    return { success: false, result: null, error: String(e && e.stack ? e.message : e), stdout: io.stdout(), stderr: io.stderr() };
  }
}

// The playwright arm drives the page through Playwright's page API only: these members (direct HTTP,
// raw CDP, rerouting traffic) and every private `_` member are missing from its code's objects at
// run time, as well as refused by the proxy's static rule. Objects reached from them (page.context(),
// locator.page(), frames, requests and responses) are wrapped the same way; objects handed to event
// listeners are not. Best effort, not a boundary: node's vm is not one (a function's constructor
// reaches the host realm), which is why the proxy's rule and the report's flags stand beside it.
const ROUTING = ['route', 'routeFromHAR', 'routeWebSocket', 'unroute', 'unrouteAll'];
const AROUND_THE_PAGE = {  // per class: Response.request() and Route-less classes stay usable
  Page: new Set(['request', ...ROUTING]), BrowserContext: new Set(['request', 'newCDPSession', ...ROUTING]),
  Browser: new Set(['newBrowserCDPSession']),
};
// (class names as Playwright's bundle spells them, less a leading underscore)
const PLAYWRIGHT_OBJECTS = new Set(['Page', 'BrowserContext', 'Browser', 'Frame', 'Locator', 'FrameLocator',
  'ElementHandle', 'Request', 'Response']);

function pageApiOnly(root) {
  const proxies = new WeakMap();
  const targets = new WeakMap();  // proxy -> the object it wraps
  const refuse = (target, prop) => {
    const banned = AROUND_THE_PAGE[target.constructor.name.replace(/^_+/, '')];
    if ((banned && banned.has(prop)) || (typeof prop === 'string' && prop.startsWith('_'))) {
      throw new Error(`${String(prop)} is not available in this arm: drive the page through Playwright's page API`);
    }
  };
  const handler = {
    get(target, prop) {
      refuse(target, prop);
      const value = Reflect.get(target, prop, target);
      // objects of ours passed back in (a handle to evaluate, a locator to and()) go in unwrapped
      return typeof value === 'function' ? (...args) => wrap(value.apply(target, args.map((a) => targets.get(a) || a)))
        : wrap(value);
    },
    getOwnPropertyDescriptor(target, prop) {
      refuse(target, prop);
      return Reflect.getOwnPropertyDescriptor(target, prop);
    },
  };
  function wrap(v) {
    if (v instanceof Promise) return v.then(wrap);
    if (Array.isArray(v)) return v.map(wrap);
    if (v && typeof v === 'object' && v.constructor && PLAYWRIGHT_OBJECTS.has(v.constructor.name.replace(/^_+/, ''))) {
      if (!proxies.has(v)) {
        const proxy = new Proxy(v, handler);
        proxies.set(v, proxy);
        targets.set(proxy, v);
      }
      return proxies.get(v);
    }
    return v;
  }
  return wrap(root);
}

function playwrightScope(s) {
  if (s.pageApiOnly) {
    return vm.createContext({ page: pageApiOnly(currentPage(s)), context: pageApiOnly(s.context),
      browser: pageApiOnly(s.browser), setTimeout, clearTimeout, URL, Buffer });
  }
  const page = currentPage(s);
  // Kernel puts a browser-wide `webmcp` client in scope beside page, context and browser.
  const webmcp = {
    listTools: async () => (await OPS.webmcp_list({ session: s.id })).tools,
    invokeTool: async (toolRef, input, opts) => (await invokeTool(s, toolRef, input, ((opts && opts.timeoutSec) || 60) * 1000)).result,
  };
  return vm.createContext({ page, context: s.context, browser: s.browser, webmcp, setTimeout, clearTimeout, URL, Buffer });
}

async function toolSnapshot(s) {
  // Enabling the WebMCP domain reports every tool registered in every live document.
  const page = currentPage(s);
  const cdp = await s.cdpFor(page);
  const tools = [];
  const onAdded = (e) => tools.push(...e.tools);
  cdp.on('WebMCP.toolsAdded', onAdded);
  try {
    await cdp.send('WebMCP.disable').catch(() => {});
    await cdp.send('WebMCP.enable');
  } finally {
    cdp.off('WebMCP.toolsAdded', onAdded);
  }
  return { page, cdp, tools };
}

// A tool_ref names one tool in one document: it expires when that document navigates.
function refFor(s, page, t) {
  const key = `${t.frameId}/${t.name}/${s.navigations(page)}`;
  if (!s.refByKey.has(key)) {
    const ref = 'wmcp_' + require('crypto').createHash('sha256').update(s.id + key).digest('hex').slice(0, 24);
    s.refByKey.set(key, ref);
    s.keyByRef.set(ref, key);
  }
  return s.refByKey.get(key);
}

// Kernel's list entry: metadata under `tool`, provenance under `source`; a custom tool carries
// source.custom {id, namespace} and source.target_id.
async function describeTool(s, page, t) {
  const custom = s.injected.get(t.name);
  const source = { window_id: 1, tab_id: s.context.pages().indexOf(page) + 1, page_title: await page.title().catch(() => ''), page_url: page.url(), frame: null };
  if (custom) Object.assign(source, { custom: { id: custom.id, namespace: custom.namespace }, target_id: String(t.frameId) });
  return {
    tool_ref: refFor(s, page, t),
    tool: { name: t.name, description: t.description || '', inputSchema: t.inputSchema || { type: 'object' } },
    source,
  };
}

class OutcomeUnknown extends Error {
  constructor(message, invocationId) {
    super(message);
    this.code = 'outcome_unknown';
    this.body = { code: 'outcome_unknown', message, invocation_id: invocationId };
  }
}

async function invokeTool(s, toolRef, input, timeoutMs) {
  const { page, cdp, tools } = await toolSnapshot(s);
  const key = s.keyByRef.get(toolRef);
  const tool = key && tools.find((t) => `${t.frameId}/${t.name}/${s.navigations(page)}` === key);
  if (!tool) {
    const err = new Error(`tool_ref ${JSON.stringify(toolRef)} is stale or unknown: its document navigated or it was never listed; call list again`);
    err.code = 'tool_ref_stale';
    throw err;
  }
  // A response can arrive before invokeTool returns its id: keep every response, then pick ours.
  const seen = [];
  let wake = () => {};
  const onResponse = (response) => {
    seen.push(response);
    wake();
  };
  cdp.on('WebMCP.toolResponded', onResponse);
  let invocationId = null;
  let e;
  try {
    ({ invocationId } = await cdp.send('WebMCP.invokeTool', { frameId: tool.frameId, toolName: tool.name, input: input || {} }));
    const ours = () => seen.find((response) => response.invocationId === invocationId);
    const responded = new Promise((resolve) => {
      wake = () => ours() && resolve(ours());
      wake();
    });
    e = await withTimeout(responded, timeoutMs, `tool ${tool.name}`);
  } catch (err) {
    if (invocationId === null) throw err;
    // Kernel answers HTTP 504 outcome_unknown here: the tool may have run; never retry.
    throw new OutcomeUnknown(`invocation of ${tool.name} did not finish: ${err.message}`, invocationId);
  } finally {
    cdp.off('WebMCP.toolResponded', onResponse);
  }
  const status = String(e.status || '').toLowerCase();
  const result = { invocation_id: invocationId, status: status || 'error' };
  if (status === 'completed') result.output = e.output ?? null;
  // A tool that threw reports its exception (first line: 'Error: message'), not an empty errorText.
  else result.error_text = e.errorText || (e.exception && String(e.exception.description || '').split('\n')[0]) || e.error || safeJson(e.output) || safeJson(e);
  return { result, tool: tool.name };
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

function newSession(id, browser, context) {
  const cdps = new WeakMap();
  const navs = new WeakMap();
  const s = {
    id, browser, context, crashed: false, repl: null, replId: null,
    injected: new Map(), // tool name -> custom definition
    customSources: new Map(), // namespace -> source
    refByKey: new Map(), keyByRef: new Map(),
    async cdpFor(p) {
      if (!cdps.has(p)) cdps.set(p, await context.newCDPSession(p));
      return cdps.get(p);
    },
    navigations: (p) => navs.get(p) || 0,
  };
  const track = (p) => p.on('framenavigated', (f) => {
    if (f === p.mainFrame()) navs.set(p, (navs.get(p) || 0) + 1);
  });
  context.on('page', track);
  return s;
}

function replResult(run, s, started, terminated) {
  const content = [];
  const push = (channel, text) => text && content.push({ index: content.length, type: 'text', channel, text });
  for (const w of run.writes) push('write', w);
  push('stdout', run.stdout);
  push('stderr', run.stderr);
  return {
    success: run.success, repl_id: s.replId, content, content_truncated: false,
    duration_ms: Date.now() - started, error: run.error, stack: run.success ? null : run.error, repl_terminated: terminated,
  };
}

function freshRepl(s) {
  s.repl = playwrightScope(s);
  s.replId = require('crypto').randomBytes(12).toString('hex');
  s.replWrites = [];
  s.repl.repl = { write: (v) => s.replWrites.push(typeof v === 'string' ? v : safeJson(v)) };
}

const OPS = {
  async ping() {
    return { pong: true };
  },

  async open({ session: id, viewport, page_api_only, trace }) {
    if (sessions.has(id)) throw new Error(`browser session ${id} already exists`);
    const browser = await getBrowser();
    const context = await browser.newContext({ viewport: viewport || { width: 1280, height: 800 } });
    const s = newSession(id, browser, context);
    s.pageApiOnly = Boolean(page_api_only);
    if (trace) {
      await context.tracing.start({ screenshots: true, snapshots: true, title: id });
      s.tracing = true;
    }
    sessions.set(id, s);
    await context.newPage();
    return { session_id: id };
  },

  // Is the session still there, and its Chromium alive? (Asked after the agent stops.)
  async status({ session: id }) {
    const s = sessions.get(id);
    return { open: Boolean(s), crashed: Boolean(s && (s.crashed || !s.browser.isConnected())) };
  },

  // Playwright's trace.zip of the session so far; tracing ends with it.
  async trace_save({ session: id, path }) {
    const s = session(id);
    if (!s.tracing) return { saved: false };
    s.tracing = false;
    await s.context.tracing.stop({ path });
    return { saved: true };
  },

  async close({ session: id }) {
    const s = sessions.get(id);
    if (!s) return { closed: false };
    sessions.delete(id);
    await s.context.close().catch(() => {});
    return { closed: true };
  },

  async exec({ session: id, code, timeout_ms }) {
    const s = session(id);
    const run = await runCode(s, code, timeout_ms || 60000, playwrightScope(s));
    return { success: run.success, result: run.result, error: run.error, stdout: run.stdout, stderr: run.stderr };
  },

  // Kernel's persistent REPL: bindings survive between calls; expression values are ignored and
  // output goes through repl.write or console; a timeout ends the REPL and its state.
  async repl({ session: id, code, reset, timeout_ms }) {
    const s = session(id);
    const started = Date.now();
    if (reset || !s.repl) freshRepl(s);
    s.repl.page = currentPage(s);
    if (!code) return replResult({ success: true, writes: [], stdout: '', stderr: '', error: null }, s, started, false);
    s.replWrites = [];
    const hoisted = code.replace(/^(\s*)(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=/gm, '$1$2 =');
    const run = await runCode(s, hoisted, timeout_ms || 60000, s.repl);
    run.writes = s.replWrites;
    const terminated = !run.success && /timed out|Script execution timed out/.test(run.error || '');
    const result = replResult(run, s, started, terminated);
    if (terminated) s.repl = null;
    return result;
  },

  async computer({ session: id, actions }) {
    const s = session(id);
    const page = currentPage(s);
    const results = [];
    for (const a of actions || []) {
      const act = ACTIONS[a.type];
      if (!act) throw new Error(`unknown computer action type ${JSON.stringify(a.type)}`);
      const out = await act(page, a[a.type] || {});
      results.push({ type: a.type, ...(out || {}) });
    }
    return { results, viewport: page.viewportSize() };
  },

  async webmcp_list({ session: id, exclude_custom }) {
    const s = session(id);
    const { page, tools } = await toolSnapshot(s);
    const listed = [];
    for (const t of tools) {
      if (exclude_custom && s.injected.has(t.name)) continue;
      listed.push(await describeTool(s, page, t));
    }
    return { tools: listed };
  },

  async webmcp_invoke({ session: id, tool_ref, input, timeout_ms }) {
    const s = session(id);
    const { result, tool } = await invokeTool(s, tool_ref, input, timeout_ms || 60000);
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

  async screenshot({ session: id }) {
    const s = session(id);
    return { image: (await currentPage(s).screenshot({ type: 'png' })).toString('base64') };
  },

  // For grading: read a page in the session's context (its cookies, so its cart) in a new tab,
  // retrying a read that a navigation interrupts.
  async read_page({ session: id, url, script, attempts }) {
    const s = session(id);
    const page = await s.context.newPage();
    try {
      let lastError = null;
      for (let i = 0; i < (attempts || 3); i++) {
        try {
          await page.goto(url, { waitUntil: 'load' });
          const value = await page.evaluate(`(async () => {\n${script}\n})()`);
          // the page as the check left it: saved with the trial, so the check can be re-run on it later
          return { value: toJsonValue(value), url: page.url(), html: await page.content() };
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

  async current_url({ session: id }) {
    return { url: currentPage(session(id)).url() };
  },
};

async function handle(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    return { id: null, ok: false, error: `driver got a line that is not JSON: ${e.message}` };
  }
  const op = OPS[msg.op];
  if (!op) return { id: msg.id, ok: false, error: `unknown op ${JSON.stringify(msg.op)}` };
  try {
    return { id: msg.id, ok: true, result: await op(msg) };
  } catch (e) {
    return { id: msg.id, ok: false, error: String((e && e.message) || e), code: (e && e.code) || null, body: (e && e.body) || null };
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (!line.trim()) return;
  handle(line).then((reply) => process.stdout.write(JSON.stringify(reply) + '\n'));
});
rl.on('close', async () => {
  const browser = browserPromise && (await browserPromise.catch(() => null));
  if (browser) await browser.close().catch(() => {});
  process.exit(0);
});
