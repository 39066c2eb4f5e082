"""Sequential runs (`--sequential`): a task stops when it is decided.

Pairs run in rounds (attempt 1 of every task, then attempt 2, ...), up to `--attempts` pairs per
task. Before a pair starts, its task's pairs so far are read from the records on disk and the rule
(`stats/sequential.py`: an exact, anytime-valid boundary on the discordant pairs, with a futility
bound) is applied to the pass/fail split and, jointly, to the speed split; once both have stopped,
the task's decision is written to `decisions/<task>.json` (the first writer wins) and its later
pairs, and their playwright trials, are not run: the pair scheduler stops handing them out and a
worker skips any it already holds. A decided task's remaining trials are "not run (decided)" in
the report, never missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..design.pairing import TrialKey
from ..results.decisions import SequentialPlan, TaskDecision, not_run, read_decision, write_decision


def plan_for(attempts: int) -> SequentialPlan:
    rule = rule_for(attempts)
    return SequentialPlan(max_pairs=rule.max_pairs, alpha=rule.alpha, futility_below=rule.futility_below,
                          description=rule.describe())


def rule_for(attempts: int):
    """The rule for a run of at most `attempts` pairs per task: the preset tuned for a fixed design of
    half as many pairs (benchmarks/stats_calibration.py), capped at `attempts`."""
    from ..stats.sequential import SequentialRule

    preset = SequentialRule.for_fixed_design(max(1, attempts // 2))
    return SequentialRule(max_pairs=attempts, futility_below=preset.futility_below)


def _read_record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def task_counts(experiment_dir: Path, task: str, attempts: int) -> tuple[list[int], int, int, int, int, int]:
    """(the tested pairs' attempts, control only, treatment only, treatment faster, control faster,
    last attempt run) from the task's records on disk; a pair counts once both its trials ended
    (passed or failed)."""
    tested: list[int] = []
    c_only = t_only = t_fast = c_fast = last = 0
    trials = experiment_dir / "trials"
    for attempt in range(1, attempts + 1):
        c = _read_record(trials / f"{TrialKey(task, attempt, 'control').trial_id}.json")
        t = _read_record(trials / f"{TrialKey(task, attempt, 'treatment').trial_id}.json")
        if c is not None or t is not None:
            last = attempt
        if not (c and t and c.get("outcome") in ("passed", "failed") and t.get("outcome") in ("passed", "failed")):
            continue
        tested.append(attempt)
        cp, tp = c["outcome"] == "passed", t["outcome"] == "passed"
        c_only += cp and not tp
        t_only += tp and not cp
        if cp and tp:
            cs, ts = (c.get("timings") or {}).get("agent_sec"), (t.get("timings") or {}).get("agent_sec")
            if cs and ts:
                t_fast += ts < cs
                c_fast += cs < ts
    return tested, c_only, t_only, t_fast, c_fast, last


def decide_task(experiment_dir: Path, task: str, attempts: int) -> TaskDecision | None:
    """The task's decision: the one on disk, or a new one if its pairs so far decide it (written
    with an exclusive create, so of two workers deciding at once the first wins)."""
    if (known := read_decision(experiment_dir, task)) is not None:
        return known
    rule = rule_for(attempts)
    tested, c_only, t_only, t_fast, c_fast, last = task_counts(experiment_dir, task, attempts)
    pairs = len(tested)
    if pairs == 0:
        return None
    outcome = rule.decide(c_only, t_only, pairs)
    speed = rule.decide_speed(t_fast, c_fast, pairs)
    if outcome == "continue" or speed == "continue":  # the joint policy: both verdicts are kept
        return None
    decision = TaskDecision(
        task=task, outcome=outcome, favours=_favours(outcome, t_only, c_only), speed=speed,
        speed_favours=_favours(speed, t_fast, c_fast), pairs=pairs, attempts=tested, last_attempt=last, control_only=c_only,
        treatment_only=t_only, treatment_faster=t_fast, control_faster=c_fast,
    )
    return write_decision(experiment_dir, decision)


def _favours(verdict: str, treatment: int, control: int) -> str | None:
    if verdict != "effect":
        return None
    return "treatment" if treatment > control else "control"


def skip_reason(decision: TaskDecision) -> str:
    return (f"not run: task {decision.task} was decided after {decision.pairs} pair(s) "
            f"({decision.outcome}{' for ' + decision.favours if decision.favours else ''}; speed {decision.speed})")


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
