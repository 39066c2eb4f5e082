"""The report from results on disk: every figure against a hand count of a synthetic run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_webbench.results.record_index import write_trial_record
from pytest_webbench.results.records import (
    BrowserCalls, PlannedTrial, RunManifest, TaskLimits, Timings, Tokens, TrialRecord, write_manifest,
)
from pytest_webbench.report.__main__ import main as report_main
from pytest_webbench.report.build import build_report_from_dir
from pytest_webbench.report.write import write_report
from pytest_webbench.stats import mcnemar_exact, pass_at_k, pass_hat_k, task_mean_interval

TASKS = {"alpha": "pinned", "beta": "page", "gamma": "format", "placebo": "pinned"}
ATTEMPTS = 4
# (task, attempt) -> (control outcome, treatment outcome); "P" passed, "F" failed, "E" errored, "-" missing
OUTCOMES = {
    "alpha": ["PP", "FP", "FP", "PF"],  # 1 both, 2 treatment only, 1 control only
    "beta": ["PP", "PP", "FF", "EP"],  # 2 both, 1 neither, 1 excluded (control errored)
    "gamma": ["PP", "FF", "P-", "FP"],  # format-only; 1 excluded (treatment missing)
    "placebo": ["FP", "FP", "FP", "FP"],  # a big difference that must not reach the pooled row
}


def _manifest(exp: str, arms=("control", "treatment", "playwright")) -> RunManifest:
    trials = []
    for task in TASKS:
        for attempt in range(1, ATTEMPTS + 1):
            pair = f"{task}-a{attempt}"
            for position, arm in enumerate(arms):
                paired = arm in ("control", "treatment")
                trials.append(PlannedTrial(trial_id=f"{pair}-{arm}", task=task, attempt=attempt, arm=arm,
                                           pair_id=pair if paired else None, pair_position=position if paired else None))
    limits = {task: TaskLimits(grading=g, turn_cap=20, spend_limit_usd=1.0, placebo=task == "placebo",
                               tool_batch=None if task == "placebo" else "site", timeout_sec=60,
                               agree_on=["value"] if task == "alpha" else [])
              for task, g in TASKS.items()}
    return RunManifest(experiment_id=exp, created_at="2026-12-02T00:00:00+00:00", suite="synthetic", suite_path="/x",
                       runner="reference", model=None, browser="local", attempts=ATTEMPTS, arms=list(arms), paired=True,
                       trials=trials, task_limits=limits, content_hashes={})


def _record(exp: str, trial: PlannedTrial, outcome: str, agent_sec: float, **extra) -> TrialRecord:
    verdict = {"P": ("passed", None), "F": ("failed", "wrong_answer"), "E": ("errored", "agent_error")}[outcome]
    return TrialRecord(**trial.model_dump(), experiment_id=exp, runner="reference", grading=TASKS[trial.task],
                       outcome=verdict[0], stop_reason=verdict[1], reward=float(outcome == "P"),
                       timings=Timings(trial_sec=agent_sec + 1, agent_sec=agent_sec), **extra)


def write_synthetic_run(root: Path, exp: str = "syn", flip_playwright: bool = False, playwright_all_pass: bool = False) -> Path:
    directory = root / exp
    manifest = _manifest(exp)
    write_manifest(directory, manifest)
    for trial in manifest.trials:
        if trial.arm == "playwright":
            outcome = "P" if playwright_all_pass or (trial.attempt % 2 == 0) != flip_playwright else "F"
        else:
            outcome = OUTCOMES[trial.task][trial.attempt - 1][0 if trial.arm == "control" else 1]
        if outcome == "-":
            continue
        extra = {}
        # control takes 10 s, treatment 5 s (speedup 2x), except attempt 2 where treatment is slower
        agent_sec = 10.0 if trial.arm == "control" else 5.0 if trial.attempt != 2 else 20.0
        if trial.trial_id == "alpha-a1-control":
            extra = {"answer": {"value": 7}, "tokens": Tokens(input=1000, cached=200, output=50, cost_usd=0.02),
                     "calls": BrowserCalls(forwarded=4, rejected=2, rejected_rules={"tool_not_in_arm": 2},
                                           webmcp_invokes={"injected:completed": 1}), "flags": ["shell curl reached the site"]}
        if trial.trial_id == "alpha-a1-treatment":
            extra = {"answer": {"value": 7}, "tokens": Tokens(input=500, output=40),
                     "calls": BrowserCalls(forwarded=3, cap_hit=True, webmcp_invokes={"injected:completed": 2, "native:error": 1})}
        if trial.trial_id == "alpha-a2-treatment":
            extra = {"answer": {"value": 8}}
        if trial.trial_id == "alpha-a2-control":
            extra = {"answer": {"value": 8}}
        record = _record(exp, trial, outcome, agent_sec, **extra)
        if trial.trial_id == "beta-a3-treatment":
            record = record.model_copy(update={"stop_reason": "over_spend", "detail": "spent $2.0000 of a $1.00 limit"})
        write_trial_record(directory, record)
    return directory


@pytest.fixture
def run_dir(tmp_path):
    return write_synthetic_run(tmp_path)


def test_counts_rates_and_pass_at_k(run_dir):
    report = build_report_from_dir(run_dir)
    assert report.planned_trials == 48 and report.recorded_trials == 47 and not report.complete
    assert report.incomplete_because == ["1 planned trial(s) have no result", "1 trial(s) errored (agent or infrastructure failure)"]
    # headline = alpha + beta (pinned/page), the placebo left out as from the pooled effect: control 2 + 2 of 8,
    # treatment 10 of 12 with the placebo's 4 passes, so 6 of 8 without them
    assert report.headline_tasks == ["alpha", "beta"] == report.pooled.task_names
    assert (report.headline["control"].passes, report.headline["control"].n) == (4, 8)
    assert (report.headline["treatment"].passes, report.headline["treatment"].n) == (6, 8)
    assert (report.format_only["treatment"].passes, report.format_only["treatment"].n) == (2, 4)  # missing stays in n
    row = next(r for r in report.by_arm_task if (r.arm, r.task) == ("treatment", "gamma"))
    assert (row.passed, row.failed, row.errored, row.missing) == (2, 1, 0, 1)
    assert row.stop_reasons == {"missing": 1, "wrong_answer": 1}
    # pass@k over the 3 ended trials (2 passed)
    assert row.pass_at_k == {1: round(2 / 3, 6), 2: 1.0, 3: 1.0} and row.pass_hat_k == {1: round(2 / 3, 6), 2: round(1 / 3, 6), 3: 0.0}
    assert row.pass_at_k[2] == pass_at_k(3, 2, 2) and row.pass_hat_k[2] == round(pass_hat_k(3, 2, 2), 6)


def test_paired_rows_exclude_errored_and_missing_pairs_but_count_them(run_dir):
    report = build_report_from_dir(run_dir)
    rows = {r.task: r for r in report.paired}
    alpha, beta, gamma = rows["alpha"], rows["beta"], rows["gamma"]
    assert (alpha.both, alpha.control_only, alpha.treatment_only, alpha.neither, alpha.excluded) == (1, 1, 2, 0, 0)
    assert alpha.mcnemar_p == mcnemar_exact(1, 2) == 1.0
    assert (beta.tested, beta.excluded, beta.both, beta.neither) == (3, 1, 2, 1)
    assert beta.mcnemar_p is None  # no discordant pair: no test
    assert (gamma.pairs, gamma.excluded, gamma.tested) == (4, 1, 3)
    # beta's both-pass pairs: attempt 1 (10/5 = 2x, treatment faster), attempt 2 (10/20 = 0.5x, slower)
    assert beta.speedups == [0.5, 2.0] and beta.median_speedup == 1.25 and (beta.treatment_faster, beta.control_faster) == (1, 1)
    assert beta.sign_p == 1.0
    # answer agreement only where the task defines it (alpha, on "value"): a1 and a2 both answered and agree... a2 is
    # not tested (control failed, treatment passed: it is tested; both answered 8) -> 2 of 2
    assert alpha.agreement.passes == 2 and alpha.agreement.n == 2 and beta.agreement is None
    assert rows["placebo"].placebo and rows["placebo"].treatment_only == 4


def test_pooled_effect_covers_the_headline_tasks_only_with_a_sensitivity_line(run_dir):
    report = build_report_from_dir(run_dir)
    pooled = report.pooled
    # headline tasks (page, pinned) without the placebo: alpha and beta; gamma (format-only) is apart.
    # tested pairs: alpha 4 (d = 0, +1, +1, -1), beta 3 (0, 0, 0): 3 discordant of 7, 2 favour treatment
    assert pooled.task_names == ["alpha", "beta"] and (pooled.tasks, pooled.pairs) == (2, 7)
    # the estimand weighs tasks equally: alpha's mean difference 1/4, beta's 0 -> 1/8 (the pairs as one sample: 1/7)
    assert pooled.difference == pytest.approx(1 / 8) and pooled.pair_weighted_difference == pytest.approx(1 / 7)
    assert pooled.discordance == pytest.approx(3 / 7)
    assert (pooled.control_rate, pooled.treatment_rate) == pytest.approx(((2 / 4 + 2 / 3) / 2, (3 / 4 + 2 / 3) / 2))
    # for these tasks: alpha (2 t-only, 1 c-only, 4 pairs) and beta (0, 0, 3); by hand, variances
    # ((2.5 + 1.5)/5 - (1/5)^2)/4 = 0.19 and (1/4)/3, se = sqrt(0.273333)/2 = 0.261406, 1.959964 se = 0.512355
    assert (pooled.ci_low, pooled.ci_high) == pytest.approx((0.125 - 0.512355, 0.125 + 0.512355), abs=1e-5)
    expected = task_mean_interval([[0, 1, 1, -1], [0, 0, 0]])  # for tasks like these; checked by hand in test_stats_pooled.py
    assert (pooled.population_low, pooled.population_high) == pytest.approx((expected.low, expected.high))
    # errored counted as failures: beta's attempt 4 (control errored, treatment passed) joins as +1
    sensitivity = pooled.errored_as_failures
    assert sensitivity.pairs == 8 and sensitivity.difference == pytest.approx((1 / 4 + 1 / 4) / 2)
    format_only = report.pooled_format_only
    assert format_only.task_names == ["gamma"] and format_only.pairs == 3  # gamma's a4: treatment missing
    from pytest_webbench.report.render import render_markdown

    text = render_markdown(report)
    assert "Tasks: alpha, beta." in text and "Sensitivity: counting each errored trial as a failure" in text


def test_all_pairs_agreeing_gives_a_proper_interval(tmp_path):
    """The CR1 interval collapsed to "+0 to +0" when every pair agreed; the pooled interval never does."""
    directory = tmp_path / "agree"
    manifest = _manifest("agree", arms=("control", "treatment"))
    write_manifest(directory, manifest)
    for trial in manifest.trials:
        write_trial_record(directory, _record("agree", trial, "P", 5.0))
    pooled = build_report_from_dir(directory).pooled
    assert pooled.difference == 0 and pooled.ci_low < -0.05 and pooled.ci_high > 0.05
    assert -1 <= pooled.ci_low and pooled.ci_high <= 1


def test_the_playwright_arm_is_compared_with_control_per_task_and_stratified(run_dir):
    report = build_report_from_dir(run_dir)
    rows = {r.task: r for r in report.playwright_vs_control}
    # playwright passes even attempts (2 of 4) in every task; alpha's control passes a1, a4 (2 of 4)
    alpha = rows["alpha"]
    assert (alpha.arm_rate.passes, alpha.arm_rate.n, alpha.reference_rate.passes, alpha.reference_rate.n) == (2, 4, 2, 4)
    assert alpha.difference == 0 and alpha.fisher_p == 1.0
    # placebo: control fails every attempt, playwright passes 2 of 4: Fisher p by hand = 2 * C(4,2) C(4,0)/C(8,2)
    placebo = rows["placebo"]
    assert placebo.fisher_p == pytest.approx(2 * 6 / 28) and placebo.difference == pytest.approx(0.5)
    # Holm over the 4 tasks: the smallest p times 4, capped at 1
    assert placebo.fisher_p_holm == pytest.approx(min(1.0, 4 * placebo.fisher_p))
    pooled = report.playwright_pooled
    assert pooled.task_names == ["alpha", "beta"]  # headline tasks, placebo left out


def test_usage_validity_and_trial_lists(run_dir):
    report = build_report_from_dir(run_dir)
    usage = {u.arm: u for u in report.usage}
    control, treatment = usage["control"], usage["treatment"]
    assert (control.input_tokens, control.cached_tokens, control.output_tokens, control.tokens_reported) == (1000, 200, 50, 1)
    assert (control.cost_usd, control.priced, treatment.priced) == (0.02, 1, 0)  # model-cost coverage
    assert treatment.webmcp == {"injected:completed": 2, "injected:tried": 2, "native:tried": 1}
    assert control.toolset_invalid == 1 and treatment.toolset_invalid == 0  # an injected tool used in control
    assert (control.trials_with_rejections, treatment.cap_hits, treatment.over_spend) == (1, 1, 1)
    assert [n.trial_id for n in report.flagged] == ["alpha-a1-control"]
    assert [n.trial_id for n in report.over_spend] == ["beta-a3-treatment"]
    assert report.stop_reasons["treatment"] == {"missing": 1, "over_spend": 1, "wrong_answer": 2}
    assert report.caveat and "screens for large effects" in report.caveat
    md = (run_dir / "report.md").read_text() if (run_dir / "report.md").exists() else None
    assert md is None  # building does not write


def test_an_arm_with_no_trials_and_a_single_attempt(tmp_path):
    manifest = _manifest("one", arms=("control", "treatment"))
    manifest = manifest.model_copy(update={"arms": ["control", "treatment", "playwright"], "attempts": 1,
                                           "trials": [t for t in manifest.trials if t.attempt == 1]})
    write_manifest(tmp_path / "one", manifest)
    for trial in manifest.trials:
        write_trial_record(tmp_path / "one", _record("one", trial, "P", 3.0))
    report = build_report_from_dir(tmp_path / "one")
    playwright = next(u for u in report.usage if u.arm == "playwright")
    assert playwright.trials == 0 and playwright.median_agent_sec is None
    assert all(row.pass_at_k == {1: 1.0} for row in report.by_arm_task)
    assert report.complete and all(r.mcnemar_p is None and r.sign_p is None for r in report.paired)  # all ties


def test_rerendering_from_disk_is_byte_identical(run_dir, capsys):
    write_report(run_dir)
    first = {name: (run_dir / name).read_bytes() for name in ("report.json", "report.md", "report.html")}
    assert report_main([str(run_dir)]) == 0
    assert {name: (run_dir / name).read_bytes() for name in first} == first
    assert "INCOMPLETE" in capsys.readouterr().out


@pytest.mark.chromium
def test_html_report_renders_in_chromium_with_the_json_numbers(run_dir):
    from playwright.sync_api import sync_playwright

    from pytest_webbench.report.render import pct, pval, signed_pct

    write_report(run_dir)
    data = json.loads((run_dir / "report.json").read_text())
    formats = {"int": str, "pct": pct, "p": pval, "signed_pct": signed_pct}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto((run_dir / "report.html").as_uri())
            shown = page.eval_on_selector_all("[data-path]", "els => els.map(e => [e.dataset.path, e.dataset.format, e.innerText])")
            plots = page.eval_on_selector_all("svg", "els => els.map(e => { const b = e.getBoundingClientRect(); "
                                                      "return [e.getAttribute('aria-label'), b.width, b.height, e.querySelectorAll('circle,rect').length] })")
            incomplete = page.is_visible("#incomplete")
        finally:
            browser.close()
    assert requests == [(run_dir / "report.html").as_uri()]  # self-contained: nothing else fetched
    assert len(shown) > 60
    for path, fmt, text in shown:
        value = data
        for part in path.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        assert text == formats[fmt](value), path
    by_label = {label: (w, h, marks) for label, w, h, marks in plots}
    assert set(by_label) == {"pass rate per arm", "paired outcomes per task", "speedup distribution"}
    assert all(w > 100 and h > 20 and marks > 0 for w, h, marks in by_label.values())
    assert incomplete


@pytest.mark.parametrize("damage", [b"", b'{"trial_id": "cut off', b"{}", b'{"a": 1}, {"b": 2}', b"\xff\xfe"])
def test_a_broken_record_file_is_named_and_the_rest_still_count(run_dir, damage):
    (run_dir / "trials" / "alpha-a1-control.json").write_bytes(damage)
    report = build_report_from_dir(run_dir)
    assert report.problems == [f"{run_dir / 'trials' / 'alpha-a1-control.json'}: unreadable trial record (ValidationError)"]
    assert report.recorded_trials == 46  # the broken one counts as missing, nothing else is lost
    row = next(r for r in report.by_arm_task if (r.arm, r.task) == ("control", "alpha"))
    assert row.missing == 1 and row.rate.n == 4


def test_the_gateway_s_count_is_used_and_a_cli_that_disagrees_is_named(tmp_path):
    directory = tmp_path / "gw"
    manifest = _manifest("gw", arms=("control", "treatment"))
    write_manifest(directory, manifest)
    for trial in manifest.trials:
        record = _record("gw", trial, "P", 5.0)
        if trial.task == "alpha":  # metered by the gateway; the CLI's own report beside it
            cli_input = 999 if trial.trial_id == "alpha-a1-control" else 1200
            record = record.model_copy(update={
                "tokens": Tokens(input=1200, cached=300, output=40, cost_usd=0.01, source="gateway"),
                "tokens_cli": Tokens(input=cli_input, cached=300, output=40, source="cli"),
                "timings": Timings(trial_sec=6, agent_sec=5, model_sec=3.0, tool_sec=1.5)})
        write_trial_record(directory, record)
    report = build_report_from_dir(directory)
    control = next(u for u in report.usage if u.arm == "control")
    assert control.metered_by_gateway == 4 and control.cli_disagrees == 1
    assert (control.median_model_sec, control.median_tool_sec) == (3.0, 1.5)
    assert [n.trial_id for n in report.token_disagreements] == ["alpha-a1-control"]
    assert "(1200, 300, 40)" in report.token_disagreements[0].note and "(999, 300, 40)" in report.token_disagreements[0].note
    write_report(directory)
    assert "the gateway's are used" in (directory / "report.md").read_text()


def test_report_json_validates_against_its_versioned_model(run_dir):
    from pytest_webbench.report.build import REPORT_SCHEMA, Report

    write_report(run_dir)
    data = json.loads((run_dir / "report.json").read_text())
    assert data["schema_version"] == REPORT_SCHEMA == 6
    report = Report.model_validate(data)
    assert report.pooled.task_names == ["alpha", "beta"] and report.playwright_vs_control  # the version's new fields
    assert Report.model_validate_json(report.model_dump_json()) == report


def test_a_report_re_rendered_loads_no_scipy_or_numpy(tmp_path):
    """`python -m pytest_webbench.report DIR` over a run with every table (pooled effect, MDE,
    playwright comparison): its statistics are pure Python, so start-up stays small."""
    run_dir = write_synthetic_run(tmp_path)
    code = ("import sys\nfrom pytest_webbench.report.__main__ import main\nmain([sys.argv[1]])\n"
            "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numpy'}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, check=True)
    assert "HEAVY []" in done.stdout, done.stdout[-500:]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["pooled"]["ci_low"] is not None and report["playwright_pooled"]["p_value"] is not None


@pytest.mark.parametrize("isolation, warning", [
    ("mount+net", None), ("sandbox:docker", None),
    ("none", "UNSEALED: agents could read the suite"), ("sandbox:modal+open", "UNSEALED network: sandboxed agents"),
])
def test_the_header_says_how_the_agents_were_walled_in(run_dir, isolation, warning):
    from pytest_webbench.report.render import render_markdown

    report = build_report_from_dir(run_dir).model_copy(update={"isolation": isolation})
    header = render_markdown(report).split("\n\n")[1]
    assert f"agents sealed: `{isolation}`" in header
    assert ("UNSEALED" in header) == (warning is not None) and (warning is None or warning in header)


def test_a_large_run_s_report_summarises_and_its_trials_index_is_paged(tmp_path, monkeypatch):
    """Per-trial lists name their first LISTED trials and say how many more there are; report.html
    shows a bounded number of task rows; pages/index.html is split into pages that together list
    every trial, failures first, each failure with its reason. Limits shrunk to this small run."""
    import re

    from pytest_webbench.report import build, html, render
    from pytest_webbench.viewer import pages

    monkeypatch.setattr(build, "LISTED", 3)
    monkeypatch.setattr(html, "SHOWN_PER_LIST", 3)
    monkeypatch.setattr(html, "TASK_ROWS", 2)
    monkeypatch.setattr(render, "TASK_ROWS", 2)
    monkeypatch.setattr(pages, "INDEX_PAGE_ROWS", 10)
    run_dir = write_synthetic_run(tmp_path)
    write_report(run_dir)
    records = [json.loads(p.read_text()) for p in (run_dir / "trials").glob("*.json")]
    failures = sorted(r["trial_id"] for r in records if r["outcome"] != "passed")
    assert len(failures) > 3

    data = json.loads((run_dir / "report.json").read_text())
    assert [n["trial_id"] for n in data["not_passed"]] == failures[:3]
    assert data["listed_totals"]["not_passed"] == len(failures)
    assert f"and {len(failures) - 3} more in" in (run_dir / "report.html").read_text()

    page = (run_dir / "report.html").read_text()
    assert page.count('data-path="paired.') and 'data-path="paired.2.' not in page  # two task rows of four
    assert f"The first 2 of {len(data['paired'])} tasks" in page
    markdown = (run_dir / "report.md").read_text()  # report.md's per-task tables stop at as many tasks
    paired_table = markdown.split("## Paired control vs treatment, per task")[1].split("\n\n")[1]
    assert [line.split(" | ")[0] for line in paired_table.splitlines()[2:]] == [f"| {r['task']}" for r in data["paired"][:2]]
    assert f"The first 2 of {len(data['paired'])} rows; report.json holds every one." in markdown
    assert f"The first 6 of {len(data['by_arm_task'])} rows" in markdown  # two tasks, three arms each

    names = sorted(p.name for p in (run_dir / "pages").glob("index*.html"))
    assert names == ["index-2.html", "index-3.html", "index-4.html", "index-5.html", "index.html"]  # 48 trials, 10 a page
    listed, reasons = [], {}
    for name in ["index.html"] + [f"index-{n}.html" for n in range(2, 6)]:
        text = (run_dir / "pages" / name).read_text()
        for trial_id, outcome, why in re.findall(r'<tr><td><a href="[^"]+">([^<]+)</a></td><td class="(\w+)">\w+</td><td>([^<]*)</td>', text):
            listed.append((trial_id, outcome))
            reasons[trial_id] = why
        assert 'href="index-5.html"' in text or name == "index-5.html"
    assert sorted(t for t, _ in listed) == sorted(r["trial_id"] for r in records)
    assert [t for t, o in listed[:len(failures)]] == failures  # failures first, across pages
    assert all(reasons[t] for t in failures)  # the reason of the last failure too, beyond the report's three


def test_the_trials_index_escapes_what_a_record_says_and_links_each_pair(tmp_path):
    """A trial's detail can hold what its agent answered: in pages/index.html it is text, never
    markup; each paired trial's row links its pair's page, and a playwright trial's row none."""
    import html
    import re

    run_dir = write_synthetic_run(tmp_path)
    hostile = '<img src=x onerror="alert(1)"> & \'quoted\''
    path = run_dir / "trials" / "alpha-a2-control.json"
    record = TrialRecord.model_validate_json(path.read_bytes())
    write_trial_record(run_dir, record.model_copy(update={"detail": hostile}))
    write_report(run_dir)
    index = (run_dir / "pages" / "index.html").read_text()
    assert "<img" not in index and 'onerror="' not in index
    row = re.search(r'<tr><td><a href="alpha-a2-control.html">alpha-a2-control</a></td><td class="failed">failed</td>'
                    r"<td>([^<]*)</td>.*?</tr>", index)
    assert row and html.unescape(row.group(1)) == f"failed: wrong_answer: {hostile}"
    rows = re.findall(r'<tr><td><a href="([^"]+)\.html">[^<]+</a></td>(.*?)</tr>', index)
    assert sorted(t for t, _ in rows) == sorted(p.stem for p in (run_dir / "trials").glob("*.json"))
    for trial_id, rest in rows:
        pair = trial_id.rsplit("-", 1)[0]
        linked = f"<a href=pair-{pair}.html>pair</a>" in rest
        assert linked == (not trial_id.endswith("-playwright") and (run_dir / "pages" / f"pair-{pair}.html").exists()), trial_id


def test_a_smaller_index_removes_its_numbered_pages_and_no_trial_s_page(tmp_path):
    """index-N.html a larger index left go; a trial of a task named `index` keeps its page."""
    from pytest_webbench.viewer.index_pages import IndexInputs, write_index

    pages = tmp_path / "pages"
    pages.mkdir()
    for name in ["index-2.html", "index-17.html", "index-a1-control.html", "index-2.htmlx"]:
        (pages / name).write_text("old")
    inputs = IndexInputs(trials=[("index-a1-control", "passed"), ("t-a1-control", "failed")], why={}, flagged=set(),
                         rejected=set(), pair_ids=set(), discordant=[])
    write_index(pages, inputs, 1, {p.name for p in pages.iterdir()})
    assert sorted(p.name for p in pages.iterdir()) == ["index-2.html", "index-2.htmlx", "index-a1-control.html", "index.html"]
    assert (pages / "index-a1-control.html").read_text() == "old" and "t-a1-control" in (pages / "index.html").read_text()


def test_a_record_another_run_wrote_is_left_out_of_the_report_and_of_what_resume_counts_done(tmp_path):
    """Found by a review of bad inputs: a record file copied in from another run (or written under a
    schema this version does not know) was counted as this run's, by the report and by --resume."""
    from pytest_webbench.planning.resume import trials_to_skip

    run_dir = write_synthetic_run(tmp_path)
    honest = build_report_from_dir(run_dir)
    path = run_dir / "trials" / "alpha-a2-control.json"  # failed; its pair's treatment passed
    record = json.loads(path.read_text())
    assert trials_to_skip(run_dir, False, move_aside=False) >= {"alpha-a2-control", "alpha-a2-treatment"}
    for change in ({"experiment_id": "OTHER"}, {"schema_version": 99}):
        path.write_text(json.dumps({**record, **change, "outcome": "passed", "reward": 1.0}))
        report = build_report_from_dir(run_dir)
        assert any("alpha-a2-control" in p and "another run or under a schema" in p for p in report.problems)
        control = next(r for r in report.by_arm_task if (r.arm, r.task) == ("control", "alpha"))
        before = next(r for r in honest.by_arm_task if (r.arm, r.task) == ("control", "alpha"))
        assert (control.passed, control.missing) == (before.passed, before.missing + 1)  # not a pass: missing
        done = trials_to_skip(run_dir, False, move_aside=False)
        assert "alpha-a2-control" not in done and "alpha-a2-treatment" not in done  # the pair runs again whole
        assert path.exists()  # --collect-only's listing moves nothing aside


def test_resume_moves_a_half_pair_aside_only_when_it_runs(tmp_path):
    from pytest_webbench.planning.resume import trials_to_skip

    run_dir = write_synthetic_run(tmp_path)  # gamma a3: control recorded, treatment missing
    half = run_dir / "trials" / "gamma-a3-control.json"
    assert "gamma-a3-control" not in trials_to_skip(run_dir, False, move_aside=False) and half.exists()
    assert "gamma-a3-control" not in trials_to_skip(run_dir, False) and not half.exists()
    assert (run_dir / "trials" / "superseded" / "gamma-a3-control.json").exists()


def test_a_folder_where_a_record_should_be_is_named_among_the_problems(run_dir):
    """It was counted missing and named nowhere (found by a review of bad inputs)."""
    record = run_dir / "trials" / "alpha-a1-control.json"
    record.unlink()
    record.mkdir()
    report = build_report_from_dir(run_dir)
    assert any(p.startswith(f"{record}: unreadable trial record (not a file)") for p in report.problems), report.problems


def test_a_sequential_stop_is_printed_as_what_it_shows():
    """An effect is printed only where it survives Holm over the run's tasks at the rule's level; a stop
    without an effect says no effect was shown, never "futility" read as evidence of none."""
    from pytest_webbench.report.sequential import TaskStop, verdict_words
    from pytest_webbench.results.decisions import TaskDecision

    def stop(outcome, p_holm, favours="treatment"):
        decision = TaskDecision(task="t", outcome=outcome, favours=favours if outcome == "effect" else None, speed="futility",
                                pairs=7, last_attempt=7, control_only=0, treatment_only=6, treatment_faster=0, control_faster=0,
                                p_value=0.01)
        return TaskStop(task="t", decision=decision, pairs_run=7, p_holm=p_holm, speed_p_holm=None)

    assert verdict_words(stop("effect", 0.02), 0.025, 20).startswith("pass/fail: effect for treatment at pair 7")
    kept_out = verdict_words(stop("effect", 0.043), 0.025, 20)
    assert "not kept once adjusted" in kept_out and "no effect claimed" in kept_out and "effect for" not in kept_out
    early = verdict_words(stop("futility", None), 0.025, 20)
    assert early.startswith("pass/fail: no effect shown; after 7 pairs") and "out of reach by the cap" in early
    assert "none ruled out" in early
    assert verdict_words(stop("futility", None), 0.025, 7).startswith("pass/fail: no effect shown by the cap (7 pairs")
    # a walk that stopped before its task did says where, and why the task ran on (found by a cold read:
    # "stopped after 7 pairs as out of reach" where pass/fail had stopped at 2 and speed ran on)
    ran_on = stop("futility", None)
    ran_on.decision.pass_fail_stopped_at, ran_on.decision.speed_stopped_at = 2, 7
    said = verdict_words(ran_on, 0.025, 20)
    assert "after 2 pairs" in said and "the task ran on to 7 pairs for its speed walk" in said
    assert verdict_words(TaskStop(task="t", decision=None, pairs_run=20), 0.025, 20) == "not decided (ran to its cap)"
