// A write task's wall for the sockets no request interception sees, on Kernel. CDP's Fetch domain
// holds no WebSocket, and the socket guard's declarativeNetRequest rule (socket_guard/, kernel.py)
// blocks those of pages, frames and dedicated workers of the browser's own context, but neither
// those of shared and service workers nor any in a context made later, where extensions are off
// (each measured on Chromium 156, tests/test_kernel_sockets.py). So, on the harness's own CDP
// connection, every such target is held at its start, before any of its script runs:
// - a shared or service worker has its socket constructors taken from its global scope, then goes
//   on; one the harness cannot strip is closed. A worker has no other realm to take one from (no
//   frames, and Chromium gives shared workers no nested workers), and its fetch() still meets the
//   request interception. This is the second wall, not the first: Chromium lets a held worker go at
//   any CDP client's word, so a first line can run before the strip. A page has no SharedWorker
//   (socket_guard/no_shared_workers.js) unless an init script of the agent's kept it, and a service
//   worker's script is refused (serviceWorkerScript below);
// - a page of another browser context is closed (a page has frames, new realms, so nothing short of
//   the extension holds its sockets); the browser's own context's pages and frames go on at once,
//   their documents made to lose SharedWorker first (as socket_guard/no_shared_workers.js, but
//   before a later client's init scripts, which run before any extension's).
'use strict';

const SOCKETS = JSON.stringify(['WebSocket', 'WebSocketStream', 'WebTransport']);
const STRIP = `for (const n of ${SOCKETS}) { try { delete self[n]; } catch (e) {} } ${SOCKETS}.some((n) => n in self) ? 'kept' : 'stripped'`;
const GUARDED = [{ type: 'shared_worker', exclude: false }, { type: 'service_worker', exclude: false },
  { type: 'page', exclude: false }, { type: 'iframe', exclude: false }, { exclude: true }];
// socket_guard/no_shared_workers.js: the constructor, and the one a Storage Access handle gives
const NO_SHARED_WORKERS = require('fs').readFileSync(require('path').join(__dirname, 'socket_guard', 'no_shared_workers.js'), 'utf8');

// Resolves once the guard holds (every worker started from then on is held), on a raw connection:
// Playwright's CDP sessions cannot speak to the child sessions auto-attach makes.
async function guardWorkers(cdpUrl) {
  const ws = new WebSocket(cdpUrl);
  const guard = { stripped: 0, closed: 0, pages_closed: 0, refused_service_workers: 0, lost: null, ending: false,
                  close: () => { guard.ending = true; ws.close(); } };
  let ownContext = null;
  const waiting = new Map();
  let next = 0;
  const send = (method, params, sessionId) => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, { resolve, reject });
    ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  ws.onmessage = async (event) => {
    const message = JSON.parse(String(event.data));
    if (message.id && waiting.has(message.id)) {
      const { resolve, reject } = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error) reject(new Error(message.error.message)); else resolve(message.result);
      return;
    }
    if (message.method !== 'Target.attachedToTarget') return;
    const { sessionId, targetInfo } = message.params;
    if (targetInfo.type === 'page' || targetInfo.type === 'iframe') {
      if (ownContext !== null && targetInfo.browserContextId === ownContext) {
        // Its documents lose SharedWorker before any other script of theirs, an init script of a CDP client
        // attached later included (Chromium runs them in the order the clients attached, measured); its
        // cross-site frames are held likewise. The page is let go first, and the rest sent at once without
        // waiting on answers: a new renderer (a noopener popup's) answers Page.enable only once it runs,
        // and it takes its messages in order, before its first navigation commits.
        const sent = [send('Runtime.runIfWaitingForDebugger', {}, sessionId), send('Page.enable', {}, sessionId),
          send('Page.addScriptToEvaluateOnNewDocument', { source: NO_SHARED_WORKERS, runImmediately: true }, sessionId),
          send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: true,
                                         filter: [{ type: 'iframe', exclude: false }, { exclude: true }] }, sessionId)];
        await Promise.allSettled(sent);
      } else {
        guard.pages_closed += 1;
        await send('Target.closeTarget', { targetId: targetInfo.targetId }).catch(() => {});
      }
      return;
    }
    let stripped = false;
    let gone = false;  // a worker that went before it could be asked (a service worker whose script was refused)
    try {
      const reply = await send('Runtime.evaluate', { expression: STRIP, returnByValue: true }, sessionId)
        .catch((e) => { gone = true; throw e; });
      stripped = reply?.result?.value === 'stripped';
      if (stripped) {
        await send('Runtime.runIfWaitingForDebugger', {}, sessionId);
        // Let go: a restart of the same target is not attached again (measured), hence a service worker's script is refused
        await send('Target.detachFromTarget', { sessionId }).catch(() => {});
      }
    } catch (e) { stripped = false; }
    if (stripped) guard.stripped += 1;
    else {  // never let a worker run with its sockets
      if (!gone) guard.closed += 1;
      await send('Target.closeTarget', { targetId: targetInfo.targetId }).catch(() => {});
    }
  };
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error(`the worker guard could not reach ${cdpUrl}`));
  });
  ws.onclose = () => {
    if (!guard.ending) guard.lost = 'the harness\'s connection to the browser closed';
    for (const { reject } of waiting.values()) reject(new Error('closed'));
    waiting.clear();
  };
  ws.onerror = () => {};
  // the browser's own context: where the harness's page is (a Chromium that names no default has it there)
  ownContext = (await send('Target.getBrowserContexts', {})).defaultBrowserContextId
    || (await send('Target.getTargets', {})).targetInfos.find((t) => t.type === 'page')?.browserContextId || null;
  if (ownContext === null) throw new Error('the worker guard found no browser context of the harness\'s page');
  await send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: true, filter: GUARDED });
  return guard;
}

// A service worker's script (Chromium marks its fetch, and each update's, with `Service-Worker: script`):
// refused by the request interception, because a service worker Chromium stops and starts again runs its
// script anew in the same target, which no auto-attach holds a second time (measured on Chromium 156).
function serviceWorkerScript(headers) {
  return Object.entries(headers || {}).some(([k, v]) => k.toLowerCase() === 'service-worker' && String(v).trim().toLowerCase() === 'script');
}

module.exports = { guardWorkers, serviceWorkerScript };
