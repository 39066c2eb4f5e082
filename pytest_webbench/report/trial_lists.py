"""The report's trial lists (not passed, flagged, rejected calls, cap hits, over spend, WebMCP tools
outside their arm, token counts the CLI and gateway disagree on) and the hostile runner's walls.

The report names the first LISTED of each list; pages/index.html names every trial. A list's
notes are written only for the trials shown: at 100,000 trials most are never read.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from ..results.records import TrialRecord

LISTED = 200  # trials a list of the report names; pages/index.html lists every trial
TRIAL_LISTS = ("not_passed", "flagged", "rejected", "cap_hits", "over_spend", "toolset_invalid", "token_disagreements")


class TrialNote(BaseModel):
    trial_id: str
    arm: str
    task: str
    note: str


class WallRow(BaseModel):
    """One route the hostile runner tried, over the run's trials (runners/hostile.py)."""

    route: str
    held: int = 0
    breached: int = 0
    not_probed: int = 0
    evidence: str = ""  # a breach's evidence (the first), else what a held route answered


def wall_rows(records: Iterable[TrialRecord]) -> list[WallRow]:
    rows: dict[str, WallRow] = {}
    for r in records:
        for w in r.walls or []:
            row = rows.setdefault(w.route, WallRow(route=w.route, evidence=w.evidence))
            if w.status == "breached":
                if not row.breached:
                    row.evidence = f"{r.trial_id}: {w.evidence}"
                row.breached += 1
            elif w.status == "held":
                row.held += 1
            else:
                row.not_probed += 1
    return list(rows.values())


def toolset_invalid(r: TrialRecord) -> str | None:
    invokes = r.calls.webmcp_invokes
    if r.arm == "playwright" and invokes:
        return "invoked WebMCP tools in the playwright arm"
    if r.arm != "treatment" and any(k.startswith("injected:") for k in invokes):
        return "invoked an injected tool outside the treatment arm"
    return None


def cli_disagrees(r: TrialRecord) -> str | None:
    """Where the gateway metered a trial and the CLI's own figures differ from it."""
    cli = r.tokens_cli
    if r.tokens.source != "gateway" or cli is None or cli.input is None:
        return None
    ours, theirs = (r.tokens.input, r.tokens.cached, r.tokens.output), (cli.input, cli.cached, cli.output)
    if ours == theirs:
        return None
    return f"gateway metered input/cached/output {ours}, the CLI reported {theirs}"


NOTE_TEXT = {
    "not_passed": lambda r: f"{r.outcome}: {r.stop_reason or ''}: {r.detail[:200]}",
    "flagged": lambda r: "; ".join(r.flags),
    "rejected": lambda r: (", ".join(f"{k} x{v}" for k, v in sorted(r.calls.rejected_rules.items()))
                           or f"{r.calls.rejected} call(s)"),
    "cap_hits": lambda r: f"{r.calls.forwarded} calls",
    "over_spend": lambda r: r.detail,
    "toolset_invalid": toolset_invalid,
    "token_disagreements": cli_disagrees,
}


def listed_trials(ordered: list[TrialRecord]) -> dict[str, list[TrialRecord]]:
    """The records each trial list names, in one pass (in trial-id order). Their notes are written
    only for what is shown (trial_notes): at 100,000 trials, tens of thousands are never read."""
    out: dict[str, list[TrialRecord]] = {k: [] for k in TRIAL_LISTS}
    not_passed, flagged, rejected, cap_hits = out["not_passed"], out["flagged"], out["rejected"], out["cap_hits"]
    for r in ordered:
        if r.outcome != "passed":
            not_passed.append(r)
        if r.stop_reason == "over_spend":
            out["over_spend"].append(r)
        if r.flags:
            flagged.append(r)
        calls = r.calls
        if calls.rejected:
            rejected.append(r)
        if calls.cap_hit:
            cap_hits.append(r)
        if calls.webmcp_invokes and toolset_invalid(r):
            out["toolset_invalid"].append(r)
        if r.tokens_cli is not None and cli_disagrees(r):
            out["token_disagreements"].append(r)
    return out


def trial_notes(name: str, records: list[TrialRecord]) -> list[TrialNote]:
    text = NOTE_TEXT[name]
    return [TrialNote(trial_id=r.trial_id, arm=r.arm, task=r.task, note=text(r)) for r in records]
