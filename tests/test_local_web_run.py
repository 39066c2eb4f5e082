"""Whole runs of the local-web suite in headless Chromium."""

import json
from pathlib import Path

import pytest

from pytest_webbench.harbor_jobs import write_job_results  # noqa: F401  (import check)
from pytest_webbench.records import read_manifest, read_trial_records

pytestmark = pytest.mark.chromium
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
TASKS = sorted(p.name for p in (LOCAL_WEB / "tasks").iterdir() if p.is_dir())


def run(pytester, exp, *args):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--experiment-id", exp, *args,
    )
    return result, pytester.path / "results" / exp


def test_reference_runner_passes_every_item_and_leaves_a_complete_experiment(pytester):
    result, exp = run(pytester, "ref", "--runner", "reference")
    result.assert_outcomes(passed=len(TASKS) * 3)
    manifest = read_manifest(exp)
    records, problems = read_trial_records(exp)
    assert not problems and len(records) == len(manifest.trials) == len(TASKS) * 3
    assert all(r.outcome == "passed" and r.calls.forwarded > 0 for r in records)
    assert set(manifest.content_hashes) >= {"suite", "tool_batch:codehub", "tool_batch:shop", "tool_batch:wiki"}
    # treatment used the injected tools, the other arms never did
    for r in records:
        injected = sum(n for k, n in r.calls.webmcp_invokes.items() if k.startswith("injected:"))
        assert (injected > 0) == (r.arm == "treatment" and r.task != "codehub-latest-release"), r.trial_id
    # the exact instructions each agent got are kept, with the arm's rules
    pw = next(r for r in records if r.arm == "playwright")
    assert "Do not use WebMCP" in pw.instruction and pw.instruction.startswith(Path(LOCAL_WEB / "tasks" / pw.task / "instruction.md").read_text())
    # Harbor-shaped: one job directory per arm, each trial a TrialResult with our reward
    from harbor.models.job.result import JobResult
    from harbor.models.trial.result import TrialResult

    for arm in ("control", "treatment", "playwright"):
        job = JobResult.model_validate_json((exp / "jobs" / arm / "result.json").read_text())
        assert job.n_total_trials == len(TASKS)
    trial = TrialResult.model_validate_json((exp / "jobs" / "control" / "shop-cart-a1-control" / "result.json").read_text())
    assert trial.verifier_result.rewards == {"reward": 1.0}
    report = json.loads((exp / "report.json").read_text())
    assert report["complete"] and report["headline"]["treatment"]["passes"] == 5
    assert "## Paired control vs treatment" in (exp / "report.md").read_text()
    result.stdout.fnmatch_lines(["*webbench*", "*treatment*5/5 passed*"])


def test_nop_runner_fails_every_item_with_the_full_denominator(pytester):
    result, exp = run(pytester, "nop", "--runner", "nop")
    result.assert_outcomes(failed=len(TASKS) * 3)
    records, _ = read_trial_records(exp)
    assert len(records) == len(TASKS) * 3
    assert all(r.outcome == "failed" and r.reward == 0 and r.stop_reason == "no_browser_call" for r in records)
    report = json.loads((exp / "report.json").read_text())
    assert {arm: (r["passes"], r["n"]) for arm, r in report["headline"].items()} == {
        "control": (0, 5), "treatment": (0, 5), "playwright": (0, 5)}


def test_pairs_stay_together_and_in_order_under_xdist(pytester):
    result, exp = run(pytester, "xd", "--runner", "reference", "--attempts", "2", "-n", "2",
                      "--arms", "control,treatment", "-k", "codehub or wiki-population")
    result.assert_outcomes(passed=3 * 2 * 2)
    records, _ = read_trial_records(exp)
    pairs = {}
    for r in records:
        pairs.setdefault(r.pair_id, []).append(r)
    assert len(pairs) == 6
    for members in pairs.values():
        first, second = sorted(members, key=lambda r: r.pair_position)
        assert first.worker == second.worker and first.worker.startswith("gw")
        assert first.finished_at <= second.started_at


def test_a_rejected_call_is_logged_and_counted(pytester, monkeypatch):
    # A treatment "solution" that tries to register its own tools: the proxy refuses, the trial goes on.
    suite = pytester.path / "suite"
    import shutil

    shutil.copytree(LOCAL_WEB, suite)
    sol = suite / "tasks" / "shop-price" / "solution" / "reference.py"
    sol.write_text(sol.read_text().replace(
        '    if arm == "treatment":\n',
        '    if arm == "treatment":\n        try:\n            await browser.call("webmcp", action="add_custom", namespace="x", source="[]")\n'
        '        except RuntimeError as exc:\n            assert "webmcp_action_forbidden" in str(exc)\n', 1))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite),
        "--experiment-id", "rej", "-k", "shop-price and treatment")
    result.assert_outcomes(passed=1)
    [record], _ = read_trial_records(pytester.path / "results" / "rej")
    assert record.calls.rejected == 1 and record.calls.rejected_rules == {"webmcp_action_forbidden": 1}
    log = (Path(record.harbor_trial_dir) / "proxy-log.jsonl").read_text().splitlines()
    assert any(json.loads(line)["rule"] == "webmcp_action_forbidden" for line in log)
    report = json.loads((pytester.path / "results" / "rej" / "report.json").read_text())
    assert report["rejected_calls"] == 1
