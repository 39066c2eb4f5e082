"""The review of a run (`--review`), as the report shows it: beside the verdicts, never in them.
What the reviewer found per trial and per discordant pair is read from `reviews/` (review/records.py);
the report counts the failure modes per task and arm, puts first the trials whose agent the
reviewer says broke its arm's rules, and says what the review read and cost. No outcome, grade or
statistic of the report reads any of it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, PrivateAttr

from ..review.records import ReviewRun, read_reviews
from .trial_lists import LISTED

def md(text: object, limit: int = 600) -> str:
    """The reviewer's words (which may echo the agent's) as one line of Markdown text: no line break
    to start a heading or end a table row, no cell separator, no raw HTML."""
    flat = " ".join(str(text).split())
    flat = flat.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;").replace("`", "'")
    return flat if len(flat) <= limit else flat[:limit] + "..."


READING_AID = ("a reading aid, not a grade: a model's reading of the harness's own account of each trial, which "
               "changes no outcome, figure or test of this report")


class ReviewedTrial(BaseModel):
    trial_id: str
    task: str
    arm: str
    why: str
    review: dict | None = None  # {summary, failure_mode, arm_rules_kept, breach, confidence}
    error: str | None = None


class ModeCount(BaseModel):
    task: str
    arm: str
    modes: dict[str, int]


class ReviewedPair(BaseModel):
    task: str
    attempt: int
    passed: str
    difference: str | None
    tools_helped: str | None
    error: str | None = None


class ReviewSection(BaseModel):
    run: ReviewRun | None
    modes: list[ModeCount] = Field(default_factory=list)
    to_check: list[ReviewedTrial] = Field(default_factory=list)  # the reviewer found the arm's rules broken
    trials: list[ReviewedTrial] = Field(default_factory=list)  # the first LISTED reviewed
    trials_total: int = 0
    pairs: list[ReviewedPair] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    _by_trial: dict[str, str] = PrivateAttr(default_factory=dict)  # every reviewed trial's mode, for the trials index

    def mode_of(self) -> dict[str, str]:
        return dict(self._by_trial)


def review_section(experiment_dir: Path) -> ReviewSection | None:
    run, trials, pairs, problems = read_reviews(experiment_dir)
    if run is None and not trials and not pairs:
        return None
    counts: dict[tuple[str, str], dict[str, int]] = {}
    shown = []
    for t in sorted(trials, key=lambda t: t.trial_id):
        mode = t.finding.failure_mode if t.finding else "no finding"
        cell = counts.setdefault((t.task, t.arm), {})
        cell[mode] = cell.get(mode, 0) + 1
        shown.append(ReviewedTrial(trial_id=t.trial_id, task=t.task, arm=t.arm, why=t.why,
                                   review=t.finding.model_dump() if t.finding else None, error=t.error))
    section = ReviewSection(
        run=run, modes=[ModeCount(task=task, arm=arm, modes=dict(sorted(m.items()))) for (task, arm), m in sorted(counts.items())],
        to_check=[t for t in shown if t.review and not t.review["arm_rules_kept"]][:LISTED], trials=shown[:LISTED],
        trials_total=len(shown),
        pairs=[ReviewedPair(task=p.task, attempt=p.attempt, passed=p.passed, difference=p.finding.difference if p.finding else None,
                            tools_helped=p.finding.tools_helped if p.finding else None, error=p.error)
               for p in sorted(pairs, key=lambda p: (p.task, p.attempt))][:LISTED],
        problems=problems)
    section._by_trial = {t.trial_id: (("rules broken: " if not t.review["arm_rules_kept"] else "") + t.review["failure_mode"]
                                      if t.review else "no finding") for t in shown}
    return section


def to_check_lines(section: ReviewSection | None) -> list[str]:
    """For the top of report.md: the trials to check by hand."""
    if section is None or not section.to_check:
        return []
    return ["", f"**Trials to check by hand**: the reviewer found the agent broke its arm's rules in {len(section.to_check)} "
                "trial(s) (its reading, not the harness's verdict; the trials' pages show the calls):", ""] + \
        [f"- `{t.trial_id}`: {md(t.review['breach'] or t.review['summary'])}" for t in section.to_check]


def review_lines(section: ReviewSection | None) -> list[str]:
    if section is None:
        return []
    run = section.run
    out = ["", "## Review of the trials", ""]
    if run is not None:
        cost = "unpriced" if run.cost_usd is None else f"${run.cost_usd:.4f}"
        chosen = "every trial" if run.selection == "all" else "every failed, errored, flagged or discordant-pair trial"
        out += [f"{run.trials_reviewed} trial(s) and {run.pairs_reviewed} discordant pair(s) reviewed ({chosen}) by "
                f"`{run.model}`: {run.requests} request(s), {cost}, apart from the agents' spend; each trial's account "
                f"shortened to {run.account_budget_chars:,} characters; {run.errors} without a finding. This is {READING_AID}.", ""]
    if section.modes:
        out += ["| task | arm | failure modes (reviewed trials) |", "|---|---|---|"]
        out += [f"| {m.task} | {m.arm} | {', '.join(f'{k} {v}' for k, v in m.modes.items())} |" for m in section.modes]
    if section.pairs:
        out += ["", "What the treatment trial did differently, in each discordant pair:", ""]
        out += [f"- {p.task} attempt {p.attempt} ({p.passed} passed): "
                + (f"{md(p.difference)} (the tools helped: {p.tools_helped})" if p.difference else f"no finding ({md(p.error)})")
                for p in section.pairs]
    if section.trials:
        out += ["", "| trial | why reviewed | failure mode | kept its arm's rules | summary |", "|---|---|---|---|---|"]
        for t in section.trials:
            if t.review:
                out.append(f"| {t.trial_id} | {md(t.why)} | {t.review['failure_mode']} ({t.review['confidence']}) | "
                           f"{'yes' if t.review['arm_rules_kept'] else 'no: ' + md(t.review['breach'])} | "
                           f"{md(t.review['summary'])} |")
            else:
                out.append(f"| {t.trial_id} | {md(t.why)} | no finding | – | {md(t.error, 200)} |")
        if section.trials_total > len(section.trials):
            out.append(f"- and {section.trials_total - len(section.trials)} more: each trial's page shows its review")
    out += [f"- unreadable: {md(p)}" for p in section.problems]
    return out
