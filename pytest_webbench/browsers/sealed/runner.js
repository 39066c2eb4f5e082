// The agent's code runner: runs `execute_playwright_code` and the browser REPL for one trial, as
// Kernel runs them, as JavaScript against the Node Playwright API. It runs in a seal of its own
// (no harness file, an empty environment, its only way out its trial's Chromium), started per
// trial and ended when the agent stops, before the harness reads the page: nothing here is
// trusted, and nothing the harness holds is reachable from here. Node's `vm` below only gives the
// code its scope; it is not the wall (the seal is).
//
// Protocol (stdin/stdout, one JSON object per line): {id, op: init|exec|repl, ...} -> {id, ok, result}.
'use strict';
const vm = require('vm');
const path = require('path');
const W = require('./webmcp.js');

const { chromium } = require(path.join(process.env.WEBBENCH_PLAYWRIGHT_PACKAGE || '/opt/playwright/package'));

let s = null; // the trial's session, once `init` connected
let pageApiOnlyArm = false;

function captureConsole() {
  const out = [];
  const err = [];
  const fmt = (args) => args.map((a) => (typeof a === 'string' ? a : W.safeJson(a))).join(' ');
  return {
    console: {
      log: (...a) => out.push(fmt(a)), info: (...a) => out.push(fmt(a)),
      warn: (...a) => err.push(fmt(a)), error: (...a) => err.push(fmt(a)), debug: (...a) => out.push(fmt(a)),
    },
    stdout: () => out.join('\n').slice(0, W.MAX_TEXT),
    stderr: () => err.join('\n').slice(0, W.MAX_TEXT),
  };
}

async function runCode(code, timeoutMs, sandbox) {
  const io = captureConsole();
  sandbox.console = io.console;
  try {
    // The script's synchronous part is bounded by vm's timeout, the rest by the race below.
    const script = new vm.Script(`(async () => {\n${code}\n})()`, { filename: 'agent-code.js' });
    const promise = script.runInContext(sandbox, { timeout: timeoutMs });
    const result = await W.withTimeout(promise, timeoutMs, 'code');
    return { success: true, result: W.toJsonValue(result), error: null, stdout: io.stdout(), stderr: io.stderr() };
  } catch (e) {
    return { success: false, result: null, error: String(e && e.stack ? e.message : e), stdout: io.stdout(), stderr: io.stderr() };
  }
}

// The playwright arm drives the page through Playwright's page API only: these members (direct HTTP,
// raw CDP, rerouting traffic) and every private `_` member are missing from its code's objects at
// run time, as well as refused by the proxy's static rule. Every object the code can reach from
// them is wrapped the same way, whatever its class: what a method or getter returns, what an event
// hands a listener (a console message's page(), a request's frame()), what Playwright passes any
// callback, and the values inside plain objects it returns. A ban on the agent's method, best
// effort: the seal this runs in is what keeps the harness out of reach, whatever the code finds.
const ROUTING = ['route', 'routeFromHAR', 'routeWebSocket', 'unroute', 'unrouteAll'];
const AROUND_THE_PAGE = {  // per class: Response.request() and Route-less classes stay usable
  Page: new Set(['request', ...ROUTING]), BrowserContext: new Set(['request', 'newCDPSession', ...ROUTING]),
  Browser: new Set(['newBrowserCDPSession']),
};
// (class names as Playwright's bundle spells them, less a leading underscore and the number its
// bundler adds to a name used twice: the Browser class is `Browser2`)
const className = (o) => (o.constructor && o.constructor.name ? o.constructor.name : '').replace(/^_+/, '').replace(/\d+$/, '');
// Values of the language's own classes pass as they are (a Buffer from a screenshot, a Date).
const OWN_CLASSES = [Date, RegExp, Map, Set, WeakMap, WeakSet, Error, URL, ArrayBuffer];
// Plain data of any realm (the code's own objects are made in its vm context, with an Object of its own)
const isPlain = (v) => {
  const proto = Object.getPrototypeOf(v);
  return proto === null || (Object.getPrototypeOf(proto) === null && Object.prototype.hasOwnProperty.call(proto, 'hasOwnProperty'));
};
const isOwn = (v) => ArrayBuffer.isView(v) || OWN_CLASSES.some((C) => v instanceof C);

function pageApiOnly(root) {
  const proxies = new WeakMap();
  const targets = new WeakMap();  // proxy -> the object it wraps
  const callbacks = new WeakMap();  // the code's callback -> the one Playwright gets (so off() finds it)
  const refuse = (target, prop) => {
    const banned = AROUND_THE_PAGE[className(target)];
    if ((banned && banned.has(prop)) || (typeof prop === 'string' && prop.startsWith('_'))) {
      throw new Error(`${String(prop)} is not available in this arm: drive the page through Playwright's page API`);
    }
  };
  // A callback of the code's, handed to Playwright: what Playwright calls it with is wrapped. Its
  // source is the code's own (evaluate and its kin send a function's text to the page).
  const callback = (fn) => {
    if (!callbacks.has(fn)) {
      const wrapped = function (...args) { return fn.apply(wrap(this), args.map(wrap)); };  // `this`: the emitter
      Object.defineProperty(wrapped, 'toString', { value: () => Function.prototype.toString.call(fn) });
      callbacks.set(fn, wrapped);
    }
    return callbacks.get(fn);
  };
  // What the code hands Playwright: proxies unwrapped, its functions wrapped, at any depth of plain
  // objects and arrays (a waitForEvent predicate sits in an options object)
  const inward = (a, depth = 0) => {
    if (targets.has(a)) return targets.get(a);
    if (typeof a === 'function') return callback(a);
    if (depth < 8 && Array.isArray(a)) return a.map((x) => inward(x, depth + 1));
    if (depth < 8 && a && typeof a === 'object' && isPlain(a)) {
      const out = {};
      for (const [k, v] of Object.entries(a)) out[k] = inward(v, depth + 1);
      return out;
    }
    return a;
  };
  // Nothing of the code's goes onto a Playwright object or its class (a getter or method it adds
  // would run with the real object as `this`), and its class is given by name only.
  const readOnly = (what) => () => { throw new Error(`${what} is not available in this arm: drive the page through Playwright's page API`); };
  const stub = (target) => Object.freeze({ name: target.constructor && target.constructor.name });
  // A property the language forbids a proxy to change (frozen) is given as it is.
  const fixed = (target, prop) => {
    const d = Reflect.getOwnPropertyDescriptor(target, prop);
    return Boolean(d && !d.configurable && d.writable === false);
  };
  const handler = {
    get(target, prop) {
      refuse(target, prop);
      const value = Reflect.get(target, prop, target);
      if (prop === 'constructor') return stub(target);  // its class by name, never the class itself
      if (fixed(target, prop)) return value;
      // objects of ours passed back in (a handle to evaluate, a locator to and()) go in unwrapped
      return typeof value === 'function' ? (...args) => wrap(value.apply(target, args.map(inward))) : wrap(value);
    },
    getOwnPropertyDescriptor(target, prop) {
      refuse(target, prop);
      return Reflect.getOwnPropertyDescriptor(target, prop);
    },
    set: readOnly('setting a member'),
    defineProperty: readOnly('defining a member'),
    deleteProperty: readOnly('deleting a member'),
    setPrototypeOf: readOnly('changing the prototype'),
    getPrototypeOf: (target) => wrap(Reflect.getPrototypeOf(target)),  // its class, wrapped: nothing set on it
  };
  // Plain data (a request's headers, an exposed binding's source): its own keys are the page's, so
  // none is refused, but what it holds is wrapped.
  const plainHandler = {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      return fixed(target, prop) ? value : wrap(value);
    },
    getOwnPropertyDescriptor(target, prop) {
      const d = Reflect.getOwnPropertyDescriptor(target, prop);
      return d && 'value' in d && d.configurable ? { ...d, value: wrap(d.value) } : d;
    },
  };
  function wrap(v) {
    if (v instanceof Promise) return v.then(wrap);
    if (Array.isArray(v)) return v.map(wrap);
    if (!v || typeof v !== 'object' || isOwn(v) || targets.has(v)) return v;
    if (!proxies.has(v)) {
      const proxy = new Proxy(v, isPlain(v) ? plainHandler : handler);
      proxies.set(v, proxy);
      targets.set(proxy, v);
    }
    return proxies.get(v);
  }
  return wrap(root);
}

function playwrightScope() {
  const page = W.currentPage(s);
  if (pageApiOnlyArm) {
    return vm.createContext({ page: pageApiOnly(page), context: pageApiOnly(s.context), browser: pageApiOnly(s.browser),
      setTimeout, clearTimeout, URL, Buffer });
  }
  // Kernel puts a browser-wide `webmcp` client in scope beside page, context and browser.
  const webmcp = {
    listTools: async () => W.listTools(s, false),
    invokeTool: async (toolRef, input, opts) => (await W.invokeTool(s, toolRef, input, ((opts && opts.timeoutSec) || 60) * 1000)).result,
  };
  return vm.createContext({ page, context: s.context, browser: s.browser, webmcp, setTimeout, clearTimeout, URL, Buffer });
}

let repl = null;
let replId = null;
let replWrites = [];

function freshRepl() {
  repl = playwrightScope();
  replId = require('crypto').randomBytes(12).toString('hex');
  repl.repl = { write: (v) => replWrites.push(typeof v === 'string' ? v : W.safeJson(v)) };
}

function replResult(run, started, terminated) {
  const content = [];
  const push = (channel, text) => text && content.push({ index: content.length, type: 'text', channel, text });
  for (const w of run.writes) push('write', w);
  push('stdout', run.stdout);
  push('stderr', run.stderr);
  return {
    success: run.success, repl_id: replId, content, content_truncated: false,
    duration_ms: Date.now() - started, error: run.error, stack: run.success ? null : run.error, repl_terminated: terminated,
  };
}

function ready() {
  if (!s) throw new Error('the code runner is not connected to its browser');
  if (s.crashed) throw Object.assign(new Error(`browser session ${s.id} lost its browser (Chromium exited)`), { code: 'browser_crashed' });
}

const OPS = {
  // The trial's browser, through this seal's one exit; the injected tools' names, so a listing says
  // which are custom (as Kernel's does).
  async init({ cdp_url, session, page_api_only, injected }) {
    const browser = await chromium.connectOverCDP(cdp_url);
    const context = browser.contexts()[0];
    s = W.newSession(session, browser, context, new Map(Object.entries(injected || {})));
    pageApiOnlyArm = Boolean(page_api_only);
    return { connected: true };
  },

  async ping() {
    return { pong: true };
  },

  // The injected tools' names, once the treatment's batch is registered.
  async injected({ injected }) {
    ready();
    s.injected = new Map(Object.entries(injected || {}));
    return { injected: s.injected.size };
  },

  async exec({ code, timeout_ms }) {
    ready();
    return runCode(code, timeout_ms || 60000, playwrightScope());
  },

  // Kernel's persistent REPL: bindings survive between calls; expression values are ignored and
  // output goes through repl.write or console; a timeout ends the REPL and its state.
  async repl({ code, reset, timeout_ms }) {
    ready();
    const started = Date.now();
    if (reset || !repl) freshRepl();
    repl.page = pageApiOnlyArm ? pageApiOnly(W.currentPage(s)) : W.currentPage(s);
    if (!code) return replResult({ success: true, writes: [], stdout: '', stderr: '', error: null }, started, false);
    replWrites = [];
    const hoisted = code.replace(/^(\s*)(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=/gm, '$1$2 =');
    const run = await runCode(hoisted, timeout_ms || 60000, repl);
    run.writes = replWrites;
    const terminated = !run.success && /timed out|Script execution timed out/.test(run.error || '');
    const result = replResult(run, started, terminated);
    if (terminated) repl = null;
    return result;
  },
};

W.serveLines(OPS, () => process.exit(0));
