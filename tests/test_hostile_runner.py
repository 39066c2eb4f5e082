"""`--runner hostile`: the walls of the user's own setup, tried from inside each trial (runners/
hostile.py). On this machine every wall holds; with walls knocked down on purpose, exactly those
are reported breached, with their evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_webbench.gateway.meter import read_model_log
from pytest_webbench.results.records import read_trial_records

pytestmark = [pytest.mark.chromium, pytest.mark.seal]
LOCAL_WEB = Path(__file__).resolve().parents[1] / "suites" / "local-web"
ROUTES = {
    "shell: the harness's keys", "shell: other processes' environments", "shell: the suite and its answer rules",
    "shell: the results", "shell: the task's site", "shell: the browser backend", "shell: the internet",
    "browser code: the harness's process", "browser code: the suite and its answer rules", "browser code: the results",
    "browser code: other trials' pages", "browser: local schemes (file:)", "browser: hosts beyond the task's site",
    "gateway: only the run's protocol and model", "files: links out of the trial", "files: writes through planted links",
}


def _run(pytester, exp: str, selection: str, *extra: str):
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}",
                                           "--suite", str(LOCAL_WEB), "--runner", "hostile", "--experiment-id", exp,
                                           "-k", selection, *extra)
    return result, pytester.path / "results" / exp


def test_every_wall_holds_here_in_every_arm(pytester, monkeypatch):
    monkeypatch.setenv("WEBBENCH_TEST_API_KEY", "sk-harness-key-for-the-probes-1a2b3c")  # a key the probes look for
    result, exp = _run(pytester, "walls", "shop-price")
    result.assert_outcomes(passed=3)
    for record in read_trial_records(exp)[0]:
        assert {w.route for w in record.walls} == ROUTES
        assert all(w.status == "held" for w in record.walls), [w for w in record.walls if w.status != "held"]
        log = read_model_log(exp / record.harbor_trial_dir / "model-log.jsonl")
        assert log and {line.decision for line in log} == {"refused_request"}  # nothing reached a model
    report = json.loads((exp / "report.json").read_text())
    assert {row["route"]: row["held"] for row in report["walls"]} == dict.fromkeys(ROUTES, 3)
    assert "## The walls of this setup" in (exp / "report.md").read_text()


WEAKEN = '''
import pytest_webbench.browsers.pod as pod
import pytest_webbench.environments.host as host

pod.chromium_etc = lambda: None  # no policy: file: URLs open (on the sealed view)
host.AGENT_ENV_ALLOWLIST = (*host.AGENT_ENV_ALLOWLIST, "WEBBENCH_HOSTILE_CANARY")  # a harness variable let through
'''


def test_a_wall_knocked_down_is_reported_breached_and_fails_its_trial(pytester):
    pytester.makepyfile(weaken=WEAKEN)
    result, exp = _run(pytester, "weak", "shop-price and control", "-p", "weaken")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(exp)[0]
    assert record.outcome == "failed" and record.stop_reason == "wall_breached"
    breached = {w.route: w.evidence for w in record.walls if w.status == "breached"}
    # the variable let through shows in the shell's environment, and so in its processes' ones
    assert set(breached) == {"shell: the harness's keys", "shell: other processes' environments",
                             "browser: local schemes (file:)"}, breached
    assert "wbca" in breached["shell: the harness's keys"] and "file:///etc/passwd" in breached["browser: local schemes (file:)"]
    assert "3 of 16 walls breached" in record.detail
