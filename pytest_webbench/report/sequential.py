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


def verdict_words(stop: TaskStop, alpha: float, max_pairs: int) -> str:
    """What a task's stop says, in words a reader cannot take for more: an effect only where it also
    survives Holm's adjustment over the run's tasks at the rule's level (`alpha`, per endpoint); a stop
    without an effect says why it stopped, and that it shows no effect, not that there is none."""
    d = stop.decision
    if d is None:
        return "not decided (ran to its cap)"
    if d.outcome == "effect" and stop.p_holm is not None and stop.p_holm <= alpha:
        said = f"effect for {d.favours} after {d.pairs} pairs"
    elif d.outcome == "effect":
        said = (f"stopped after {d.pairs} pairs at the rule's boundary for {d.favours} ({d.control_only} control-only / "
                f"{d.treatment_only} treatment-only), not kept once adjusted over the run's tasks (Holm p = "
                f"{stop.p_holm:.3g} > {alpha:g}): no effect claimed")
    elif d.pairs >= max_pairs:
        said = f"no effect shown by the cap ({d.pairs} pairs; none ruled out)"
    else:
        said = (f"no effect shown after {d.pairs} pairs ({d.control_only} / {d.treatment_only} discordant): stopped, as "
                f"the rule judged an effect out of reach by the cap; none ruled out")
    if d.speed == "effect" and stop.speed_p_holm is not None and stop.speed_p_holm <= alpha:
        speed = f"speed: faster for {d.speed_favours}"
    elif d.speed == "effect":
        speed = (f"speed: boundary reached for {d.speed_favours} ({d.treatment_faster} / {d.control_faster} faster), "
                 f"not kept once adjusted over the run's tasks (Holm p = {stop.speed_p_holm:.3g} > {alpha:g})")
    else:
        speed = "speed: no difference shown"
    return f"{said}; {speed}"


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
    return SequentialSummary(
        rule=plan.description, max_pairs=plan.max_pairs, tasks=tasks, trials_planned=len(manifest.trials),
        trials_run=len(recorded & {t.trial_id for t in manifest.trials}), trials_not_run=len(skipped),
        saved_share=len(skipped) / len(manifest.trials) if manifest.trials else 0.0,
        fixed_design_pairs=fixed, fixed_design_trials=fixed * per_pair * len(in_plan),
        alpha_per_endpoint=plan.alpha_per_endpoint if plan.alpha_per_endpoint is not None else plan.alpha / 2,
    )
