"""Whole runs of the local-web suite in headless Chromium."""

import json
from pathlib import Path

import pytest

from pytest_webbench.results.records import read_manifest, read_trial_records

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
    # a user's run shows no warning it cannot act on (Harbor's trial code reads its own deprecated field)
    assert "warnings summary" not in result.stdout.str()
    manifest = read_manifest(exp)
    records, problems = read_trial_records(exp)
    assert not problems and len(records) == len(manifest.trials) == len(TASKS) * 3
    assert all(r.outcome == "passed" and r.calls.forwarded > 0 for r in records)
    # an honest pass is a clean one: a permitted call showed every pinned value (grading/evidence.py)
    assert [(r.trial_id, r.flags) for r in records if r.flags] == []
    # each record names its Harbor folder relative to the experiment, so the folder can be moved
    assert all(not Path(r.harbor_trial_dir).is_absolute() and (exp / r.harbor_trial_dir / "result.json").exists() for r in records)
    assert set(manifest.content_hashes) >= {"suite", "tool_batch:codehub", "tool_batch:shop", "tool_batch:wiki", "tool_batch:market"}
    assert manifest.isolation == "mount+net"  # agents' commands ran sealed
    # treatment used the injected tools, the other arms never did
    for r in records:
        injected = sum(n for k, n in r.calls.webmcp_invokes.items() if k.startswith("injected:"))
        assert (injected > 0) == (r.arm == "treatment" and r.task not in ("codehub-latest-release", "market-product-id")), r.trial_id
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
    headline_tasks = len(TASKS) - 2  # all but the format-only task and the placebo
    assert report["complete"] and report["headline"]["treatment"]["passes"] == headline_tasks
    assert report["headline_tasks"] == report["pooled"]["task_names"]  # one set for both
    md = (exp / "report.md").read_text()
    for section in ("## Paired control vs treatment", "## Pooled paired effect", "## Usage, tools and validity",
                    "## What each test assumes", "Minimum detectable effect"):
        assert section in md
    # every treatment pair passed both arms: no discordance, so no effect is detectable at this size
    # the pooled effect covers the page- and pin-checked tasks, the placebo and the format-only task left out
    assert report["pooled"]["task_names"] == [t for t in TASKS if t not in ("codehub-latest-release", "wiki-random-article")]
    assert report["pooled"]["pairs"] == headline_tasks and report["pooled"]["difference"] == 0
    assert report["pooled"]["ci_low"] < 0 < report["pooled"]["ci_high"]  # all pairs agree: still a real interval
    treatment = next(u for u in report["usage"] if u["arm"] == "treatment")
    assert treatment["webmcp"]["injected:tried"] == treatment["webmcp"]["injected:completed"] >= headline_tasks - 1
    # where the batch offers a shortcut, treatment's path takes fewer browser calls than control's
    rows = {(row["task"], row["arm"]): row for row in report["by_arm_task"]}
    shortcut = sorted(t for (t, arm), row in rows.items() if arm == "control" and row["shortcut"])
    assert len(shortcut) >= 11 and "market-product-id" not in shortcut and "codehub-latest-release" not in shortcut
    for task in shortcut:
        assert rows[(task, "treatment")]["median_calls"] < rows[(task, "control")]["median_calls"], task
    assert all(u["toolset_invalid"] == 0 for u in report["usage"])
    # re-rendering from disk gives the same bytes
    before = (exp / "report.json").read_bytes()
    from pytest_webbench.report.__main__ import main

    assert main([str(exp)]) == 0 and (exp / "report.json").read_bytes() == before
    result.stdout.fnmatch_lines(["*webbench*", f"*treatment*mean pass rate over {headline_tasks} graded task(s) 100%*"
                                f"trials passed: {headline_tasks} of {headline_tasks}*", "*pooled effect*"])


def test_nop_runner_fails_every_item_with_the_full_denominator(pytester):
    # six tasks of three sites, the placebo, the format-only and the write task among them (the reference
    # run above covers every task)
    tasks = [t for t in TASKS if t.startswith(("codehub", "shop", "wiki-random"))]
    assert len(tasks) == 6 and {"codehub-latest-release", "wiki-random-article", "shop-checkout"} <= set(tasks)
    result, exp = run(pytester, "nop", "--runner", "nop", "-k", "codehub or shop or wiki-random")
    result.assert_outcomes(failed=len(tasks) * 3)
    records, _ = read_trial_records(exp)
    assert len(records) == len(tasks) * 3
    assert all(r.outcome == "failed" and r.reward == 0 and r.stop_reason == "no_browser_call" for r in records)
    report = json.loads((exp / "report.json").read_text())
    assert {arm: (r["passes"], r["n"]) for arm, r in report["headline"].items()} == {
        arm: (0, len(tasks) - 2) for arm in ("control", "treatment", "playwright")}  # placebo and format-only out
    assert report["stop_reasons"] == {arm: {"no_browser_call": len(tasks)} for arm in ("control", "treatment", "playwright")}
    assert report["pooled"]["difference"] == 0 and report["pooled"]["control_rate"] == 0 and report["pooled"]["tasks"] == len(tasks) - 2  # not the placebo or the format-only task
    assert all(row["pass_at_k"] == {"1": 0.0} for row in report["by_arm_task"])


# Watches the local backend in each process, and lets the real calls through.
WATCH_BACKEND = """
import json, os
from pytest_webbench.browsers import local

create, make_ready = local.LocalBackend.create_session, local.LocalBackend.make_ready

def log(**entry):
    with open(f"backend-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\\n")

async def watched_create(self, session_id, *args, site_urls=(), **kwargs):
    ready = self._ahead is not None and self._ahead[0] == local._ports(site_urls)
    made = await create(self, session_id, *args, site_urls=site_urls, **kwargs)
    log(op="create", session=session_id, site_urls=list(site_urls), took_ahead=ready and self._ahead is None)
    return made

async def watched_make_ready(self, site_urls):
    log(op="make_ready", site_urls=list(site_urls))
    return await make_ready(self, site_urls)

local.LocalBackend.create_session, local.LocalBackend.make_ready = watched_create, watched_make_ready
"""


def test_pairs_stay_together_and_in_order_under_xdist(pytester):
    pytester.makeconftest(WATCH_BACKEND)
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
    # both workers appended to one record index: it holds every record, as its file says
    from pytest_webbench.results.record_index import ReportedTrial, as_model, scan_records

    scan = scan_records(exp)
    assert scan.from_files == 0 and scan.dead_lines == 0
    assert [as_model(r).model_dump() for r in scan.records] == [
        ReportedTrial.model_validate(r, from_attributes=True).model_dump() for r in sorted(records, key=lambda r: r.trial_id)]
    # each process made the next trial's browser ready while a trial ran, for that trial's site:
    # every session but a process's first took one, and none was made after the last
    for worker in ("gw0", "gw1"):
        calls = [json.loads(line) for line in (pytester.path / f"backend-{worker}.jsonl").read_text().splitlines()]
        created = [c for c in calls if c["op"] == "create"]
        assert [c["took_ahead"] for c in created] == [False] + [True] * (len(created) - 1), calls
        assert [c["site_urls"] for c in calls if c["op"] == "make_ready"] == [c["site_urls"] for c in created[1:]]


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
    log = (pytester.path / "results" / "rej" / record.harbor_trial_dir / "proxy-log.jsonl").read_text().splitlines()
    assert any(json.loads(line)["rule"] == "webmcp_action_forbidden" for line in log)
    report = json.loads((pytester.path / "results" / "rej" / "report.json").read_text())
    treatment = next(u for u in report["usage"] if u["arm"] == "treatment")
    assert treatment["trials_with_rejections"] == 1
    assert [(n["trial_id"], n["note"]) for n in report["rejected"]] == [(record.trial_id, "webmcp_action_forbidden x1")]


def test_pytest_html_gets_the_trial_columns_and_extras(pytester):
    import html as html_lib
    import re

    result, exp = run(pytester, "html", "--runner", "reference", "-k", "shop-price",
                      f"--html={pytester.path / 'out.html'}", "--self-contained-html")
    result.assert_outcomes(passed=3)
    page = (pytester.path / "out.html").read_text()
    blob = json.loads(html_lib.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1)))
    header = " ".join(re.findall(r"<th[^>]*>[^<]*</th>", page))
    for column in ("Task", "Attempt", "Arm", "Calls", "Tokens", "Agent s", "Stop reason"):
        assert f"<th>{column}</th>" in header
    tests = [t for runs in blob["tests"].values() for t in runs]
    assert len(tests) == 3
    for test in tests:
        row = " ".join(test["resultsTableRow"])
        assert "<td>shop-price</td>" in row and "<td>passed</td>" in row
        names = {extra["name"] for extra in test["extras"]}
        assert {"answer", "grade", "proxy log", "agent transcript (transcript.jsonl)", "final screenshot"} <= names


@pytest.mark.parametrize("fault, reason", [("bot-block", "bot_block"), ("error", "site_error")])
def test_a_trial_on_a_site_that_refuses_its_session_is_errored_and_says_so(pytester, monkeypatch, fault, reason):
    """The site, not the agent: every page of it a bot defence's challenge (or a server error), the
    start page the harness loads afresh included."""
    monkeypatch.setenv("SHOP_FAULT", fault)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(LOCAL_WEB),
        "--runner", "nop", "--experiment-id", "fault", "-k", "shop-price and control")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(pytester.path / "results" / "fault")[0]
    # errored, so the pair leaves the tests and the run says it is incomplete
    assert record.outcome == "errored" and record.stop_reason == reason, record.detail
    assert ("Just a moment..." if fault == "bot-block" else "503 Service Unavailable") in record.detail
    assert not json.loads((pytester.path / "results" / "fault" / "report.json").read_text())["complete"]


def test_a_block_page_the_agent_makes_of_its_own_page_is_not_believed(pytester):
    """A failing agent could have its trial errored (and its pair dropped) by dressing its page as a
    bot defence's: a challenge title, a vendor's marker, a 503 from Navigation Timing. The harness
    loads the address afresh, sees the site's own page, and grades the trial as it stands."""
    import shutil

    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite)
    forge = ("document.title = 'Just a moment...'; document.body.insertAdjacentHTML('beforeend', '<div id=px-captcha></div>');"
             " performance.getEntriesByType = () => [{responseStatus: 503}];")
    (suite / "tasks" / "shop-price" / "solution" / "reference.py").write_text(
        "async def solve(browser, arm):\n"
        f"    await browser.playwright({json.dumps(f'await page.evaluate(() => {{ {forge} }})')})\n"
        "    return {'price': 0}\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite),
        "--experiment-id", "forged", "-k", "shop-price and control")
    result.assert_outcomes(failed=1)
    [record] = read_trial_records(pytester.path / "results" / "forged")[0]
    assert (record.outcome, record.stop_reason) == ("failed", "wrong_answer"), record.detail
    assert json.loads((pytester.path / "results" / "forged" / "report.json").read_text())["complete"]


def test_a_tool_batch_that_throws_when_registered_errors_the_trial_and_names_the_file(pytester):
    import shutil

    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite)
    (suite / "tools" / "shop.js").write_text("(() => { throw new Error('batch exploded'); })()\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite),
        "--experiment-id", "batch", "-k", "shop-price and not playwright")
    result.assert_outcomes(passed=1, errors=1)  # control has no batch and runs; treatment cannot start
    records = {r.arm: r for r in read_trial_records(pytester.path / "results" / "batch")[0]}
    treatment = records["treatment"]
    assert treatment.outcome == "errored" and treatment.stop_reason == "backend_error"
    assert "shop.js" in treatment.detail and "batch exploded" in treatment.detail
    report = json.loads((pytester.path / "results" / "batch" / "report.json").read_text())
    assert not report["complete"] and report["paired"][0]["excluded"] == 1


def test_a_suite_changed_during_the_run_is_said_at_the_top_of_the_report(pytester):
    """The suite is hashed when the run is planned and again at its end: a change between (here by
    a solution that writes into its own task, as an agent with a way to the suite would) is said,
    where an unchanged suite is said to be so."""
    import shutil

    suite = pytester.path / "suite"
    shutil.copytree(LOCAL_WEB, suite, ignore=shutil.ignore_patterns("__pycache__"))
    reference = suite / "tasks" / "shop-price" / "solution" / "reference.py"
    reference.write_text(reference.read_text() + "\n\n_solve = solve\n\n\nasync def solve(browser, arm):\n"
                         "    from pathlib import Path\n"
                         f"    Path({str(suite / 'tasks' / 'shop-price' / 'instruction.md')!r}).write_text('changed')\n"
                         "    return await _solve(browser, arm)\n")
    for exp, selection in (("same", "wiki-population and control"), ("changed", "shop-price and control")):
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", "--suite", str(suite),
            "--experiment-id", exp, "-k", selection)
        result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "results" / "same" / "report.json").read_text())["suite_check"] == "unchanged"
    changed = (pytester.path / "results" / "changed" / "report.md").read_text()
    assert "THE SUITE'S FILES CHANGED DURING THE RUN** (suite hash differently" in changed
