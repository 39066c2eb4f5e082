"""--resume: a run killed halfway, resumed, ends with the report an unbroken run gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.chromium
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
SELECT = "shop-price or wiki-population"  # 2 tasks x 3 arms


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                         "--suite", str(LOCAL_WEB), "--runner", "reference", "-k", SELECT, *args)


def outcome_figures(report: dict) -> dict:
    """Everything but timing and the experiment's id."""
    return {
        "complete": report["complete"], "planned": report["planned_trials"], "recorded": report["recorded_trials"],
        "headline": report["headline"],
        "rows": [{k: r[k] for k in ("arm", "task", "passed", "failed", "errored", "missing", "stop_reasons")} for r in report["by_arm_task"]],
        "paired": [{k: r[k] for k in ("task", "pairs", "both", "control_only", "treatment_only", "neither", "excluded")} for r in report["paired"]],
    }


def test_a_killed_run_resumed_gives_the_unbroken_run_s_report(pytester, monkeypatch):
    """The run is killed for real: its process gets SIGKILL in the middle of a trial (the fault
    agent's `kill_worker`, without -n the run's only process), with nothing of pytest's to clean up."""
    import os

    from test_faults import TESTS, fault_preset, planned_order

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS / "support"), os.environ.get("PYTHONPATH")])))
    order = planned_order("broken")
    partner = {"control": "treatment", "treatment": "control"}

    def second_of_its_pair(i: int) -> bool:
        task, arm = order[i].rsplit("-", 1)
        return arm in partner and f"{task}-{partner[arm]}" in order[:i]

    # killed as the second of its pair runs, so its partner's record is the half pair moved aside
    at = next(i for i in range(len(order)) if second_of_its_pair(i))
    victim = order[at]
    preset, armed = fault_preset(pytester.path, "kill_worker", [victim])
    killed = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                           "--suite", str(LOCAL_WEB), "--runner", str(preset), "-k", SELECT,
                                           "--experiment-id", "broken")
    assert killed.ret == -9 and not armed.exists()  # killed by the signal, in the victim's trial
    broken = pytester.path / "results" / "broken"
    recorded = {p.stem for p in (broken / "trials").glob("*.json")}
    assert recorded == set(order[:at]) and not (broken / "report.json").exists()

    run(pytester, "--experiment-id", "unbroken").assert_outcomes(passed=6)
    resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                            "--resume", "broken", "-n", "2")  # workers agree on what is left
    # the trials without a record, and the recorded member of the pair the kill broke, run again with its partner
    victim_task, victim_arm = victim.rsplit("-", 1)
    rerun = {f"{victim_task}-{partner[victim_arm]}"}
    assert rerun <= recorded  # the half pair the kill left
    resumed.assert_outcomes(passed=len(set(order) - recorded) + len(rerun))
    superseded = broken / "trials" / "superseded"
    assert {p.stem for p in superseded.glob("*.json")} == rerun
    unbroken = json.loads((pytester.path / "results" / "unbroken" / "report.json").read_text())
    assert outcome_figures(json.loads((broken / "report.json").read_text())) == outcome_figures(unbroken)
    manifest = json.loads((broken / "manifest.json").read_text())
    assert len(manifest["trials"]) == 6  # the original plan, not the resumed subset

    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                          "--resume", "broken")  # nothing left to do
    assert again.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_resume_takes_the_run_s_own_options_from_its_manifest(pytester):
    """`--resume ID` alone: suite, runner, attempts and arms come from the manifest."""
    first = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", "reference", "--attempts", "2", "--arms", "control,treatment", "-k", "shop-price",
        "--experiment-id", "own")
    first.assert_outcomes(passed=4)
    exp = pytester.path / "results" / "own"
    manifest_before = (exp / "manifest.json").read_bytes()
    (exp / "trials" / "shop-price-a2-treatment.json").unlink()
    resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                            "--resume", "own")
    resumed.assert_outcomes(passed=2)  # the broken pair, run again whole; the rest of the plan stays done
    assert (exp / "manifest.json").read_bytes() == manifest_before
    report = json.loads((exp / "report.json").read_text())
    assert report["complete"] and report["runner"] == "reference" and report["attempts"] == 2
    assert report["arms"] == ["control", "treatment"]


def test_resume_refuses_a_changed_plan(pytester):
    run(pytester, "--experiment-id", "plan").assert_outcomes(passed=6)
    result = run(pytester, "--resume", "plan", "--attempts", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--resume plan: attempts was 1, now 2*"])
    runner = run(pytester, "--resume", "plan", "--runner", "nop")
    assert runner.ret == pytest.ExitCode.USAGE_ERROR
    runner.stderr.fnmatch_lines(["*--resume plan: runner was 'reference', now 'nop'*"])
    sandboxed = run(pytester, "--resume", "plan", "--environment", "docker", "--proxy-url", "http://172.17.0.1:{port}")
    assert sandboxed.ret == pytest.ExitCode.USAGE_ERROR
    sandboxed.stderr.fnmatch_lines(["*--resume plan: environment was 'host', now 'docker'*"])
    missing = run(pytester, "--resume", "nope")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR and "no manifest" in missing.stderr.str()
