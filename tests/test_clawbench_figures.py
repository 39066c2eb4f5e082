"""ClawBench's own figures (report/clawbench_figures.py) equal those of ClawBench's own tools,
rescore.py's aggregate_batch and analyze.py's analyze_batch, run on this project's export of the
same records; and one arm's figures against a hand count."""

from __future__ import annotations

import itertools

import pytest

from pytest_webbench.report.clawbench_figures import clawbench_figures, export_runs
from pytest_webbench.results.records import (BrowserCalls, JudgeRecord, JudgeVerdict, PlannedTrial, RunManifest, TaskLimits,
                                             TrialRecord)

ARMS = ["control", "treatment"]
TASKS = {"rate": ("request", True, "education"), "buy": ("request", True, "shopping"), "order": ("request", False, "shopping"),
         "read": ("pinned", False, None)}


def _manifest(attempts: int) -> RunManifest:
    trials = [PlannedTrial(trial_id=f"{t}-a{a}-{arm}", task=t, attempt=a, arm=arm, pair_id=None, pair_position=None)
              for t in TASKS for a in range(1, attempts + 1) for arm in ARMS]
    limits = {t: TaskLimits(grading=g, turn_cap=10, spend_limit_usd=1, placebo=False, tool_batch="s", timeout_sec=60,
                            judged=judged, group=group) for t, (g, judged, group) in TASKS.items()}
    return RunManifest(experiment_id="cb", created_at="2026-12-07T00:00:00+00:00", suite="s", suite_path="/x", runner="r",
                       model=None, browser="local", attempts=attempts, arms=ARMS, paired=True, trials=trials,
                       task_limits=limits, content_hashes={})


# (outcome, intercepted, lenient, strict, judge failed, browser calls, final message)
SHAPES = [
    ("passed", True, True, True, False, 6, "Done! I have successfully submitted the rating."),
    ("failed", True, False, True, False, 4, "Task complete: the order has been placed."),
    ("failed", True, True, False, False, 0, None),  # intercepted with no browser action: analyze.py's false positive
    ("failed", False, None, None, False, 3, "I have completed the task."),  # claims, nothing intercepted
    ("errored", True, None, None, True, 5, None),  # the judge failed: errored here, 0 in ClawBench
    ("errored", False, None, None, False, 0, None),  # the harness's fault: a run that earned 0 there
    ("failed", False, None, None, False, 2, "I could not find the product."),
]


def _records(manifest: RunManifest) -> list[TrialRecord]:
    shapes = itertools.cycle(SHAPES)
    out = []
    for trial in manifest.trials:
        outcome, caught, lenient, strict, failed, calls, said = next(shapes)
        judge = None
        if caught:
            judge = JudgeRecord(model="m", error="the judge (lenient) answered HTTP 529" if failed else None,
                                lenient=None if lenient is None else JudgeVerdict(match=lenient, reason="l"),
                                strict=None if strict is None else JudgeVerdict(match=strict, reason="s"))
        out.append(TrialRecord(**trial.model_dump(), experiment_id="cb", runner="r", grading=TASKS[trial.task][0],
                               outcome=outcome, stop_reason=None if outcome == "passed" else "wrong_submission",
                               submissions=1 if caught else 0, judge=judge, calls=BrowserCalls(forwarded=calls),
                               answer_raw=said))
    return out


@pytest.mark.parametrize("attempts", [1, 3, 7])
def test_the_figures_are_rescore_s_and_analyze_s_on_the_same_runs(tmp_path, attempts):
    from clawbench.eval.analyze import analyze_batch
    from clawbench.eval.rescore import aggregate_batch

    manifest = _manifest(attempts)
    records = _records(manifest)
    batches = export_runs(manifest, records, tmp_path)
    figures = {f.arm: f for f in clawbench_figures(manifest, records)}
    assert set(batches) == set(figures) == set(ARMS)
    for arm, folder in batches.items():
        theirs, ours = aggregate_batch(folder, ["strict", "lenient"]), figures[arm]
        assert (ours.runs, ours.intercepted) == (theirs["n_total"], theirs["n_intercepted"])
        assert (ours.match_lenient, ours.match_strict) == (theirs["n_match_lenient"], theirs["n_match_strict"])
        assert (ours.judge_errors_lenient, ours.judge_errors_strict) == (theirs["n_judge_err_lenient"], theirs["n_judge_err_strict"])
        assert ours.reward_lenient == theirs["reward_pct_lenient"] and ours.reward_strict == theirs["reward_pct_strict"]
        assert ours.intercepted_rate == theirs["pass_rate_stage1_only"]
        analysed = analyze_batch(folder)
        assert ours.zero_action_intercepted == analysed["interceptor_false_positives"]
        assert (ours.claimed_success, ours.claimed_but_failed) == (analysed["self_report_claimed"],
                                                                   analysed["self_report_claimed_but_failed"])
        assert {k: {"n": n, "intercepted": i} for k, (n, i) in ours.by_category.items()} == {
            k: {"n": v["n"], "intercepted": v["intercepted"]} for k, v in analysed["by_category"].items()}


def test_one_arm_s_figures_by_hand():
    manifest = _manifest(1)  # rate and buy judged, one attempt: control gets SHAPES 0 and 2, treatment 1 and 3
    figures = {f.arm: f for f in clawbench_figures(manifest, _records(manifest))}
    control = figures["control"]
    assert (control.runs, control.intercepted, control.match_lenient, control.match_strict) == (2, 2, 2, 1)
    assert control.reward_lenient == 1.0 and control.reward_strict == 0.5 and control.zero_action_intercepted == 1
    assert control.by_category == {"education": (1, 1), "shopping": (1, 1)}
    treatment = figures["treatment"]  # both claim success: one strict-judged right, one with nothing intercepted
    assert (treatment.runs, treatment.intercepted, treatment.match_lenient, treatment.match_strict) == (2, 1, 0, 1)
    assert (treatment.claimed_success, treatment.claimed_but_failed) == (2, 1)
