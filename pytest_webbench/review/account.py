"""The harness's own account of one trial, as a reviewer reads it: built from the records on disk
alone (the trial's record, the proxy's call log, the gateway's model log, the page the harness read
after the agent), never from what the agent wrote about itself. Bounded: every call's arguments
and result are shortened, and past ACCOUNT_CHARS the middle of the run is left out, said so.

Everything in it that came from the agent or the site (its code, its model's words, the pages'
text, its answer) is written on the harness's lines as one escaped piece: its newlines (and every
control character) shown as \\x0a and every character past ASCII as an escape, so no text of the
agent's can start a line of its own (forge an OUTCOME line, a refused call, a pair's marker), and
the budget in characters is one in bytes. The calls the proxy refused are kept whatever the budget (up to MAX_REFUSED): they are
what a review of the arm's rules rests on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..design.arms import arm_policy
from ..gateway.meter import read_model_log
from ..gateway.wiring import MODEL_LOG
from ..proxy.log import read_call_log
from ..results.records import TrialRecord

ACCOUNT_CHARS = 16_000  # about 4,000-5,000 tokens: the reviewer's input per trial, at most
PIECE_CHARS = 300  # one call's arguments, or its result, or one model turn's words
PAGE_CHARS = 1_500


MAX_REFUSED = 40  # refused calls always kept in the account, past the budget's shortening


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127)}  # a newline, and every other break a reader may take for one


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _short(value: Any, limit: int = PIECE_CHARS) -> str:
    """One piece of the agent's or the site's, on one line, ASCII, at most `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True, default=str)
    text = _ascii(text).translate(_CONTROL)
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def arm_rules(arm: str) -> str:
    policy = arm_policy(arm)
    tools = ", ".join(sorted(policy.tools))
    extra = []
    if policy.inject_tool_batch:
        extra.append("the site's injected WebMCP tools are registered for it (the treatment)")
    if policy.forbid_webmcp_in_code:
        extra.append("no WebMCP in its code")
    if policy.page_api_only:
        extra.append("no raw CDP, no direct HTTP (fetch, page.request, curl), no rerouting: Playwright's page API only")
    return f"{arm}: browser tools {tools}" + (f"; {'; '.join(extra)}" if extra else "")


def _calls(folder: Path) -> tuple[list[str], list[str]]:
    """Every browser call as the proxy logged it, and the refused ones apart."""
    lines, refused = [], []
    for r in read_call_log(folder / "proxy-log.jsonl").records:
        if r.method != "tools/call":
            continue
        arguments = {k: v for k, v in (r.arguments or {}).items() if k != "session_id"} if isinstance(r.arguments, dict) else r.arguments
        if r.decision == "rejected":
            line = f"#{r.seq} REFUSED by the proxy (rule {_short(r.rule, 80)}): {_short(r.tool, 80)} {_short(arguments)} -- {_short(r.detail or '')}"
            refused.append(line)
        else:
            line = f"#{r.seq} {_short(r.tool, 80)} {_short(arguments)} -> [{r.outcome}] {_short(r.result or r.detail or '')}"
        lines.append(line)
    return lines, refused


def _turns(folder: Path) -> list[str]:
    lines = []
    for m in read_model_log(folder / MODEL_LOG):
        if m.decision not in ("forwarded", "upstream_error"):
            lines.append(f"turn {m.seq}: the gateway {m.decision} it ({_short(m.detail or '', 200)})")
            continue
        asked = ", ".join(f"{_short(c.get('name'), 80)}({_short(c.get('arguments', ''), 150)})" for c in m.tool_calls) or "no tool"
        lines.append(f"turn {m.seq}: asked for {asked}" + (f"; said {_short(m.reply_text)}" if m.reply_text else ""))
    return lines


def _page(folder: Path) -> str:
    try:
        page = json.loads((folder / "page-check.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return "(not read)"
    if not isinstance(page, dict):
        return "(not read)"
    return f"{_short(page.get('url'), 300)}; what the check read there: {_short(page.get('value'), PAGE_CHARS)}"


def build_account(experiment_dir: Path, record: TrialRecord, budget: int = ACCOUNT_CHARS) -> tuple[str, bool]:
    """The account (text) and whether it was shortened to `budget` characters."""
    folder = experiment_dir / record.harbor_trial_dir if record.harbor_trial_dir else experiment_dir / "missing"
    head = [
        f"TRIAL {record.trial_id}: task {record.task}, arm {record.arm}, attempt {record.attempt}",
        f"ARM RULES: {arm_rules(record.arm)}",
        f"OUTCOME: {record.outcome}; STOP REASON: {record.stop_reason or 'none'}",
        f"GRADE: {_short(record.detail, 600)}",
        f"FLAGS: {'; '.join(_short(f, 300) for f in record.flags[:20]) or 'none'}",
        f"TIME: agent {record.timings.agent_sec if record.timings.agent_sec is not None else '?'} s; "
        f"browser calls {record.calls.forwarded} forwarded, {record.calls.rejected} refused"
        + ("; the call cap was reached" if record.calls.cap_hit else ""),
        "INSTRUCTION (the task's, as the agent was given it):", _short(record.instruction, 3000),
    ]
    (calls, refused), turns = _calls(folder), _turns(folder)
    tail = [f"FINAL PAGE (read by the harness after the agent): {_page(folder)}",
            f"ANSWER (the agent's answer file): {_short(record.answer_raw if record.answer_raw is not None else record.answer, 1500)}"]
    body = ["BROWSER CALLS (the proxy's log):", *(calls or ["(none)"]),
            "MODEL TURNS (the gateway's log):", *(turns or ["(none: no model was asked)"])]
    text = "\n".join(head + body + tail)
    if len(text) <= budget:
        return text, False
    # the refused calls whole (what a review of the arm's rules rests on), then the run's start and its
    # end, each a run of lines without a gap, and the middle left out and counted
    kept_refused = refused[:MAX_REFUSED]
    block = ([f"CALLS THE PROXY REFUSED ({len(refused)}; kept whatever the account's length"
              + (f", the first {MAX_REFUSED}" if len(refused) > MAX_REFUSED else "") + "):", *kept_refused] if refused else [])
    room = budget - len("\n".join(head + block + tail)) - 200
    front: list[str] = []
    used = 0
    for line in body:
        if used + len(line) + 1 > room // 2:
            break
        front.append(line)
        used += len(line) + 1
    back: list[str] = []
    for line in reversed(body[len(front):]):
        if used + len(line) + 1 > room:
            break
        back.insert(0, line)
        used += len(line) + 1
    left = len(body) - len(front) - len(back)
    text = "\n".join(head + block + front + [f"... [{left} lines of calls and turns left out to keep the account under "
                                              f"{budget} characters] ..."] + back + tail)
    return text[:budget], True
