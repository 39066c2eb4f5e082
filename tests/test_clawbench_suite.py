"""ClawBench as a suite: its cases become Harbor task folders (`design/clawbench.py`), planned in
the arms each can run (treatment only where an injected batch covers its site), graded by
interception and, where the case's check does not decide, by the judge through the model gateway.
`clawbench-local` holds write tasks in ClawBench's own format on local-web's sites, so the whole
path runs here: the reference and nop runners, and the scripted model as the judge."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from pytest_webbench.design.clawbench import load_cases
from pytest_webbench.design.suite import SuiteError, WebbenchMeta, load_suite
from pytest_webbench.service_loop import ServiceLoop

sys.path.insert(0, str(Path(__file__).parent / "support"))
from model_endpoint import ModelEndpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLAWBENCH = ROOT / "suites" / "clawbench"
LOCAL = ROOT / "suites" / "clawbench-local"


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--results-dir={pytester.path / 'results'}", *args)


def collected(result) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_trial[" in line]


def manifest_of(pytester, experiment: str) -> dict:
    return json.loads((pytester.path / "results" / experiment / "manifest.json").read_text())


@pytest.mark.parametrize("options, gradable", [((), 129), (("--clawbench-set", "v1"), 70), (("--clawbench-set", "v1-lite"), 12),
                                                (("--clawbench-set", "v1", "--clawbench-ungradable"), 152),
                                                # names with capitals or underscores, no metadata: planned all the same
                                                (("--clawbench-set", "environmental-observation"), 12),
                                                (("--clawbench-set", "claw-eval"), 19)])
def test_collect_only_plans_every_gradable_case_in_each_arm_it_can_run(pytester, options, gradable):
    result = run(pytester, "--suite", str(CLAWBENCH), *options, "--experiment-id", "cb", "--collect-only", "-q")
    assert result.ret == 0, result.stderr.str()
    ids = collected(result)
    # no site of ClawBench's has an injected batch yet: control and playwright, and no treatment
    assert len(ids) == 2 * gradable
    assert {i.rsplit("-", 1)[1] for i in ids} == {"control", "playwright"}
    manifest = manifest_of(pytester, "cb")
    assert manifest["case_set"] == (options[1] if options else "v2") and manifest["versions"]["clawbench-eval"] == "0.11.0"
    assert manifest["ungradable"] == ("--clawbench-ungradable" in options)
    assert all(t["pair_id"] is None and t["pair_position"] is None for t in manifest["trials"])  # lone trials, not broken pairs
    assert manifest["broken_pairs"] == []
    ungradable = sum(limits["ungradable"] for limits in manifest["task_limits"].values())
    assert ungradable == (82 if "--clawbench-ungradable" in options else 0)


@pytest.mark.parametrize("options, message", [
    (("--suite", str(CLAWBENCH), "--clawbench-set", "v9"), "*case set 'v9': choose one of v2, v1, v1-lite*"),
    (("--suite", str(ROOT / "suites" / "local-web"), "--clawbench-set", "v1"), "*this suite's tasks are its own*"),
    (("--suite", str(LOCAL), "--clawbench-set", "v1"), "*this suite's cases are its own*"),
    (("--suite", str(LOCAL)), "*are graded by an LLM judge, and --runner reference runs no model: give --judge-model*"),
    (("--suite", str(LOCAL), "-k", "local-04"), "*(local-04-wiki-signup) are graded by an LLM judge*"),
    (("--suite", str(LOCAL), "--judge-model", "nowhere/m"), "*the judge: --model 'nowhere/m'*"),
    (("--suite", str(ROOT / "suites" / "local-web"), "--judge-model", "openai/gpt-4o-mini"), "*no task of local-web is graded by a judge*"),
])
def test_a_case_set_or_judge_that_cannot_be_used_is_refused_before_any_trial(pytester, monkeypatch, options, message):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = run(pytester, *options, "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # refused while planning (stderr), or, with -k, once the selection is collected (pytest.exit: stdout)
    pytest.LineMatcher(result.stderr.lines + result.stdout.lines).fnmatch_lines([message])
    assert not (pytester.path / "results").exists() or not any((pytester.path / "results").iterdir())


def test_a_judge_without_its_provider_s_key_is_refused_before_any_trial(pytester, monkeypatch):
    """(Planning alone, --collect-only, needs no key: the CLI and Kernel access are checked then too.)"""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run(pytester, "--suite", str(LOCAL), "--judge-model", "openai/gpt-4o-mini", "--allow-unpriced")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the judge openai/gpt-4o-mini: OPENAI_API_KEY is not set*"])


def test_a_case_becomes_a_harbor_task_folder_with_its_limits_check_and_given_files():
    case = next(c for c in load_cases("v2") if c.name == "v2-047-daily-life-personal-care-taskrabbit")
    task = next(t for t in load_suite(CLAWBENCH).tasks if t.name == case.name)
    raw = tomllib.loads((task.path / "task.toml").read_text())
    assert raw["task"]["name"] == f"clawbench/{case.name}"
    assert task.timeout_sec == case.time_limit * 60 and task.agent_network_mode == "no-network"
    assert task.meta.grading == "request" and task.meta.request.url_pattern == case.eval_schema.url_pattern
    assert task.meta.request.method == case.eval_schema.method and task.meta.site == "taskrabbit"
    assert task.meta.arms == ["control", "playwright"] and task.meta.group == case.metadata.metaclass
    assert raw["metadata"]["clawbench"] == {"case_set": "v2", "task_id": 47, "class": "personal-care", "platform": "taskrabbit",
                                            "sites_involved": ["taskrabbit.com"]}
    given = sorted(p.name for p in (task.path / "given").iterdir())
    assert given == ["address_info.json", "alex_green_personal_info.json", "alex_green_resume.pdf"]
    assert (task.path / "given" / "address_info.json").read_bytes() == (case.folder / "extra_info" / "address_info.json").read_bytes()
    assert task.instruction.startswith(case.instruction) and "address_info.json" in task.instruction
    assert task.meta.start_blank  # ClawBench's agent starts on about:blank
    # the site the agent starts on is the first host the case involves
    assert load_suite(CLAWBENCH).spec.sites["taskrabbit"].base_url == "https://taskrabbit.com"


def test_a_task_s_arms_and_its_batch_must_agree():
    base = {"site": "s", "grading": "pinned", "answer": {"x": {"type": "integer", "equals": 1}}, "turn_cap": 5, "spend_limit_usd": 1}
    WebbenchMeta.model_validate({**base, "arms": ["control", "playwright"]})  # no treatment: no batch needed
    with pytest.raises(ValueError, match="tool_batch: a task without the treatment arm injects no batch"):
        WebbenchMeta.model_validate({**base, "arms": ["control", "playwright"], "tool_batch": "s"})
    with pytest.raises(ValueError, match="or leave treatment out of arms"):
        WebbenchMeta.model_validate({**base, "arms": ["control", "treatment"]})
    with pytest.raises(ValueError, match="list each arm once"):
        WebbenchMeta.model_validate({**base, "arms": ["control", "control"], "placebo": True})


def test_a_broken_local_case_is_one_error_naming_its_file(tmp_path):
    import shutil

    shutil.copytree(LOCAL, tmp_path / "suite", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "suites" / "local-web", tmp_path / "local-web")
    case = tmp_path / "suite" / "cases" / "local-03-market-quote" / "task.json"
    raw = json.loads(case.read_text())
    raw["eval_schema"]["method"] = "FETCH"
    case.write_text(json.dumps(raw))
    with pytest.raises(SuiteError, match=r"local-03-market-quote/task.json: eval_schema.method: 'FETCH' is not one of"):
        load_suite(tmp_path / "suite")


@pytest.fixture(scope="module")
def judge_endpoint():
    loop = ServiceLoop()
    endpoint = ModelEndpoint()
    url = loop.serve(endpoint.app, "scripted judge")
    yield endpoint, url + "/v1"
    loop.close()


JUDGE = ("--judge-model", "openai/gpt-4o-mini", "--allow-unpriced")


@pytest.mark.chromium
def test_clawbench_local_runs_end_to_end_graded_by_check_and_judge_and_nothing_reaches_a_site(pytester, monkeypatch, judge_endpoint):
    endpoint, judge_url = judge_endpoint
    writes = pytester.path / "writes.jsonl"
    monkeypatch.setenv("SITE_WRITES_LOG", str(writes))
    monkeypatch.setenv("SHOP_ORDERS_LOG", str(writes))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-real-key-0c4f")
    judged_before = len(endpoint.model.judged)
    result = run(pytester, "--suite", str(LOCAL), *JUDGE, "--judge-base-url", judge_url, "--experiment-id", "cbl")
    result.assert_outcomes(passed=18)
    exp = pytester.path / "results" / "cbl"
    records = {p.stem: json.loads(p.read_text()) for p in (exp / "trials").glob("*.json")}
    for trial_id, r in records.items():
        assert r["submissions"] >= 1, trial_id
        # every intercepted request is judged, as verify.py judges it: a body in the check only chose the request
        # both rubrics asked, through the trial's own gateway route, which logged them
        assert r["judge"]["strict"]["match"] and r["judge"]["lenient"]["match"] and r["judge"]["requests"] == 2
        log = [json.loads(line) for line in (exp / r["harbor_trial_dir"] / "judge" / "model-log.jsonl").read_text().splitlines()]
        assert [entry["status"] for entry in log] == [200, 200]
    # the judge saw the instruction and the intercepted request, never the real key; each rubric once per trial
    asked = endpoint.model.judged[judged_before:]
    assert len(asked) == 36 and all("INTERCEPTED REQUEST:" in a["user"] for a in asked)
    assert {a["system"].split("\n", 1)[0] for a in asked} == {"You are a strict evaluator for a web-agent benchmark.",
                                                             "You are a lenient evaluator for a web-agent benchmark."}
    assert all(r["key"] == "sk-judge-real-key-0c4f" for r in endpoint.model.requests[-36:] if r.get("api") == "chat")
    assert not writes.exists() or writes.read_text() == ""  # no intercepted submission reached any site
    report = (exp / "report.md").read_text()
    assert "## Write tasks: ClawBench's metrics" in report
    assert "| control | 6 | 6/6 | 0 (0) | 6 | 6/6 | 6/6 |" in report
    # ClawBench's own figures, as rescore.py computes them: every run, reward over all runs
    assert "| control | 6 | 6 (100.0%) | 100.0% | 100.0% | 6/6 | 0 / 0 | 0 |" in report
    # exported as ClawBench's run folders, its own rescore.py reads the run's figures
    from clawbench.eval.rescore import aggregate_batch

    from pytest_webbench.report.__main__ import main as report_main

    assert report_main(["clawbench-export", str(exp), str(pytester.path / "cb-export")]) == 0
    figures = {f["arm"]: f for f in json.loads((exp / "report.json").read_text())["clawbench"]}
    for arm in ("control", "treatment", "playwright"):
        theirs = aggregate_batch(pytester.path / "cb-export" / arm, ["strict", "lenient"])
        assert (theirs["n_total"], theirs["n_intercepted"], theirs["n_match_lenient"]) == (
            figures[arm]["runs"], figures[arm]["intercepted"], figures[arm]["match_lenient"]) == (6, 6, 6)
    # grouped by the cases' metaclass: shopping holds the checkout and the quote
    assert "| shopping | treatment | 2 | 2 | 2/2 | 2/2 |" in report
    # treatment's batch offers a shortcut on each: fewer browser calls than control, pair by pair
    for task in ("local-01-shop-checkout", "local-02-codehub-issue", "local-03-market-quote", "local-04-wiki-signup"):
        assert records[f"{task}-a1-treatment"]["calls"]["forwarded"] < records[f"{task}-a1-control"]["calls"]["forwarded"], task
    # control made its account through the sign-up form's declarative WebMCP tool (a native tool)
    assert records["local-04-wiki-signup-a1-control"]["calls"]["webmcp_invokes"].get("native:completed") == 1
    # every trial had an e-mail account of its own on the inbox twin; the verified sign-up needed the
    # code sent there (its ticket is shown only after it), the application the given resume uploaded
    addresses = [r["inbox"] for r in records.values()]
    assert all(re.fullmatch(r"cb[0-9a-f]{12}@mail\.localhost \(Postbox\)", a) for a in addresses) and len(set(addresses)) == 18
    for arm in ("control", "treatment", "playwright"):
        trial = exp / records[f"local-06-shop-job-application-a1-{arm}"]["harbor_trial_dir"]
        sent = json.dumps(json.loads((trial / "requests.json").read_text())["intercepted"][0]["body"])
        # ClawBench reads a multipart body as a form would read it (one odd field): its text is all there
        assert "alex_green_resume.pdf" in sent and "%PDF" in sent and records[f"local-06-shop-job-application-a1-{arm}"]["inbox"].split()[0] in sent, arm
        assert records[f"local-05-wiki-verified-signup-a1-{arm}"]["submissions"] == 1


@pytest.mark.chromium
def test_clawbench_local_with_the_nop_runner_fails_every_trial_no_submission_and_asks_no_judge(pytester, monkeypatch, judge_endpoint):
    endpoint, judge_url = judge_endpoint
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judged_before = len(endpoint.model.judged)
    result = run(pytester, "--suite", str(LOCAL), "--runner", "nop", *JUDGE, "--judge-base-url", judge_url,
                 "--experiment-id", "nop", "-k", "local-01 or local-04")
    result.assert_outcomes(failed=6)
    records = [json.loads(p.read_text()) for p in (pytester.path / "results" / "nop" / "trials").glob("*.json")]
    # the nop agent makes no browser call at all: ClawBench's "no interception" is a 0 either way
    assert {(r["outcome"], r["stop_reason"]) for r in records} <= {("failed", "no_submission"), ("failed", "no_browser_call")}
    assert all(r["judge"] is None for r in records) and len(endpoint.model.judged) == judged_before


def test_the_site_s_write_log_records_a_write_that_does_reach_it(monkeypatch, tmp_path):
    """The oracle of "nothing reached the site" is this log: it must see a real write."""
    from starlette.testclient import TestClient

    log = tmp_path / "writes.jsonl"
    monkeypatch.setenv("SITE_WRITES_LOG", str(log))
    monkeypatch.syspath_prepend(str(ROOT / "suites" / "local-web" / "sites"))
    import codehub
    import wiki

    with TestClient(wiki.create_app()) as client:
        assert client.post("/signup/confirm", data={"username": "x1y", "email": "a@b.c"}).status_code == 200
    with TestClient(codehub.create_app()) as client:
        assert client.post("/api/v3/repos/acme/rocket/issues", json={"title": "t", "labels": ["bug"]}).status_code == 201
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(entry["site"], entry["kind"]) for entry in lines] == [("wiki", "account"), ("codehub", "issue")]


def _local_copy(tmp: Path, edit) -> Path:
    """clawbench-local and the local-web sites it uses, side by side, with `edit` applied to the copy."""
    import shutil

    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "suites" / "local-web", tmp / "suites" / "local-web", ignore=ignore)
    shutil.copytree(LOCAL, tmp / "suites" / "clawbench-local", ignore=ignore)
    edit(tmp / "suites" / "clawbench-local")
    return tmp / "suites" / "clawbench-local"


@pytest.mark.chromium
def test_a_task_without_a_batch_runs_alone_beside_pairs_and_shards_merge_to_the_whole_run(pytester, monkeypatch, judge_endpoint):
    from pytest_webbench.report.__main__ import main as report_main

    def no_codehub_batch(suite: Path):
        toml = suite / "suite.toml"
        toml.write_text(toml.read_text().replace('tool_batch = "../local-web/tools/codehub.js"\n', ""))

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the suite's judged tasks need a judge, though deselected here
    suite = _local_copy(pytester.path / "copy", no_codehub_batch)

    def go(results: str, *args):
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--suite", str(suite), "-k", "local-01 or local-02", "--experiment-id", "mixed",
            f"--results-dir={pytester.path / results}", *JUDGE, "--judge-base-url", judge_endpoint[1], *args)

    go("whole").assert_outcomes(passed=5)  # shop: a pair and its playwright trial; codehub: control and playwright
    whole = pytester.path / "whole" / "mixed"
    manifest = json.loads((whole / "manifest.json").read_text())
    lone = [t for t in manifest["trials"] if t["task"] == "local-02-codehub-issue"]
    assert [t["arm"] for t in lone] == ["control", "playwright"] and all(t["pair_id"] is None for t in lone)
    assert manifest["task_limits"]["local-02-codehub-issue"]["arms"] == ["control", "playwright"]
    assert manifest["broken_pairs"] == []
    report = json.loads((whole / "report.json").read_text())
    assert [r["task"] for r in report["paired"]] == ["local-01-shop-checkout"]
    assert {(r["arm"], r["task"]) for r in report["by_arm_task"]} >= {("control", "local-02-codehub-issue"),
                                                                      ("playwright", "local-02-codehub-issue")}
    go("m1", "--shard", "1/2")
    go("m2", "--shard", "2/2")
    merged = pytester.path / "merged" / "mixed"
    assert report_main(["merge", str(merged), str(pytester.path / "m1" / "mixed"), str(pytester.path / "m2" / "mixed")]) == 0
    assert json.loads((merged / "manifest.json").read_text())["trials"] == manifest["trials"]
    from test_resume import outcome_figures

    assert outcome_figures(json.loads((merged / "report.json").read_text())) == outcome_figures(report)
    assert report["headline"]["treatment"]["tasks"] == 1 and report["headline"]["control"]["tasks"] == 2


@pytest.mark.chromium
def test_an_ungradable_case_runs_when_asked_and_is_counted_nowhere(pytester, monkeypatch, judge_endpoint):
    def placeholder(suite: Path):
        case = suite / "cases" / "local-02-codehub-issue" / "task.json"
        raw = json.loads(case.read_text())
        raw["eval_schema"] = {"url_pattern": "__PLACEHOLDER_WILL_NOT_MATCH__", "method": "POST"}
        case.write_text(json.dumps(raw))

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    suite = _local_copy(pytester.path / "copy", placeholder)
    judge = (*JUDGE, "--judge-base-url", judge_endpoint[1])
    planned = run(pytester, "--suite", str(suite), *judge, "-k", "local-01 or local-02", "--collect-only", "-q", "--experiment-id", "p0")
    assert not any("codehub" in i for i in collected(planned))  # not planned unless asked for
    # one arm of the ungradable case is enough to see it run (each of its trials waits out its run)
    result = run(pytester, "--suite", str(suite), *judge, "-k", "(local-02 and control) or local-01", "--clawbench-ungradable",
                 "--experiment-id", "p1")
    result.assert_outcomes(passed=3, failed=1)  # it ran, and could only fail: no request matches the placeholder
    report = json.loads((pytester.path / "results" / "p1" / "report.json").read_text())
    assert report["ungradable_tasks"] == ["local-02-codehub-issue"]
    assert {r["task"] for r in report["by_arm_task"]} == {"local-01-shop-checkout"}
    assert report["planned_trials"] == 3 and report["complete"]
    assert "Ungradable ClawBench cases" in (pytester.path / "results" / "p1" / "report.md").read_text()


def test_clawbench_cases_are_all_judged_so_a_run_of_them_needs_a_judge(pytester):
    result = run(pytester, "--suite", str(LOCAL), "-k", "local-01 or local-02", "--collect-only", "-q", "--experiment-id", "nj")
    assert result.ret != 0
    assert "2 task(s) (local-01-shop-checkout, local-02-codehub-issue) are graded by an LLM judge" in result.stdout.str()


def test_the_plan_hashes_the_sites_it_borrows_from_another_suite(tmp_path):
    """clawbench-local serves local-web's sites: a change there is a change of the suite (--resume checks)."""
    suite = _local_copy(tmp_path, lambda s: None)
    before = load_suite(suite).content_hashes
    shell = tmp_path / "suites" / "local-web" / "sites" / "common.py"
    shell.write_text(shell.read_text() + "\n# changed\n")
    after = load_suite(suite).content_hashes
    assert {k for k in before if before[k] != after[k]} == {"site:codehub", "site:shop", "site:wiki", "site:market", "site:mail"}


@pytest.mark.parametrize("given", ["../../../../etc/hostname", "extra_info/link.json"])
def test_a_case_gives_its_agent_only_files_inside_its_own_folder(tmp_path, given):
    def leak(suite: Path):
        case = suite / "cases" / "local-04-wiki-signup"
        (case / "extra_info" / "link.json").symlink_to("/etc/hostname")
        raw = json.loads((case / "task.json").read_text())
        raw["extra_info"] = [{"path": given, "description": "x"}]
        (case / "task.json").write_text(json.dumps(raw))

    suite = _local_copy(tmp_path, leak)
    with pytest.raises(SuiteError, match=r"local-04-wiki-signup/task.json: extra_info: .* is not a file inside the case's folder"):
        load_suite(suite)


@pytest.mark.parametrize("named", [False, True])
def test_a_resumed_run_takes_its_judge_as_the_first_run_chose_it(pytester, monkeypatch, named):
    """A judge that was the run's own model comes back as the run's model (its price and endpoint),
    not as if --judge-model had named it, which would price it from litellm's table and call the
    provider's URL instead of --model-base-url."""
    from pytest_webbench.planning.options import _from_manifest

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judge = ("--judge-model", "openai/gpt-4o-mini") if named else ()
    result = run(pytester, "--suite", str(LOCAL), "--runner", "codex", "--model", "openai/own-model", "--model-price", "1,2",
                 "--model-base-url", "http://127.0.0.1:9/v1", *judge, "--experiment-id", "j", "--collect-only", "-q")
    assert result.ret == 0, result.stderr.str()
    manifest = manifest_of(pytester, "j")
    assert manifest["judge_model"] == ("openai/gpt-4o-mini" if named else "openai/own-model")
    assert manifest["judge_named"] is named
    resumed = _from_manifest("j", pytester.path / "results", {"suite": None})
    assert resumed["judge_model"] == ("openai/gpt-4o-mini" if named else None)
    assert resumed["model_price"] == "1,2" and resumed["model_base_url"] == "http://127.0.0.1:9/v1"


# What this harness gives a case's agent that the package's Harbor adapter does not, or the reverse, and why.
DIFFERENCES = {
    "email_credentials.json": "ClawBench's runtime makes a disposable PurelyMail account per run; none is made here, "
                              "so its credentials are not given (docs/suites.md)",
    "the adapter's runtime lines": "its CDP endpoint and noVNC lines name ClawBench's own Chromium; this harness gives its "
                                   "browser through its tools and names the start page (design/arms.py)",
}


@pytest.mark.parametrize("case_set", ["v2", "v1", "v1-lite", "environmental-observation", "claw-eval"])
def test_every_case_s_instruction_files_and_time_are_what_the_package_builds(case_set, tmp_path):
    """Differential, for every bundled case: the instruction is the package's build_instruction (the
    Harbor adapter's harbor_instruction less its runtime lines), the files its prepare_personal_info
    and copy_extra_info stage (less the e-mail credentials), the time limit its adapter's."""
    from clawbench.eval.harbor_adapter import harbor_instruction
    from clawbench.runner.run_support.task import build_instruction, copy_extra_info, prepare_personal_info

    from pytest_webbench.design.clawbench import SHARED_USER, installed_root, task_name

    suite = load_suite(CLAWBENCH, case_set=case_set, ungradable=True)
    tasks = {t.name: t for t in suite.tasks}
    shared = installed_root().parents[1].joinpath(*SHARED_USER).parent
    email = json.loads((shared / SHARED_USER[-1]).read_text())["contact"]["email"]
    staged, _ = prepare_personal_info(shared, email, "", tmp_path)
    cases = load_cases(case_set)
    assert len(tasks) == len(cases)
    for case in cases:
        raw = json.loads((case.folder / "task.json").read_text())
        task = tasks[task_name(case)]
        assert task.instruction == build_instruction(raw), case.name
        assert harbor_instruction(raw).startswith(task.instruction + "\n\n---\nHarbor browser runtime:"), case.name
        assert task.timeout_sec == int(float(raw["time_limit"]) * 60), case.name
        theirs = tmp_path / case.name
        theirs.mkdir()
        for made in staged.iterdir():
            (theirs / made.name).write_bytes(made.read_bytes())
        copy_extra_info(raw, case.folder, theirs)
        ours = {p.name: p.read_bytes() for p in (task.path / "given").iterdir()}
        expected = {p.name: p.read_bytes() for p in theirs.iterdir() if p.name != "email_credentials.json"}
        assert ours.keys() == expected.keys(), case.name
        for name, data in ours.items():
            if name.endswith(".pdf"):  # rendered again: the same pages, another creation date
                assert data[:8] == expected[name][:8] and abs(len(data) - len(expected[name])) < 64, (case.name, name)
            else:
                assert data == expected[name], (case.name, name)
        assert task.meta.start_blank


@pytest.mark.chromium
def test_a_request_its_check_matches_is_still_judged_and_the_judge_can_fail_it(pytester, monkeypatch, judge_endpoint):
    """ClawBench's verify.py judges every intercepted request: the check's body only chose it. Here the
    check matches on the label, the instruction names the title, and the agent sends another title:
    graded by the check alone it passed; the judge fails it, as ClawBench's would."""
    def wrong_title(suite: Path):
        case = suite / "cases" / "local-02-codehub-issue"
        raw = json.loads((case / "task.json").read_text())
        raw["eval_schema"]["body"] = {"labels": ["bug"]}
        raw["instruction"] = raw["instruction"].replace("`bug`", "bug")  # the title is the one value the judge weighs
        (case / "task.json").write_text(json.dumps(raw))
        solution = case / "solution" / "reference.py"
        solution.write_text(solution.read_text().replace("'Telemetry drops on reconnect'", "'Telemetry is fine'")
                            .replace('title="Telemetry drops on reconnect"', 'title="Telemetry is fine"'))

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    suite = _local_copy(pytester.path / "copy", wrong_title)
    result = run(pytester, "--suite", str(suite), *JUDGE, "--judge-base-url", judge_endpoint[1], "-k", "codehub",
                 "--experiment-id", "wt")
    result.assert_outcomes(failed=3)
    for path in (pytester.path / "results" / "wt" / "trials").glob("*.json"):
        record = json.loads(path.read_text())
        assert record["submissions"] == 1 and record["stop_reason"] == "wrong_submission", record["detail"]
        assert record["judge"]["lenient"]["match"] is False and "0 of 1 quoted values" in record["judge"]["lenient"]["reason"]


def test_an_inbox_site_that_speaks_no_account_api_is_refused_naming_its_field(tmp_path):
    """Known only once its app is loaded: the run's services refuse it before any trial, naming the
    task file and the field."""
    from pytest_webbench.trial.services import RunServices

    def shop_as_inbox(suite: Path):
        toml = suite / "suite.toml"
        toml.write_text(toml.read_text().replace('inbox_site = "mail"', 'inbox_site = "shop"'))

    suite = load_suite(_local_copy(tmp_path, shop_as_inbox))
    with pytest.raises(SuiteError, match=r"task.toml: metadata.webbench.inbox \(clawbench.inbox_site\): site 'shop' does not "
                                         r"speak PurelyMail's account API"):
        RunServices.start(suite, "local")
