// WebMCP over the DevTools protocol, as Kernel's API offers it (list with tool_refs, invoke), and a
// trial's browser session: shared by the harness's driver (driver.js) and the agent's code runner
// (runner.js), each over its own connection to the trial's Chromium.
'use strict';
const crypto = require('crypto');

const MAX_TEXT = 20000;

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

// One trial's browser as one client sees it: its Chromium's default context, the CDP sessions
// this client opened, and how often each page's document navigated (tool_refs expire with it).
function newSession(id, browser, context, injected) {
  const cdps = new WeakMap();
  const navs = new WeakMap();
  const s = {
    id, browser, context, crashed: false,
    injected: injected || new Map(), // injected tool name -> {id, namespace}
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
  for (const p of context.pages()) track(p);
  context.on('page', track);
  browser.on('disconnected', () => { s.crashed = true; });
  return s;
}

// The page the agent is looking at: the last one opened that is still alive.
function currentPage(s) {
  const pages = s.context.pages().filter((p) => !p.isClosed());
  if (pages.length === 0) throw new Error('the session has no open page');
  return pages[pages.length - 1];
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
    const ref = 'wmcp_' + crypto.createHash('sha256').update(s.id + key).digest('hex').slice(0, 24);
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

async function listTools(s, excludeCustom) {
  const { page, tools } = await toolSnapshot(s);
  const listed = [];
  for (const t of tools) {
    if (excludeCustom && s.injected.has(t.name)) continue;
    listed.push(await describeTool(s, page, t));
  }
  return listed;
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

// A reply's line, never past what the harness reads (a page can hand back any value: a getter
// returning 70 MB, a cycle): past MAX_REPLY_CHARS, or not JSON at all, its call fails instead.
// Up to 3 bytes a character in UTF-8 (JSON escapes lone surrogates): 48 MiB under the reader's 64.
const MAX_REPLY_CHARS = 16 * 1024 * 1024;
function replyLine(reply) {
  let text;
  try {
    text = JSON.stringify(reply);
  } catch (e) {
    return JSON.stringify({ id: reply.id, ok: false, error: `the reply could not be made JSON: ${String(e && e.message)}` });
  }
  if (typeof text === 'string' && text.length <= MAX_REPLY_CHARS) return text;
  return JSON.stringify({ id: reply.id, ok: false, error: `the reply is ${text ? text.length : 0} characters, over the ${MAX_REPLY_CHARS} a reply may be` });
}

// One JSON request per line in, one reply per line out ({id, ok, result} or {id, ok: false, error}).
function serveLines(ops, onClose) {
  const readline = require('readline');
  async function handle(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (e) {
      return { id: null, ok: false, error: `got a line that is not JSON: ${e.message}` };
    }
    const op = Object.prototype.hasOwnProperty.call(ops, msg.op) ? ops[msg.op] : null;
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
    handle(line).then((reply) => process.stdout.write(replyLine(reply) + '\n'));
  });
  rl.on('close', onClose);
}

module.exports = {
  MAX_TEXT, safeJson, toJsonValue, withTimeout, newSession, currentPage, listTools, invokeTool, serveLines,
};
