"""One trial's browser session as the harness holds it: opened at the task's start page (with the
treatment's tool batch registered before the agent starts), ended for the agent's code when the
agent stops, and read by the harness afterwards (the page state, the task's page check, the final
screenshot and the trace)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..browsers.base import BackendError
from ..design.arms import GIVEN_FOLDER
from ..design.suite import TrialSpec
from ..results.records import screenshot_name
from ..results.well_formed import well_formed
from .services import RunServices


@dataclass
class BrowserSessionHandle:
    session_id: str
    start_url: str
    services: RunServices
    screenshot_saved: bool = False
    given_dir: Path | None = None  # the files the agent is given (its my-info/), this trial's own
    inbox: Any = None  # the trial's e-mail account (trial/inbox.py InboxAccount), if it has one
    given_root: Path | None = None  # the folder of the trial's own given files, where it has an account

    def save_screenshot(self, folder: Path) -> None:
        """The page as the agent left it, for the reports; nothing if there is no page to show."""
        if self.screenshot_saved:
            return
        try:
            image = lossless_webp(self.run(self.services.backend.screenshot(self.session_id), timeout=30))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / screenshot_name(image)).write_bytes(image)
        except Exception:
            return  # the session never opened, the browser died, or the disk refused: no picture, same grade
        self.screenshot_saved = True

    def save_trace(self, folder: Path) -> dict | None:
        """The session's trace into the trial's folder (once), before the harness reads the page."""
        try:
            return self.run(self.services.backend.save_trace(self.session_id, folder), timeout=150)
        except Exception as exc:  # noqa: BLE001 - a lost trace is reported, never a changed grade
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}

    def run(self, coro, timeout: float | None = 120):
        return self.services.loop.run(coro, timeout=timeout)

    def end_agent_code(self) -> None:
        """The agent has stopped: its code's runner and hooks go before anything is read."""
        self.run(self.services.backend.end_agent_code(self.session_id), timeout=60)

    def lost(self) -> str | None:
        """Why the browser is gone, if it is (asked after the agent stops)."""
        try:
            return self.run(self.services.backend.session_lost(self.session_id), timeout=60)
        except Exception:  # a backend that cannot say is no evidence either way
            return None


MAX_WEBP_PIXELS = 16_000_000  # a screenshot larger than this (a window the agent made huge) stays a PNG


def lossless_webp(png: bytes) -> bytes:
    """A backend's PNG as a lossless WebP: the same pixels in a third or less of the bytes for a page
    of text (local-web: 12 KB against 40 KB; a JPEG would be larger, and lossy). Chromium's own
    lossless WebP is larger than its PNG here, so Pillow (a dependency for the trace's thumbnails)
    encodes it: about 35 ms. Anything else (not a PNG, too large to decode here, not encodable) is
    kept as it came."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(png), formats=["PNG"]) as image:
            if image.width * image.height > MAX_WEBP_PIXELS:
                return png
            out = io.BytesIO()
            # exact: the colour under a transparent pixel is kept too; methods above 1 are no smaller here, only slower
            image.save(out, format="WEBP", lossless=True, exact=True, method=1)
            return out.getvalue()
    except Exception:  # noqa: BLE001 - the picture is for people: whatever Pillow makes of it, the PNG stays
        return png


def trial_site_urls(services: RunServices, spec: TrialSpec) -> list[str]:
    """The sites a trial's browser may reach: its session's, and the one made ready for it (with
    the inbox twin where its account is read)."""
    urls = [services.site_urls[spec.task.meta.site]]
    if (inbox := spec.task.meta.inbox) in services.inbox_twins:
        urls.append(services.site_urls[inbox])
    return urls


def given_folder(spec: TrialSpec) -> Path | None:
    """The task's given files, as its folder holds them (a trial with an account gets its own copy)."""
    given = spec.task.path / GIVEN_FOLDER
    return given if given.is_dir() else None


async def open_browser_session(services: RunServices, spec: TrialSpec, session_id: str, start_url: str,
                               trace: bool = False, given: Path | None = None) -> None:
    """A fresh context at the task's start page; in treatment, the site's tool batch registered
    before the agent starts (retried once: a registration resent replaces the first)."""
    backend = services.backend
    await backend.create_session(session_id, page_api_only=spec.policy.page_api_only, trace=trace,
                                 site_urls=trial_site_urls(services, spec), write_task=spec.task.meta.request is not None)
    if (request := spec.task.meta.request) is not None:  # a write task: its submission is blocked and kept
        served = None
        if spec.task.meta.submit_page:  # served by the interceptor itself: no connection is made for it
            from ..design.clawbench import SUBMIT_PAGE_URLS, runtime_submit_page

            served = dict.fromkeys(SUBMIT_PAGE_URLS, runtime_submit_page())
        await backend.intercept_requests(session_id, request.model_dump(include={"url_pattern", "method", "body", "params"}),
                                         served=served)
    if given is not None and hasattr(backend, "give_files"):  # into the code's seal, or Kernel's browser VM
        try:  # for its browser code to upload (ClawBench's resume): where the agent's own my-info is
            await backend.give_files(session_id, given)
        except BackendError as exc:
            if exc.code != "unsupported":  # unsealed: the code's own host, which has no such folder
                raise
    # Opened after the interception began, also when it is about:blank again: a document made before it
    # is not held by it (Chromium gives a document its network at navigation; tests/test_write_interception.py)
    first = "about:blank" if spec.task.meta.start_blank else start_url  # ClawBench's agent starts on a blank page
    try:
        await backend.goto(session_id, first)
    except BackendError as exc:
        raise BackendError(f"could not open the start page {first}: {exc}") from exc
    batch_site = spec.task.meta.tool_batch
    if spec.policy.inject_tool_batch and batch_site:
        batch_path = services.suite.tool_batch_path(batch_site)
        assert batch_path is not None
        source = batch_path.read_text(encoding="utf-8")
        namespace = services.suite.spec.sites[batch_site].namespace or batch_site
        for attempt in (1, 2):
            try:
                await backend.add_custom_tools(session_id, namespace, source, force_overwrite_namespace=True)
                break
            except BackendError as exc:
                if attempt == 2 or exc.code not in (None, "conflict") or "source" in str(exc):
                    raise BackendError(f"registering tool batch {batch_path.name} failed: {exc}") from exc
                await asyncio.sleep(0.2)


def read_page_state(browser: BrowserSessionHandle):
    """The page the agent left the browser on (see grading/page_state.py); None if unreadable.

    A block or error page errors the trial, so it must be the site's doing, not the agent's: its
    own page can say anything of itself (a title, a vendor's marker, a status it overrides), and it
    can go to a page that is one (another site's, an address it knows is refused). So such a label
    stands only where the site refuses the whole session: the harness loads the trial's start page
    afresh (a new tab, past service workers) and labels that."""
    from ..grading.page_state import PAGE_STATE_SCRIPT, read_page_state as parse

    backend, session_id = browser.services.backend, browser.session_id
    try:
        state = parse(well_formed(browser.run(backend.evaluate(session_id, PAGE_STATE_SCRIPT), timeout=60)))
    except Exception:
        return None
    if state is None or state.label == "ok":
        return state
    try:
        fresh = browser.run(backend.check_page(session_id, browser.start_url, PAGE_STATE_SCRIPT), timeout=120)
    except Exception:
        return None
    start = parse(well_formed(fresh.get("value") if isinstance(fresh, dict) else None))
    # the agent's page is named in the verdict: the start page confirms the block, the agent's shows where it was met
    return state if start is not None and start.label == state.label else start


def read_page_value(browser: BrowserSessionHandle, spec: TrialSpec, trial_dir: Path) -> tuple[Any, str | None]:
    """The task's page check on the live page; the page it read is kept for re-checking
    (grading/snapshots.py)."""
    from ..grading.snapshots import SavedPageCheck, save_page_check

    if spec.task.meta.request is not None:
        return read_submission(browser, trial_dir)
    page = spec.task.meta.page
    if page is None:
        return None, None
    url = browser.services.site_urls[spec.task.meta.site] + page.path
    try:
        checked = browser.run(browser.services.backend.check_page(browser.session_id, url, page.script))
    except BackendError as exc:
        return None, str(exc)
    checked = well_formed(checked)  # the page's text is the site's, or what the agent left in it
    saved = SavedPageCheck(trial_id=spec.trial_id, task=spec.key.task, url=checked.get("url") or url, value=checked["value"])
    save_page_check(trial_dir, saved, checked.get("html"))
    return checked["value"], None


REQUESTS_FILE = "requests.json"  # a write task's blocked submissions and every request of its pages


def read_submission(browser: BrowserSessionHandle, trial_dir: Path) -> tuple[Any, str | None]:
    """A write task's page value: how many requests matched its check, and the first of them (what
    ClawBench grades). Everything blocked and every request made are kept beside the proxy log."""
    import json

    try:
        seen = well_formed(browser.run(browser.services.backend.intercepted_requests(browser.session_id), timeout=60))
    except BackendError as exc:
        return None, str(exc)
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / REQUESTS_FILE).write_text(json.dumps(seen, indent=1))
    intercepted = [r for r in seen.get("intercepted") or [] if isinstance(r, dict)]
    first = intercepted[0] if intercepted else None
    return {"submissions": len(intercepted),
            "at_site_door": sum(1 for r in intercepted if r.get("where") == "site"),
            "unreadable": len(seen.get("unreadable") or []), "refused": len(seen.get("refused") or []),
            "after_end": len(seen.get("after_end") or []),
            "overflowed": seen.get("overflowed") or 0,
            "workers": seen.get("workers") if isinstance(seen.get("workers"), dict) else None,
            "submitted": None if first is None else {k: first.get(k) for k in SUBMITTED_FIELDS}}, None


SUBMITTED_FIELDS = ("method", "url", "body", "query", "clawbench", "reason", "where")


def write_flags(value: Any) -> list[str]:
    """What a write task's interception says of the trial: a request the browser's side did not
    hold, stopped at the site's door; a request blocked at the submission's address unread."""
    if not isinstance(value, dict):
        return []
    flags = []
    if door := value.get("at_site_door"):
        flags.append(f"{door} request(s) to the submission's address passed the browser's interceptor and were "
                     "stopped at the site's door")
    if unread := value.get("unreadable"):
        flags.append(f"{unread} request(s) to the submission's address carried a body the harness could not read: blocked")
    if refused := value.get("refused"):
        flags.append(f"{refused} request(s) were refused at the site's door unread (a protocol upgrade, a body past its bound)")
    if late := value.get("after_end"):
        flags.append(f"{late} request(s) the trial's pages sent after the agent's run ended were blocked")
    if over := value.get("overflowed"):
        flags.append(f"{over} request(s) were blocked unread: the trial's pages held more requests at once than the harness keeps")
    workers = value.get("workers") if isinstance(value.get("workers"), dict) else {}
    if stripped := workers.get("stripped"):
        flags.append(f"{stripped} shared worker(s) ran: their sockets were taken away before their script ran only if "
                     "no other CDP client let them go first (docs/suites.md, Sockets)")
    if closed := workers.get("closed"):
        flags.append(f"{closed} shared or service worker(s) were closed: the harness could not take their sockets away")
    if pages := workers.get("pages_closed"):
        flags.append(f"{pages} page(s) opened in a browser context of the agent's making were closed: there its sockets "
                     "cannot be held")
    if lost := workers.get("lost"):
        flags.append(f"the worker guard ended mid-trial ({str(lost)[:200]}): workers started after it were not held")
    return flags
