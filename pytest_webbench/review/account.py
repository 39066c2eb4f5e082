"""The harness's own account of one trial, as a reviewer reads it: built from the records on disk
alone (the trial's record, the proxy's call log, the gateway's model log, the page the harness read
after the agent), never from what the agent wrote about itself. Bounded: every call's arguments
and result are shortened, and past ACCOUNT_CHARS the middle of the run is left out, said so.

Everything in it that came from the agent or the site (its code, its model's words, the pages'
text) is quoted as data inside the account, so the reviewer's prompt can tell it apart."""

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


def _short(value: Any, limit: int = PIECE_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\r", " ")
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


def _calls(folder: Path) -> list[str]:
    lines = []
    for r in read_call_log(folder / "proxy-log.jsonl").records:
        if r.method != "tools/call":
            continue
        arguments = {k: v for k, v in (r.arguments or {}).items() if k != "session_id"} if isinstance(r.arguments, dict) else r.arguments
        if r.decision == "rejected":
            lines.append(f"#{r.seq} REFUSED by the proxy (rule {r.rule}): {r.tool} {_short(arguments)} -- {_short(r.detail or '')}")
        else:
            lines.append(f"#{r.seq} {r.tool} {_short(arguments)} -> [{r.outcome}] {_short(r.result or r.detail or '')}")
    return lines


def _turns(folder: Path) -> list[str]:
    lines = []
    for m in read_model_log(folder / MODEL_LOG):
        if m.decision not in ("forwarded", "upstream_error"):
            lines.append(f"turn {m.seq}: the gateway {m.decision} it ({_short(m.detail or '', 200)})")
            continue
        asked = ", ".join(f"{c.get('name')}({_short(c.get('arguments', ''), 150)})" for c in m.tool_calls) or "no tool"
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
        f"FLAGS: {'; '.join(_short(f, 300) for f in record.flags) or 'none'}",
        f"TIME: agent {record.timings.agent_sec if record.timings.agent_sec is not None else '?'} s; "
        f"browser calls {record.calls.forwarded} forwarded, {record.calls.rejected} refused"
        + ("; the call cap was reached" if record.calls.cap_hit else ""),
        "INSTRUCTION (the task's, as the agent was given it):", _short(record.instruction, 3000),
    ]
    calls, turns = _calls(folder), _turns(folder)
    tail = [f"FINAL PAGE (read by the harness after the agent): {_page(folder)}",
            f"ANSWER (the agent's answer file): {_short(record.answer_raw if record.answer_raw is not None else record.answer, 1500)}"]
    body = ["BROWSER CALLS (the proxy's log):", *(calls or ["(none)"]),
            "MODEL TURNS (the gateway's log):", *(turns or ["(none: no model was asked)"])]
    text = "\n".join(head + body + tail)
    if len(text) <= budget:
        return text, False
    # keep the start and the end of the run, the middle left out and counted
    room = budget - len("\n".join(head + tail)) - 200
    kept, left = [], 0
    front, back = body[: len(body) // 2], body[len(body) // 2:]
    used = 0
    for line in front:
        if used + len(line) + 1 > room // 2:
            left += 1
            continue
        kept.append(line)
        used += len(line) + 1
    ending, used_back = [], 0
    for line in reversed(back):
        if used_back + len(line) + 1 > room - used:
            left += 1
            continue
        ending.insert(0, line)
        used_back += len(line) + 1
    text = "\n".join(head + kept + [f"... [{left} lines of calls and turns left out to keep the account under {budget} chars] ..."]
                     + ending + tail)
    return text[:budget], True
