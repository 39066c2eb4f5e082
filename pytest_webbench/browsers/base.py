"""What every browser backend offers: Kernel's browser operations, one session per trial.

The MCP server in `mcp_server.py` turns these into Kernel's tool surface; the trial fixtures use
them directly to open sessions, register the treatment's tool batch and read the page for grading.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

# Schemes that show the browser's machine rather than the web: refused by policy in every arm. A page
# there is also out of a browser extension's reach (Kernel's socket guard: kernel.py).
LOCAL_SCHEMES = ["file://*", "chrome://*", "chrome-untrusted://*", "devtools://*", "view-source:*",
                 "chrome-extension://*", "filesystem:*"]
# The browser's own hidden UI pages, which it opens at start (blocked, they would show as tabs).
BROWSER_UI = ["chrome://omnibox-popup.top-chrome"]
# The managed policy of every trial's browser, on every backend (pod.py's seal; Kernel's chrome_policy).
BROWSER_POLICY = {"URLBlocklist": LOCAL_SCHEMES, "URLAllowlist": BROWSER_UI, "DownloadRestrictions": 3}


class BackendError(RuntimeError):
    """A browser backend failed (not the agent's code): the trial's stop reason is backend error.

    `code` carries Kernel's machine-readable error code where there is one (`outcome_unknown`,
    `tool_ref_stale`, `conflict`), `body` the structured error body Kernel's API would return.
    """

    def __init__(self, message: str, code: str | None = None, body: dict | None = None):
        super().__init__(message)
        self.code = code
        self.body = body


TRACE_FILE = "trace.zip"  # a trial's Playwright trace, in its Harbor folder


class BrowserBackend(Protocol):
    name: str
    billed: bool  # its browsers cost money while they run: a failed delete must not go unnoticed

    # page_api_only: the playwright arm's session, whose code may not reach around the page (where
    # the backend can enforce it at run time; the proxy's static rule applies everywhere).
    # trace: record the session (Playwright tracing locally, Kernel's replay), saved by save_trace.
    # site_urls: the task's sites, the only places the session's browser may reach (where the
    # backend can hold it to that: the local one's seal; Kernel's browsers reach the web).
    # write_task: its submission will be intercepted; a backend with no door reading the sites' sockets
    # makes the browser with its sockets walled (Kernel's socket guard).
    async def create_session(self, session_id: str, page_api_only: bool = False, trace: bool = False,
                             site_urls: list[str] = (), write_task: bool = False) -> dict[str, Any]: ...

    # The trace so far, into the trial's folder: {"file": name in folder} and/or live view and
    # replay URLs, and "error" where none could be had.
    async def save_trace(self, session_id: str, folder: Path) -> dict[str, Any]: ...

    async def delete_session(self, session_id: str) -> None: ...

    async def make_ready(self, site_urls: list[str]) -> None:
        """The next session will reach `site_urls`: a backend may start its browser now, while the
        trial at hand runs, so that create_session does not wait for it (or do nothing)."""
        ...

    async def execute_playwright(self, session_id: str, code: str, timeout_sec: float = 60) -> dict: ...

    async def repl(self, session_id: str, code: str, reset: bool = False, timeout_sec: float = 60) -> dict: ...

    async def computer_action(self, session_id: str, actions: list[dict]) -> dict: ...

    async def webmcp_list(self, session_id: str, exclude_custom: bool = False) -> dict: ...

    async def webmcp_invoke(self, session_id: str, tool_ref: str, input: dict, timeout_sec: float = 60) -> dict: ...

    async def add_custom_tools(
        self, session_id: str, namespace: str, source: str, force_overwrite_namespace: bool = False
    ) -> dict: ...

    async def list_custom_tools(self, session_id: str) -> dict: ...

    async def screenshot(self, session_id: str) -> bytes: ...

    # The harness's own navigation and reads (setup, the page state after the agent), never agent code.
    async def goto(self, session_id: str, url: str) -> str: ...

    async def evaluate(self, session_id: str, script: str) -> Any: ...

    async def end_agent_code(self, session_id: str) -> None:
        """The agent has stopped: whatever runs its code for this session ends, with every hook
        that code held on the browser, before the harness reads the page."""
        ...

    async def site_connections(self, session_id: str) -> dict[int, int] | None:
        """Connections the session's browser opened to each site port, counted by the harness
        (None where the backend cannot see them)."""
        ...

    # Write tasks: block and keep every request matching the task's check (url_pattern, method,
    # body, params), on the harness's own connection, before the agent starts; then what was
    # blocked ("intercepted") and every request the session's pages made ("requests").
    # `served`: pages (URL -> HTML) the interceptor answers itself, for a GET of that exact URL
    # (ClawBench's runtime submit page), so no connection is made for them.
    async def intercept_requests(self, session_id: str, check: dict, served: dict[str, str] | None = None) -> None: ...

    async def intercepted_requests(self, session_id: str) -> dict: ...

    def on_submission(self, session_id: str, callback: Callable[[], None]) -> None:
        """`callback` runs once, on the first request blocked as the submission (ClawBench ends
        the agent's run there)."""

    async def read_page(self, session_id: str, url: str, script: str) -> Any: ...

    async def check_page(self, session_id: str, url: str, script: str) -> dict:
        """read_page's value, with the URL it ended on and the page's HTML as the check left it."""
        ...

    async def session_lost(self, session_id: str) -> str | None:
        """Why the session's browser is gone (it crashed, or the provider ended it), or None if it
        is alive: asked after the agent stops, so a dead browser errors the trial, not fails it."""
        ...

    async def delete_leftovers(self, prefix: str) -> dict[str, str]:
        """Deletes every browser still alive whose name starts with `prefix` (a run's browsers are
        named after its trials); returns the ones that could not be deleted, name -> why."""
        ...

    async def close(self) -> None: ...
