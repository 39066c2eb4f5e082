// A write task's pages have no SharedWorker: a shared worker's sockets are out of the rule's reach, and
// the harness's CDP hold on one races every other CDP client (docs/suites.md, Sockets). Run in each
// frame's main world before its own scripts, about:blank, srcdoc and blob: frames and popups included;
// a page of an opaque origin (about:blank at the top, an error page) may make no shared worker anyway.
delete window.SharedWorker;
