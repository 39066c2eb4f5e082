"""Sequential runs (`--sequential`): a task stops when it is decided.

Pairs run in rounds (attempt 1 of every task, then attempt 2, ...), up to `--attempts` pairs per
task. Before a pair starts, its task's pairs so far are read from the records on disk and the rule
(`stats/sequential.py`: an exact boundary on the discordant pairs for every look up to the cap,
with a futility bound) is applied to the pass/fail split and to the speed split, each at half the
run's alpha, so the chance of any false claim about a task, on either, is at most alpha. Once both
have stopped, the task's decision is written to `decisions/<task>.json` (the first writer wins)
and its later pairs, and their playwright trials, are not run: the pair scheduler stops handing
them out and a worker skips any it already holds. A decided task's remaining trials are "not run
(decided)" in the report, never missing.

A decision rests on the longest run of attempts 1..k whose pairs have all ended, never on whichever
pairs ended first: under `-n`, fast outcomes (a quick failure) end before slow ones (a timeout),
so the pairs that happen to be complete are a biased sample, while a prefix in attempt order is
not. A pair that ended early waits for those before it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..design.pairing import TrialKey
from ..stats import timed
from ..results.decisions import SequentialPlan, TaskDecision, not_run, read_decision, write_decision

ALPHA = 0.05  # the chance of any false claim about a task (pass/fail or speed)
ENDPOINTS = 2  # pass/fail and speed, each tested at ALPHA / ENDPOINTS (Bonferroni)


def plan_for(attempts: int) -> SequentialPlan:
    rule = rule_for(attempts)
    return SequentialPlan(max_pairs=rule.max_pairs, alpha=ALPHA, alpha_per_endpoint=rule.alpha,
                          futility_below=rule.futility_below, description=rule.describe())


def smallest_cap() -> int:
    """The fewest pairs in which an effect can be declared at alpha / 2: all of them one way."""
    from ..stats.sequential import SequentialRule

    return SequentialRule.smallest_cap(ALPHA / ENDPOINTS)


def rule_for(attempts: int):
    """The rule for a run of at most `attempts` pairs per task: the futility threshold of the preset
    tuned for a fixed design of half as many pairs (benchmarks/stats_calibration.py), capped at
    `attempts`, and lowered where it would stop a task whose every pair so far favoured one arm, so
    that every cap `--sequential` accepts can declare an effect."""
    from ..stats.sequential import SequentialRule

    preset = SequentialRule.for_fixed_design(max(1, attempts // 2), alpha=ALPHA / ENDPOINTS)
    rule = SequentialRule(alpha=ALPHA / ENDPOINTS, max_pairs=attempts, futility_below=preset.futility_below)
    one_way = min((rule.predictive_chance(0, n, n) for n in range(rule.min_pairs_for_futility, attempts)), default=1.0)
    if one_way <= rule.futility_below:
        rule = SequentialRule(alpha=ALPHA / ENDPOINTS, max_pairs=attempts, futility_below=math.floor(one_way * 0.9 * 1e6) / 1e6)
    return rule


@dataclass
class PairOutcome:
    """One ended pair, as the rule reads it."""

    control_passed: bool
    treatment_passed: bool
    control_sec: float | None = None
    treatment_sec: float | None = None

    @property
    def step(self) -> int:
        """+1: only treatment passed; -1: only control; 0: both or neither."""
        return int(self.treatment_passed) - int(self.control_passed)

    @property
    def speed_step(self) -> int:
        """+1: both passed and treatment was faster; -1: control was; 0 otherwise (ties dropped)."""
        if not (self.control_passed and self.treatment_passed and timed(self.control_sec) and timed(self.treatment_sec)):
            return 0
        return (self.treatment_sec < self.control_sec) - (self.control_sec < self.treatment_sec)


@dataclass
class TaskPairs:
    """The pairs a task's decision may rest on: the ended pairs among attempts 1..k, where k is the
    longest prefix whose every pair has ended (an errored pair ends, and is left out)."""

    attempts: list[int] = field(default_factory=list)
    pairs: list[PairOutcome] = field(default_factory=list)
    last_attempt: int = 0  # the highest attempt with any trial recorded


def prefix_pairs(by_attempt: dict[int, tuple[dict | None, dict | None]], attempts: int) -> TaskPairs:
    """From each attempt's (control, treatment) records, or None where not yet recorded."""
    out = TaskPairs()
    prefix_open = True
    for attempt in range(1, attempts + 1):
        c, t = by_attempt.get(attempt, (None, None))
        if c is not None or t is not None:
            out.last_attempt = attempt
        if not prefix_open:
            continue
        if c is None or t is None:
            prefix_open = False  # attempts after this one wait for it
            continue
        if c.get("outcome") in ("passed", "failed") and t.get("outcome") in ("passed", "failed"):
            out.attempts.append(attempt)
            out.pairs.append(PairOutcome(
                c["outcome"] == "passed", t["outcome"] == "passed",
                (c.get("timings") or {}).get("agent_sec"), (t.get("timings") or {}).get("agent_sec")))
    return out


def _read_record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def task_pairs(experiment_dir: Path, task: str, attempts: int) -> TaskPairs:
    trials = experiment_dir / "trials"
    by_attempt = {
        attempt: (_read_record(trials / f"{TrialKey(task, attempt, 'control').trial_id}.json"),
                  _read_record(trials / f"{TrialKey(task, attempt, 'treatment').trial_id}.json"))
        for attempt in range(1, attempts + 1)}
    return prefix_pairs(by_attempt, attempts)


def _verdict(rule, steps: list[int]) -> tuple[str, str | None, int | None]:
    """One endpoint's verdict on its walk (+1 favours treatment, -1 control, per pair in attempt order),
    the arm an effect favours, and the pair at which the walk first stopped (None: still running).
    An effect once reached stands: the error bound already counts every crossing up to the cap, and
    the anytime p-value is the walk's best, so a walk that crossed and fell back is an effect, never
    "futility" beside a p-value under alpha."""
    control = treatment = 0
    stopped = None
    for pairs, step in enumerate(steps, 1):
        control += step < 0
        treatment += step > 0
        said = rule.decide(control, treatment, pairs)
        if said == "effect":
            return "effect", "treatment" if treatment > control else "control", pairs
        if said != "continue" and stopped is None:
            stopped = pairs
    final = rule.decide(control, treatment, len(steps))
    return final, None, stopped if final != "continue" else None


def decision_on(rule, task: str, seen: TaskPairs) -> TaskDecision | None:
    """The rule applied to the pairs seen: a decision once both endpoints have stopped, else None."""
    pairs = len(seen.pairs)
    if pairs == 0:
        return None
    steps, speed_steps = [p.step for p in seen.pairs], [p.speed_step for p in seen.pairs]
    c_only, t_only, t_fast, c_fast = steps.count(-1), steps.count(1), speed_steps.count(1), speed_steps.count(-1)
    outcome, favours, outcome_at = _verdict(rule, steps)
    speed, speed_favours, speed_at = _verdict(rule, speed_steps)
    if outcome == "continue" or speed == "continue":  # a task stops once both endpoints have
        return None
    return TaskDecision(
        task=task, outcome=outcome, favours=favours, speed=speed, speed_favours=speed_favours, pairs=pairs,
        pass_fail_stopped_at=outcome_at, speed_stopped_at=speed_at,
        attempts=seen.attempts, last_attempt=seen.last_attempt, control_only=c_only, treatment_only=t_only,
        treatment_faster=t_fast, control_faster=c_fast, p_value=rule.anytime_p(steps),
        speed_p_value=rule.anytime_p(speed_steps),
    )


def decide_task(experiment_dir: Path, task: str, attempts: int) -> TaskDecision | None:
    """The task's decision: the one on disk, or a new one if its pairs so far decide it (written
    with an exclusive create, so of two workers deciding at once the first wins)."""
    if (known := read_decision(experiment_dir, task)) is not None:
        return known
    decision = decision_on(rule_for(attempts), task, task_pairs(experiment_dir, task, attempts))
    return None if decision is None else write_decision(experiment_dir, decision)


def skip_reason(decision: TaskDecision) -> str:
    said = (f"the rule's boundary for {decision.favours}" if decision.outcome == "effect"
            else "no effect shown")  # a stop without an effect shows none: it does not show there is none
    return f"not run: task {decision.task} stopped after {decision.pairs} pair(s) ({said}; speed {decision.speed})"


def skip_if_decided(st, key: TrialKey, config) -> None:
    """Called before a trial's setup: skips it (nothing opened, nothing recorded) when its task was
    decided before its round. A pair is judged at its first member, and its second member follows
    it, so a pair is never split; a playwright trial follows its round's pair."""
    import pytest

    spec = st.specs.get(key.trial_id)
    if key.pair_id is not None and spec is not None and spec.pair_position == 2:
        if key.pair_id in st.skipped_pairs:
            pytest.skip(f"not run: its pair's first trial was not run (task {key.task} decided)")
        return
    decision = decide_task(st.experiment_dir, key.task, st.options.attempts)
    if not_run(key, decision):
        if key.pair_id is not None:
            st.skipped_pairs.add(key.pair_id)
        pytest.skip(skip_reason(decision))
