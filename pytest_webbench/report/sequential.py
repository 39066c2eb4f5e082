"""What a sequential run decided and saved, for the report: the rule, each task's decision (or that
it ran to its cap), and the trials not run because their task was decided."""

from __future__ import annotations

from pydantic import BaseModel

from ..design.pairing import TrialKey
from ..results.records import PlannedTrial, RunManifest
from ..results.decisions import TaskDecision, not_run
from ..stats import holm


class TaskStop(BaseModel):
    task: str
    decision: TaskDecision | None  # None: not decided (ran to its cap, or the run is unfinished)
    pairs_run: int  # pairs with at least one trial recorded
    # the decision's anytime p-values, Holm-adjusted over the run's decided tasks (one family per endpoint)
    p_holm: float | None = None
    speed_p_holm: float | None = None


def _ran_on(at: int | None, pairs: int, other: str) -> str:
    return f" (the task ran on to {pairs} pairs for its {other} walk)" if at is not None and pairs > at else ""


def verdict_words(stop: TaskStop, alpha: float, max_pairs: int) -> str:
    """What a task's stop says, in words a reader cannot take for more: an effect only where it also
    survives Holm's adjustment over the run's tasks at the rule's level (`alpha`, per endpoint); a stop
    without an effect says why it stopped, and that it shows no effect, not that there is none. A task
    runs until both its walks (pass/fail and speed) have stopped: each says where it stopped."""
    d = stop.decision
    if d is None:
        return "not decided (ran to its cap)"
    at = d.pass_fail_stopped_at or d.pairs
    split = f"{d.control_only} control-only / {d.treatment_only} treatment-only"
    if d.outcome == "effect" and stop.p_holm is not None and stop.p_holm <= alpha:
        said = f"pass/fail: effect for {d.favours} at pair {at} ({split})"
    elif d.outcome == "effect":
        said = (f"pass/fail: the rule's boundary for {d.favours} reached at pair {at} ({split}), not kept once adjusted "
                f"over the run's tasks (Holm p = {stop.p_holm:.3g} > {alpha:g}): no effect claimed")
    elif at >= max_pairs:
        said = f"pass/fail: no effect shown by the cap ({at} pairs, {split}; none ruled out)"
    else:
        said = (f"pass/fail: no effect shown; after {at} pairs ({split}) the rule judged an effect out of reach by "
                f"the cap, and stopped this walk; none ruled out")
    said += _ran_on(d.pass_fail_stopped_at, d.pairs, "speed")
    speed_at = d.speed_stopped_at or d.pairs
    faster = f"{d.treatment_faster} treatment faster / {d.control_faster} control faster"
    if d.speed == "effect" and stop.speed_p_holm is not None and stop.speed_p_holm <= alpha:
        speed = f"speed: faster for {d.speed_favours} at pair {speed_at} ({faster})"
    elif d.speed == "effect":
        speed = (f"speed: the boundary for {d.speed_favours} reached at pair {speed_at} ({faster}), not kept once "
                 f"adjusted over the run's tasks (Holm p = {stop.speed_p_holm:.3g} > {alpha:g}): no effect claimed")
    else:
        speed = f"speed: no difference shown after {speed_at} pairs ({faster})"
    return f"{said}; {speed}{_ran_on(d.speed_stopped_at, d.pairs, 'pass/fail')}"


class SequentialSummary(BaseModel):
    rule: str
    max_pairs: int
    tasks: list[TaskStop]
    trials_planned: int  # the plan at its cap: every task at max_pairs
    trials_run: int
    trials_not_run: int  # their task was decided first
    saved_share: float  # not run / planned
    fixed_design_pairs: int  # the fixed design the rule was tuned to replace, pairs per task
    fixed_design_trials: int
    alpha_per_endpoint: float = 0.025  # the rule's level for each task's pass/fail (and speed) decision
    # the smallest anytime p any walk can reach by the cap (every pair one way), and whether that
    # survives Holm over this run's decided tasks: where not, no task could have shown an effect
    smallest_p: float | None = None
    holm_reachable: bool = True


def not_run_trials(manifest: RunManifest, decisions: dict[str, TaskDecision], recorded: set[str]) -> set[str]:
    """Planned trials without a record whose task was decided before their round."""
    if manifest.sequential is None:
        return set()
    return {t.trial_id for t in manifest.trials
            if t.trial_id not in recorded and not_run(TrialKey(t.task, t.attempt, t.arm), decisions.get(t.task))}


def summarize(manifest: RunManifest, decisions: dict[str, TaskDecision], planned: list[PlannedTrial],
              recorded: set[str], skipped: set[str]) -> SequentialSummary | None:
    plan = manifest.sequential
    if plan is None:
        return None
    in_plan = list(dict.fromkeys(t.task for t in manifest.trials))  # the tasks this run planned, in order
    attempts_run: dict[str, set[int]] = {task: set() for task in in_plan}
    for t in planned:
        if t.pair_id and t.trial_id in recorded:
            attempts_run[t.task].add(t.attempt)
    tasks = [TaskStop(task=task, decision=decisions.get(task), pairs_run=len(attempts_run[task])) for task in in_plan]
    for stop, adjusted in zip(tasks, holm([t.decision.p_value if t.decision else None for t in tasks])):
        stop.p_holm = adjusted
    for stop, adjusted in zip(tasks, holm([t.decision.speed_p_value if t.decision else None for t in tasks])):
        stop.speed_p_holm = adjusted
    fixed = max(1, manifest.attempts // 2)
    per_pair = len(manifest.arms)
    alpha = plan.alpha_per_endpoint if plan.alpha_per_endpoint is not None else plan.alpha / 2
    from ..stats.sequential import SequentialRule

    smallest = SequentialRule(alpha=alpha, max_pairs=plan.max_pairs, futility_below=plan.futility_below).anytime_p([1] * plan.max_pairs)
    family = sum(1 for t in tasks if t.decision is not None) or len(tasks)
    return SequentialSummary(
        rule=plan.description, max_pairs=plan.max_pairs, tasks=tasks, trials_planned=len(manifest.trials),
        trials_run=len(recorded & {t.trial_id for t in manifest.trials}), trials_not_run=len(skipped),
        saved_share=len(skipped) / len(manifest.trials) if manifest.trials else 0.0,
        fixed_design_pairs=fixed, fixed_design_trials=fixed * per_pair * len(in_plan),
        alpha_per_endpoint=alpha, smallest_p=smallest, holm_reachable=family * smallest <= alpha,
    )
