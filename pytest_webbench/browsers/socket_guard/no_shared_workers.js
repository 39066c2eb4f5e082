// A write task's pages have no SharedWorker: a shared worker's sockets are out of the rule's reach, and
// the harness's CDP hold on one races every other CDP client (docs/suites.md, Sockets). Run in each
// frame's main world before its own scripts, about:blank, srcdoc and blob: frames and popups included;
// a page of an opaque origin (about:blank at the top, an error page) may make no shared worker anyway.
delete window.SharedWorker;
// A Storage Access handle carries its own when asked for it (document.requestStorageAccess({SharedWorker:
// true})): it is never asked for, so the handle's refuses.
if (Document.prototype.requestStorageAccess) {
  const request = Document.prototype.requestStorageAccess;
  const ALL = ['cookies', 'sessionStorage', 'localStorage', 'indexedDB', 'locks', 'caches', 'getDirectory', 'estimate',
    'createObjectURL', 'revokeObjectURL', 'BroadcastChannel'];  // the spec's types, SharedWorker left out
  Document.prototype.requestStorageAccess = function requestStorageAccess(types) {
    if (!types || typeof types !== 'object') return request.call(this);
    const asked = types.all ? Object.fromEntries(ALL.map((t) => [t, true])) : { ...types };
    return request.call(this, { ...asked, all: false, SharedWorker: false });
  };
}
