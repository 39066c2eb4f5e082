"""Faults a real run meets, each done for real mid-trial (tests/support/fault_agents.py): every
planned trial ends passed, failed or errored with its stop reason, the results on disk are whole,
and the report says where the run is incomplete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pytest_webbench.design.pairing import TrialKey, order_trials
from pytest_webbench.results.records import RunManifest, TrialRecord

pytestmark = pytest.mark.chromium
TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "support"))
LOCAL_WEB = TESTS.parent / "suites" / "local-web"
TWO_TASKS = "shop-price or wiki-population"  # 2 tasks x 3 arms, each pair back to back


@pytest.fixture(autouse=True)
def support_importable(monkeypatch):
    """The pytest under test imports the fault agent from tests/support, as a user's own agent."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS / "support"), os.environ.get("PYTHONPATH")])))


def fault_preset(path: Path, fault: str, trials: list[str]) -> tuple[Path, Path]:
    armed = path / f"armed-{uuid.uuid4().hex[:12]}"
    armed.write_text("")
    preset = path / f"fault-{fault}.toml"
    preset.write_text(f'name = "fault-{fault}"\nagent = "fault_agents:FaultAgent"\ntakes_trial_context = true\n\n'
                      f'[options]\nfault = "{fault}"\ntrials = {json.dumps(trials)}\narmed = "{armed}"\n')
    return preset, armed


def planned_order(experiment_id: str, tasks=("shop-price", "wiki-population")) -> list[str]:
    keys = [TrialKey(t, 1, arm) for t in tasks for arm in ("control", "treatment", "playwright")]
    return [k.trial_id for k in order_trials(keys, experiment_id, True)]


def run(pytester, runner, *args, suite=LOCAL_WEB, select=TWO_TASKS):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                         "--suite", str(suite), "--runner", str(runner), "-k", select, *args)


def whole_results(experiment_dir: Path) -> tuple[dict[str, TrialRecord], dict]:
    """Every file parses, nothing half-written is left, every record is a planned trial, and the
    report accounts for each planned trial exactly once."""
    manifest = RunManifest.model_validate_json((experiment_dir / "manifest.json").read_text())
    assert not [p for p in experiment_dir.rglob("*.tmp*")], "a half-written file was left"
    records = {p.stem: TrialRecord.model_validate_json(p.read_text()) for p in (experiment_dir / "trials").glob("*.json")}
    planned = {t.trial_id for t in manifest.trials}
    assert set(records) <= planned
    report = json.loads((experiment_dir / "report.json").read_text())
    rows = report["by_arm_task"]
    assert sum(r["passed"] + r["failed"] + r["errored"] + r["missing"] for r in rows) == len(planned)
    assert report["planned_trials"] == len(planned) and report["recorded_trials"] == len(records)
    return records, report


def test_a_browser_crash_after_the_agent_s_calls_fails_its_trial_flagged_and_the_next_gets_a_new_browser(pytester):
    """The browser dies after a call of the agent's reached it: the agent could have crashed it (a
    request body that takes Chromium past its memory, CDP's Browser.close), so the trial is its
    failure, flagged, and its pair stays in the paired tests (docs/walls.md)."""
    first = planned_order("crash")[0]
    preset, armed = fault_preset(pytester.path, "crash_browser", [first])
    result = run(pytester, preset, "--experiment-id", "crash")
    result.assert_outcomes(passed=5, failed=1)
    assert not armed.exists()  # the fault fired
    records, report = whole_results(pytester.path / "results" / "crash")
    crashed = records[first]
    assert (crashed.outcome, crashed.stop_reason) == ("failed", "browser_crashed"), crashed
    assert "Chromium exited" in crashed.detail and "fault charged to the agent: browser_crashed" in crashed.flags
    assert all(r.outcome == "passed" for t, r in records.items() if t != first)  # a new browser for the rest
    pair = next(p for p in report["paired"] if first.startswith(p["task"]))
    assert pair["excluded"] == 0 and pair["pairs"] == 1


def test_a_dead_upstream_mcp_server_errors_the_trials_that_need_it(pytester, monkeypatch, tmp_path):
    """Kernel's hosted MCP server (a stand-in, in its own process) is killed mid-trial."""
    import shutil

    from kernel_api_standin import KernelApiStandin

    from pytest_webbench.service_loop import ServiceLoop

    key = "sk-kernel-fault-test"
    api = KernelApiStandin(key)
    port_file = tmp_path / "mcp.port"
    standin = subprocess.Popen([sys.executable, str(TESTS / "support" / "kernel_standin.py"), "--record",
                                str(tmp_path / "mcp.jsonl"), "--port-file", str(port_file)])
    loop = ServiceLoop()
    try:
        while not port_file.exists():
            assert standin.poll() is None, "the MCP stand-in did not start"
            os.sched_yield()
        suite = pytester.path / "public-web"
        shutil.copytree(TESTS.parent / "suites" / "public-web", suite)
        (suite / "tasks" / "hn-item-1" / "solution" / "reference.py").write_text(
            "async def solve(browser, arm):\n"
            "    await browser.playwright('return document.title')\n"
            "    return {'title': 'Y Combinator', 'by': 'pg'}\n")
        order = [t for t in planned_order("dead", ("hn-item-1",)) if not t.endswith("playwright")]
        preset, armed = fault_preset(pytester.path, "kill_upstream", [order[0]])
        monkeypatch.setenv("KERNEL_API_KEY", key)
        monkeypatch.setenv("KERNEL_BASE_URL", loop.serve(api.app, "kernel api"))
        monkeypatch.setenv("KERNEL_MCP_URL", f"http://127.0.0.1:{port_file.read_text()}/mcp")
        monkeypatch.setenv("WEBBENCH_FAULT_PID", str(standin.pid))
        result = run(pytester, preset, "--browser", "kernel", "--experiment-id", "dead",
                     suite=suite, select="hn-item-1 and not playwright")
    finally:
        loop.close()
        standin.kill()
        standin.wait()
    assert standin.returncode == -9 and not armed.exists()  # killed by the fault, mid-trial
    result.assert_outcomes(failed=2)
    experiment = pytester.path / "results" / "dead"
    records, report = whole_results(experiment)
    for trial in order:  # the one it died under, and the next, which never reached it
        assert (records[trial].outcome, records[trial].stop_reason) == ("errored", "upstream_error"), records[trial]
        assert records[trial].calls.upstream_failures >= 1
    log = experiment / "jobs" / order[0].rsplit("-", 1)[1] / order[0] / "proxy-log.jsonl"
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    first_call = next(c for c in logged if c["method"] == "tools/call")
    assert first_call["outcome"] == "ok" and logged[-1]["outcome"] == "error", logged  # before and after the kill
    assert "browser server error" in logged[-1]["detail"]
    assert api.browsers == {}  # both browsers deleted even so
    assert not report["complete"] and "2 trial(s) errored (agent or infrastructure failure)" in report["incomplete_because"]


def test_an_agent_that_dies_is_errored_and_one_that_hangs_is_stopped_and_scored(pytester):
    crash, _ = fault_preset(pytester.path, "crash_agent", ["shop-price-a1-control"])
    result = run(pytester, crash, "--experiment-id", "dies", select="shop-price and not playwright")
    result.assert_outcomes(passed=1, failed=1)
    records, report = whole_results(pytester.path / "results" / "dies")
    died = records["shop-price-a1-control"]
    assert (died.outcome, died.stop_reason) == ("errored", "agent_error") and "exit 137" in died.detail, died
    assert not report["complete"]

    suite = pytester.path / "local-web"
    import shutil

    shutil.copytree(LOCAL_WEB, suite)
    task = suite / "tasks" / "shop-price" / "task.toml"
    task.write_text(task.read_text().replace("timeout_sec = 600", "timeout_sec = 3"))
    hang, _ = fault_preset(pytester.path, "hang", ["shop-price-a1-treatment"])
    result = run(pytester, hang, "--experiment-id", "hangs", suite=suite, select="shop-price and not playwright")
    result.assert_outcomes(passed=1, failed=1)
    records, report = whole_results(pytester.path / "results" / "hangs")
    hung = records["shop-price-a1-treatment"]
    # Out of time is the agent's own limit: scored (failed), not errored, and says so.
    assert (hung.outcome, hung.stop_reason) == ("failed", "agent_timeout") and "AgentTimeoutError" in hung.detail, hung
    assert hung.timings.trial_sec < 60
    assert report["complete"]


def test_what_no_record_can_hold_in_the_answer_page_and_trajectory_fails_the_trial_not_errors_it(pytester):
    """A hostile agent's lone UTF-16 surrogate (JSON's "\\ud800") in its answer, the page it leaves
    and its trajectory, and a trajectory of the wrong shapes nested past any parser. Each made the
    trial errored (its pair dropped) rather than failed, or stopped the run's report: UTF-8 cannot
    hold the surrogate, and the rest raised in the harness's readers. The answer is refused as not
    text; elsewhere U+FFFD stands in for the surrogate, and the trajectory's bad parts are left out."""
    hostile, armed = fault_preset(pytester.path, "unholdable", ["shop-price-a1-control"])
    result = run(pytester, hostile, "--experiment-id", "unholdable", select="shop-price and control")
    result.assert_outcomes(failed=1)
    assert not armed.exists()
    records, report = whole_results(pytester.path / "results" / "unholdable")
    assert report["complete"]  # failed, as a wrong answer is: not errored, which would drop its pair
    record = records["shop-price-a1-control"]
    assert (record.outcome, record.stop_reason) == ("failed", "no_answer") and "lone UTF-16 surrogate" in record.detail, record
    assert record.agent_tool_calls == 1  # the one call that is an object
    page = (pytester.path / "results" / "unholdable" / "pages" / "shop-price-a1-control.html").read_text(encoding="utf-8")
    assert "done \ufffd" in page  # the agent's words on its trial's page, as text


def test_a_worker_killed_with_sigkill_is_recorded_and_its_pair_runs_again_on_a_new_worker(pytester):
    victim = planned_order("sigkill")[0]
    preset, armed = fault_preset(pytester.path, "kill_worker", [victim])
    result = run(pytester, preset, "--experiment-id", "sigkill", "-n", "2")
    assert not armed.exists()
    # xdist reports the crash as a failure and hands the unfinished pair to the replacement worker
    result.stdout.fnmatch_lines(["*replacing crashed worker*"])
    result.stdout.fnmatch_lines([f"*worker*crashed while running*{victim}*"])
    result.assert_outcomes(passed=6, failed=1)
    experiment = pytester.path / "results" / "sigkill"
    records, report = whole_results(experiment)
    assert len(records) == 6 and all(r.outcome == "passed" for r in records.values())
    # the crash is kept, not overwritten by the rerun
    crashed = TrialRecord.model_validate_json((experiment / "trials" / "superseded" / f"{victim}.json").read_text())
    assert (crashed.outcome, crashed.stop_reason, crashed.worker) == ("errored", "worker_crashed", "controller")
    assert report["complete"]


def test_ctrl_c_mid_run_leaves_whole_results_and_a_resume_gives_the_unbroken_report(pytester):
    from test_resume import outcome_figures

    import signal
    import time

    order = planned_order("ctrlc")
    preset, armed = fault_preset(pytester.path, "interrupt", [order[2]])
    started = armed.with_name(armed.name + ".started")
    # Ctrl-C as a terminal sends it: SIGINT to the run's process group, from outside, once the third
    # trial's agent command has started (the fault agent says so). The run starts with SIGINT's
    # default disposition, whatever the process running this test inherited.
    run_ = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
         "--suite", str(LOCAL_WEB), "--runner", str(preset), "-k", TWO_TASKS, "--experiment-id", "ctrlc"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not started.exists():  # the event: the agent's command is running
        assert run_.poll() is None and time.monotonic() < deadline, run_.communicate()[0][-3000:]
        time.sleep(0.05)
    os.killpg(run_.pid, signal.SIGINT)
    output = run_.communicate(timeout=180)[0]
    assert run_.returncode == pytest.ExitCode.INTERRUPTED and not armed.exists(), output[-3000:]
    experiment = pytester.path / "results" / "ctrlc"
    records, report = whole_results(experiment)
    assert sorted(records) == sorted(order[:2])  # what finished before Ctrl-C, and nothing half-done
    assert not report["complete"] and "4 planned trial(s) have no result" in report["incomplete_because"]
    leftovers = subprocess.run(["pgrep", "-f", armed.name], capture_output=True, text=True)
    assert leftovers.stdout == "", "the agent's command outlived the run"

    run(pytester, preset, "--resume", "ctrlc").assert_outcomes(passed=4)
    run(pytester, preset, "--experiment-id", "ctrlc", f"--results-dir={pytester.path / 'unbroken'}").assert_outcomes(passed=6)
    resumed = json.loads((experiment / "report.json").read_text())
    unbroken = json.loads((pytester.path / "unbroken" / "ctrlc" / "report.json").read_text())
    assert resumed["complete"] and outcome_figures(resumed) == outcome_figures(unbroken)


def test_a_trial_whose_set_up_fails_is_recorded_errored_with_why(pytester, monkeypatch):
    """A browser that will not start, a proxy that cannot bind: the set-up raises before the agent
    runs. The trial still gets its record, errored, its detail the error, and is no missing one."""
    pytester.makepyfile(fail_setup='''
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    raise RuntimeError("the browser would not start (injected)")
''')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "fail_setup", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", "reference", "--experiment-id", "setup", "-k", "codehub-latest-release-a1-control")
    result.assert_outcomes(errors=1)
    record = TrialRecord.model_validate_json((pytester.path / "results" / "setup" / "trials" /
                                              "codehub-latest-release-a1-control.json").read_text())
    assert record.outcome == "errored" and "the browser would not start (injected)" in record.detail
    report = json.loads((pytester.path / "results" / "setup" / "report.json").read_text())
    [row] = [r for r in report["by_arm_task"] if r["arm"] == "control"]
    assert (row["errored"], row["missing"]) == (1, 0)
