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
    "shell: the host's /etc", "shell: processes without a limit", "shell: open files without a limit",
    "gateway: the provider's own tools and fetchers", "browser code: raw CDP through what events hand out",
    "gateway: the meter's price (options and bodies read two ways)", "verifier: what the agent left",
    "record: a fault the agent causes is charged to it",
}
NOT_PROBED_OUTSIDE_THE_PLAYWRIGHT_ARM = {"browser code: raw CDP through what events hand out"}


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
        expected = {w.route: "held" if record.arm == "playwright" or w.route not in NOT_PROBED_OUTSIDE_THE_PLAYWRIGHT_ARM
                    else "not probed" for w in record.walls}
        assert {w.route: w.status for w in record.walls} == expected, [w for w in record.walls if w.status != "held"]
        log = read_model_log(exp / record.harbor_trial_dir / "model-log.jsonl")
        assert log and {line.decision for line in log} == {"refused_request"}  # nothing reached a model
    report = json.loads((exp / "report.json").read_text())
    assert {row["route"]: row["held"] for row in report["walls"]} == {
        route: 1 if route in NOT_PROBED_OUTSIDE_THE_PLAYWRIGHT_ARM else 3 for route in ROUTES}
    assert "## The walls of this setup" in (exp / "report.md").read_text()


WEAKEN = '''
import pytest_webbench.browsers.pod as pod
import pytest_webbench.environments.host as host

pod.chromium_etc = lambda: None  # no policy: file: URLs open (on the sealed view)
host.AGENT_ENV_ALLOWLIST = (*host.AGENT_ENV_ALLOWLIST, "WEBBENCH_HOSTILE_CANARY")  # a harness variable let through

import pytest_webbench.environments.seal as seal
import pytest_webbench.gateway.policy as policy

seal.ETC_ALLOWED = (*seal.ETC_ALLOWED, "shadow")  # the host's shadow file in every seal
seal.new_cgroup = lambda: None  # no process limit: no cgroup, and no user RLIMIT_NPROC would hold
seal.limited_uid = lambda: None
seal.MAX_OPEN_FILES = 0  # no cap on a command's open files (0: PID 1 leaves the host's)
policy.check_allowed = lambda api, request: None  # the body policy down: the provider's tools go out
policy.PRICED_OPTIONS = {}  # a faster tier, a longer cache, many choices: past the run's price


async def _verify_here(self, graded):  # the verifier runs in the agent's own workspace
    self.verifying = True


host.HostEnvironment.verify_apart = _verify_here

import pytest_webbench.grading.verdict as verdict

verdict.charged_to_agent = lambda *args, **kwargs: False  # every fault errored: the pair would be dropped
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
                             "browser: local schemes (file:)", "shell: the host's /etc", "shell: processes without a limit",
                             "shell: open files without a limit", "gateway: the provider's own tools and fetchers",
                             "gateway: the meter's price (options and bodies read two ways)", "verifier: what the agent left",
                             "record: a fault the agent causes is charged to it",
                             # the allowlist also kept out the protocol probes' stored state and hosted tool
                             "gateway: only the run's protocol and model"}, breached
    assert "wbca" in breached["shell: the harness's keys"] and "file:///etc/passwd" in breached["browser: local schemes (file:)"]
    assert "read /etc/shadow" in breached["shell: the host's /etc"]
    assert "ran in the verifier's commands" in breached["verifier: what the agent left"]
    assert "11 of 23 walls breached" in record.detail  # the event-payload wall is the playwright arm's alone


def test_the_event_payload_probe_can_report_breached():
    """The playwright arm's probe, run where raw CDP is allowed (another arm's scope), says so."""
    from pytest_webbench.browsers.local import LocalBackend
    from pytest_webbench.runners.hostile import EVENT_PAYLOAD_PROBE, event_payload_wall
    from pytest_webbench.service_loop import ServiceLoop
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    loop = ServiceLoop()
    site = "http://site.localhost:" + loop.serve(Starlette(routes=[Route("/", lambda r: HTMLResponse("<p>x</p>"))]),
                                                 "site").rsplit(":", 1)[1]
    backend = LocalBackend()
    try:
        for session, page_only in (("FREE", False), ("PW", True)):
            loop.run(backend.create_session(session, page_api_only=page_only, site_urls=[site]))
            loop.run(backend.goto(session, site + "/"))
        free = loop.run(backend.execute_playwright("FREE", EVENT_PAYLOAD_PROBE, timeout_sec=30), timeout=60)
        scoped = loop.run(backend.execute_playwright("PW", EVENT_PAYLOAD_PROBE, timeout_sec=30), timeout=60)
    finally:
        loop.run(backend.close())
        loop.close()
    assert event_payload_wall(free["result"]).status == "breached", free
    assert event_payload_wall(scoped["result"]).status == "held", scoped
    assert len(scoped["result"]["tries"]) == 5 and "all 5 ways refused" in event_payload_wall(scoped["result"]).evidence
    # an error of another kind is no `held`
    assert event_payload_wall({"tries": {"event payload": "refused: Cannot read properties of undefined"}}).status == "breached"


def test_the_process_probe_is_held_only_where_a_fork_was_refused_and_says_when_its_shell_never_ran():
    from pytest_webbench.runners.hostile import process_wall

    assert process_wall("forks:2\n1022", 1024).status == "held"
    assert process_wall("forks:2\n1300", 1024).status == "breached"
    assert process_wall("forks:0\n900", 1024).status == "breached"  # every fork went through: no limit met
    assert process_wall("forks:127\n74", 1024).status == "not probed"  # no sh: nothing was tried
    assert process_wall("", 1024).status == "not probed"
