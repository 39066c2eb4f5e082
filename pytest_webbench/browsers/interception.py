"""A write task's interception on one trial's browser, decided by one matcher
(grading/write_match.py) wherever a request is seen:

- in the browser: the driver's browser-level CDP session holds every request that is not
  read-only, from any target, until `_serve` answers it (driver.js `intercept`);
- at the site's door, on the local backend: the harness's forwarding of the site's ports reads
  each HTTP request before the site does (browsers/site_door.py), so a request the browser's
  side did not hold (or saw otherwise) still meets the matcher.

What is kept: every request blocked (where, why, what it carried, and whether ClawBench's own
runtime would have blocked it), and every write let through, for the trial's record."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any, Awaitable, Callable

from ..grading.write_match import READ_ONLY_METHODS, Decision, WriteMatcher
from .base import BackendError

MAX_KEPT = 100  # blocked requests kept per trial (each counted past it)
MAX_KEPT_BODY = 20000  # characters of a blocked request's raw body kept
POLL_MS = 10000
DECIDE_TIMEOUT_SEC = 10

DriverCall = Callable[..., Awaitable[Any]]


class Interception:
    def __init__(self, session_id: str, check: dict, site_hosts: dict[int, str], call: DriverCall) -> None:
        self.session_id, self.call = session_id, call
        self.matcher = WriteMatcher(check, site_hosts)
        self.intercepted: list[dict] = []
        self.blocked_total = 0
        self.writes: list[dict] = []  # mutating requests let through (after the matcher read them)
        self.failure: str | None = None
        self.overflowed = 0  # requests the driver blocked unread: more held at once than it keeps
        self.on_match: Callable[[], None] | None = None  # the first submission's: ends the agent's run
        self.agent_ended = False
        self.other_blocks: dict[str, list[dict]] = {}  # blocked, not a submission: "unreadable", "refused", "after_end"
        self._task: asyncio.Task | None = None

    async def start(self, served: dict[str, str] | None = None, guard_sockets: bool = False) -> None:
        """guard_sockets: also hold the sockets of the targets the browser's socket guard cannot
        (worker_guard.js), where no door of the harness reads the sites' traffic."""
        await self.call("intercept", session=self.session_id, methods=[self.matcher.method], served=served or {},
                        guard_sockets=guard_sockets, timeout=60)
        self._task = asyncio.ensure_future(self._serve())

    async def _serve(self) -> None:
        """Answers the browser's held requests until its session ends (then nothing is held)."""
        try:
            while True:
                held = await self.call("paused", session=self.session_id, wait_ms=POLL_MS, timeout=POLL_MS / 1000 + 30)
                self.overflowed = held.get("overflowed", 0)
                if held["requests"]:
                    decisions = [{"id": r["id"], "block": await self.decide_held(r)} for r in held["requests"]]
                    await self.call("release", session=self.session_id, decisions=decisions, timeout=60)
        except BackendError as exc:  # the session closed, or the driver went: what it held goes with it
            self.failure = str(exc)

    async def decide(self, method: str, url: str, raw: bytes | None, content_types: list[str], codings: str,
                     **more: Any) -> Decision:
        """The matcher's decision, made off the event loop (a body of a megabyte takes it up to a second,
        and every trial's browser and sites are served on this loop); past DECIDE_TIMEOUT_SEC, blocked."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(self.matcher.decide, method, url, raw, content_types, codings,
                                                            **more), DECIDE_TIMEOUT_SEC)
        except TimeoutError:
            return Decision(True, "unreadable", False, how=f"not read within {DECIDE_TIMEOUT_SEC} s")

    async def decide_held(self, request: dict) -> bool:
        """Whether a held request is blocked; one this cannot read (whatever the page made of it) is."""
        method, url = str(request.get("method")), str(request.get("url"))
        if self.agent_ended:
            if method.upper() in READ_ONLY_METHODS:  # the harness's own reads of the page
                return False
            self.record(Decision(True, "after_end", False), method, url, None, "browser")
            return True
        try:
            headers = {str(k).lower(): str(v) for k, v in (request.get("headers") or {}).items()}
            raw = base64.b64decode(request["body_b64"]) if request.get("body_b64") else None
            if raw is None and isinstance(request.get("post_data"), str):
                raw = request["post_data"].encode("utf-8", "surrogatepass")
            # CDP joins repeated headers with newlines: each Content-Type is one a site may read
            decision = await self.decide(method, url, raw, headers.get("content-type", "").split("\n"),
                                         headers.get("content-encoding", "").replace("\n", ","),
                                         post_data=request.get("post_data"), body_unknown=bool(request.get("body_unknown")))
        except Exception as exc:  # noqa: BLE001 - fails closed
            raw, decision = None, Decision(True, "unreadable", False, how=f"{type(exc).__name__}: {str(exc)[:200]}")
        self.record(decision, method, url, raw, "browser")
        return decision.block

    def record(self, decision: Decision, method: str, url: str, raw: bytes | None, where: str) -> None:
        """Kept by kind: a submission (the matcher's "match", graded; the first ends the agent's run),
        one blocked unread at the submission's address, one the door refused (an upgrade, a body past
        its bound), and one after the agent's run ended (its page's timers: blocked, never graded)."""
        seen = {"method": method, "url": url, "at": time.time(), "where": where}
        if not decision.block:
            if method.upper() not in ("GET", "HEAD", "OPTIONS") and len(self.writes) < 5000:
                self.writes.append(seen)
            return
        self.blocked_total += 1
        kind = "after_end" if self.agent_ended else decision.reason
        if kind == "match" and self.on_match is not None:
            callback, self.on_match = self.on_match, None  # once: the first submission ends the agent's run
            callback()
        kept = self.intercepted if kind == "match" else self.other_blocks.setdefault(kind, [])
        if len(kept) < MAX_KEPT:
            text = None if raw is None else raw[:MAX_KEPT_BODY * 4].decode("utf-8", "replace")[:MAX_KEPT_BODY]
            kept.append({**seen, "reason": decision.reason, "how": decision.how, "clawbench": decision.clawbench,
                         "body": decision.body, "read_as": decision.read_as, "query": decision.query, "raw_body": text})

    def end_agent(self) -> None:
        """The agent's run is over: from now on no request is its submission (ClawBench stops
        intercepting there). What its pages still send is blocked unless read-only, and the
        harness's own reads of the page go on even where the check is a GET."""
        self.agent_ended, self.on_match = True, None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def account(self, requests: list[dict], workers: dict | None = None) -> dict:
        """What the trial's record keeps (requests.json); `workers`, the worker guard's count of the
        shared and service workers it stripped of sockets or closed (driver.js, worker_guard.js)."""
        return {"intercepted": self.intercepted, "blocked": self.blocked_total, "writes": self.writes,
                "unreadable": self.other_blocks.get("unreadable", []), "refused": self.other_blocks.get("refused", []),
                "after_end": self.other_blocks.get("after_end", []), "overflowed": self.overflowed, "requests": requests,
                "workers": workers, **({"interceptor_ended": self.failure} if self.failure else {})}
