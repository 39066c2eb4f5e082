"""--sequential end to end on local-web: a task with a real effect stops early, and the report says
what each task decided and what that saved. The runner is the reference replay with a seeded
chance of a wrong answer per arm (an agent whose outcomes vary, repeatably)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_webbench.results.records import read_manifest, read_trial_records
from pytest_webbench.planning.stopping import rule_for
from pytest_webbench.stats.sequential import SequentialRule

pytestmark = pytest.mark.chromium
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
MAX_PAIRS = 10
PRESET = """
name = "reference-seeded"
agent = "pytest_webbench.runners.reference:ReferenceAgent"
takes_trial_context = true
[options]
seed = "sequential-test"
# shop-price: control always answers wrongly, treatment never (a real effect);
# wiki-population: both arms always right (no effect, at the ceiling)
[options.wrong_answers.shop-price]
control = 1.0
"""


def replay(records: list, task: str, rule: SequentialRule, seen: list[int] | None = None) -> tuple[str, int]:
    """The rule applied by hand to the task's pairs in attempt order (only those in `seen`, the
    pairs a decision rested on, when given: under -n pairs end out of order): the first pair count
    at which both the pass/fail and the speed verdicts have stopped, and the pass/fail verdict there."""
    by_attempt: dict[int, dict[str, object]] = {}
    for r in records:
        if r.task == task and r.arm in ("control", "treatment") and (seen is None or r.attempt in seen):
            by_attempt.setdefault(r.attempt, {})[r.arm] = r
    pairs = c_only = t_only = faster = slower = 0
    for attempt in sorted(by_attempt):
        c, t = by_attempt[attempt]["control"], by_attempt[attempt]["treatment"]
        pairs += 1
        c_only += c.outcome == "passed" and t.outcome != "passed"
        t_only += t.outcome == "passed" and c.outcome != "passed"
        if c.outcome == t.outcome == "passed":
            faster += t.timings.agent_sec < c.timings.agent_sec
            slower += c.timings.agent_sec < t.timings.agent_sec
        verdict = rule.decide(c_only, t_only, pairs)
        if verdict != "continue" and rule.decide_speed(faster, slower, pairs) != "continue":
            return verdict, pairs
    return "continue", pairs


def verdict_on(records: list, task: str, rule: SequentialRule, seen: list[int]) -> str:
    """The rule applied by hand to exactly the pairs `seen` (a decision's), all at once: its
    pass/fail verdict if both it and the speed verdict stop there, else "continue"."""
    c_only = t_only = faster = slower = 0
    for attempt in seen:
        pair = {r.arm: r for r in records if r.task == task and r.attempt == attempt}
        c, t = pair["control"].outcome == "passed", pair["treatment"].outcome == "passed"
        c_only += c and not t
        t_only += t and not c
        if c and t:
            faster += pair["treatment"].timings.agent_sec < pair["control"].timings.agent_sec
            slower += pair["control"].timings.agent_sec < pair["treatment"].timings.agent_sec
    verdict = rule.decide(c_only, t_only, len(seen))
    return verdict if rule.decide_speed(faster, slower, len(seen)) != "continue" else "continue"


def test_a_sequential_run_under_xdist_stops_decided_tasks_and_reports_the_saving(pytester):
    preset = pytester.path / "seeded.toml"
    preset.write_text(PRESET)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", str(preset), "--sequential", "--attempts", str(MAX_PAIRS), "--experiment-id", "seq", "-n", "2",
        "-k", "shop-price or wiki-population")
    exp = pytester.path / "results" / "seq"
    manifest = read_manifest(exp)
    assert manifest.sequential is not None and manifest.sequential.max_pairs == MAX_PAIRS
    assert len(manifest.trials) == 2 * MAX_PAIRS * 3  # the plan at its cap: 2 tasks x 10 attempts x 3 arms
    records, _ = read_trial_records(exp)
    report = json.loads((exp / "report.json").read_text())
    seq = report["sequential"]
    decisions = {t["task"]: t["decision"] for t in seq["tasks"]}
    assert set(decisions) == {"shop-price", "wiki-population"}  # the planned tasks only
    assert seq["fixed_design_trials"] == 2 * (MAX_PAIRS // 2) * 3
    rule = rule_for(MAX_PAIRS)
    assert (rule.alpha, rule.futility_below) == (manifest.sequential.alpha_per_endpoint, manifest.sequential.futility_below)

    # shop-price: every pair favours treatment; the rule declares the effect as soon as its boundary
    # allows, and the rounds after it are not run
    shop = decisions["shop-price"]
    assert shop["outcome"] == "effect" and shop["favours"] == "treatment"
    assert shop["treatment_only"] == shop["pairs"] and shop["control_only"] == 0
    assert rule.majority_needed(shop["pairs"]) == shop["pairs"]  # all one way rejects at the count it decided on
    # the first pair count where both verdicts stop on pairs all favouring treatment (no pair both passed)
    first = min(n for n in range(1, MAX_PAIRS + 1) if "continue" not in (rule.decide(0, n, n), rule.decide_speed(0, 0, n)))
    # decided at the boundary, or one pair later: under -n 2 the other worker's pair may end before
    # the decision is next taken; either way on attempts 1..k, never on whichever pairs ended first
    assert first <= shop["pairs"] <= first + 1, (first, shop["pairs"])
    # every pair alike, so order is moot: by hand the rule stops at `first`, which the decision reached or passed by one
    assert replay(records, "shop-price", rule) == ("effect", first)
    assert shop["pass_fail_stopped_at"] == first  # where its walk crossed, recorded beside the task's stop
    assert verdict_on(records, "shop-price", rule, shop["attempts"]) == "effect"
    assert shop["attempts"] == list(range(1, shop["pairs"] + 1))
    assert shop["p_value"] <= rule.alpha < shop["speed_p_value"]  # anytime p-values, as Holm over tasks reads them
    shop_pairs_run = len({r.attempt for r in records if r.task == "shop-price" and r.arm != "playwright"})
    assert shop_pairs_run < MAX_PAIRS  # stopped early (a pair or two already in flight on the other worker may finish)
    # wiki-population: every pair agrees (both pass): the rule stops it for futility, as the replay says
    wiki = decisions["wiki-population"]
    if wiki is None:  # ran to its cap undecided
        verdict, at = replay(records, "wiki-population", rule)
        assert verdict == "continue" and len({r.attempt for r in records if r.task == "wiki-population"}) == MAX_PAIRS
    else:  # decided on the first pairs, attempts 1..k, whatever order they ended in: the rule applied to
        # exactly those stops both verdicts, with the decision's outcome
        assert wiki["attempts"] == list(range(1, wiki["pairs"] + 1)) and wiki["outcome"] == "futility"
        assert verdict_on(records, "wiki-population", rule, wiki["attempts"]) == "futility"

    # not run is not missing: the report is complete, and its counts add up
    assert report["complete"], report["incomplete_because"]
    assert seq["trials_run"] == len(records) and seq["trials_not_run"] == len(manifest.trials) - len(records) > 0
    assert seq["saved_share"] == pytest.approx(seq["trials_not_run"] / len(manifest.trials))
    assert report["planned_trials"] == len(records)
    # pairs are never split, and playwright trials follow their rounds
    for task in ("shop-price", "wiki-population"):
        for attempt in {r.attempt for r in records if r.task == task}:
            arms = {r.arm for r in records if r.task == task and r.attempt == attempt}
            assert {"control", "treatment"} <= arms or arms == {"playwright"}, (task, attempt, arms)
    md = (exp / "report.md").read_text()
    assert "## Sequential run: each task stopped when decided" in md and "fewer than the cap" in md
    assert "conditional on the stopping" in md  # the fixed-sample intervals say they rest on stopped data
    result.stdout.fnmatch_lines(["*sequential: ran * of 60 planned trials*"])

    # --resume: a lost record's pair runs again; what the decisions left unrun stays unrun (skipped, not missing)
    (exp / "trials" / "wiki-population-a1-treatment.json").unlink()
    resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                            "--resume", "seq")
    outcomes = resumed.parseoutcomes()
    assert outcomes.get("passed") == 2 and "failed" not in outcomes  # the wiki pair a1, again
    again = json.loads((exp / "report.json").read_text())
    assert again["complete"] and again["sequential"]["trials_not_run"] == seq["trials_not_run"]


def test_sequential_needs_pairs_and_a_cap(pytester):
    for args, message in [(["--unpaired"], "drop --unpaired"), (["--attempts", "6"], "at least 7")]:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'r'}", "--suite",
                                               str(LOCAL_WEB), "--sequential", *args, "--collect-only")
        assert result.ret == pytest.ExitCode.USAGE_ERROR and message in result.stderr.str()
